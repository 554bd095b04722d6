"""The shipped completion scripts match the CLI, parse in their shells, and complete."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli.completions import Shell, command_specs, render

COMPLETIONS = Path(__file__).parents[2] / "completions"


@pytest.mark.parametrize("shell", list(Shell))
def test_shipped_script_matches_the_current_cli(shell: Shell) -> None:
    shipped = (COMPLETIONS / f"rr.{shell.value}").read_text(encoding="utf-8")
    assert shipped == render(app, shell), (
        f"completions/rr.{shell.value} is stale: run `rr completion {shell.value} > "
        f"completions/rr.{shell.value}`"
    )


def test_every_command_is_in_the_tree() -> None:
    paths = {spec.path for spec in command_specs(app)}
    assert {("declare",), ("topology", "validate"), ("topology", "show")} <= paths
    assert ("topology", "export") in paths


def _need(shell: str) -> str:
    found = shutil.which(shell)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{shell} is not installed (.ci/run installs it)")
        pytest.skip(f"{shell} is not installed")
    return found


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_script_parses(shell: str) -> None:
    binary = _need(shell)
    result = subprocess.run(
        [binary, "-n", str(COMPLETIONS / f"rr.{shell}")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def _bash_complete(words: list[str]) -> list[str]:
    binary = _need("bash")
    line = " ".join(words)
    script = (
        f"source {COMPLETIONS / 'rr.bash'}\n"
        f"COMP_WORDS=({line})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_rr\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run([binary, "-c", script], capture_output=True, text=True, check=True)
    return [word for word in result.stdout.splitlines() if word]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["rr", "top"], ["topology"]),
        (["rr", "topology", "s"], ["show"]),
        (["rr", "topology", "show", "--output", ""], ["table", "json", "tsv"]),
        (["rr", "declare", "--d"], ["--dry-run"]),
        (["rr", "completion", "z"], ["zsh"]),
    ],
)
def test_bash_completes(words: list[str], expected: list[str]) -> None:
    words = [word if word else "''" for word in words]
    assert _bash_complete(words) == expected


def test_bash_completes_a_file_target_for_rr_run(tmp_path: Path) -> None:
    (tmp_path / "refunds_service.py").write_text("")
    binary = _need("bash")
    script = (
        f"source {COMPLETIONS / 'rr.bash'}\n"
        "COMP_WORDS=(rr run refunds_s)\n"
        "COMP_CWORD=2\n"
        "_rr\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run(
        [binary, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert result.stdout.split() == ["refunds_service.py"]


def _zsh_lines(words: list[str]) -> dict[str, str]:
    """What zsh's line editor showed after each of ``words`` and a TAB, with the shipped
    script loaded (a real interactive zsh on a pseudo-terminal: tests/cli/zsh_complete.zsh)."""
    binary = _need("zsh")
    result = subprocess.run(
        [
            binary,
            "-f",
            str(Path(__file__).with_name("zsh_complete.zsh")),
            str(COMPLETIONS / "rr.zsh"),
            *words,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", result.stdout.replace("\r", ""))
    shown: dict[str, str] = {}
    for part in re.split(r"^== ", text, flags=re.MULTILINE)[1:]:
        typed, _, screen = part.partition("\n")
        shown[typed] = screen
    assert list(shown) == words, text
    return shown


def test_zsh_completes_every_command() -> None:
    """Every command's options complete in zsh: a help text with brackets (``[broker] url``,
    ``[default: ...]``) once made zsh refuse the whole command's specs."""
    commands = [" ".join(("rr", *spec.path)) for spec in command_specs(app)]
    typed = [f"{command} --hel" for command in commands]
    shown = _zsh_lines([*typed, "rr dlq insp", "rr status --output j", "rr completion z"])
    for words in typed:
        assert "invalid option definition" not in shown[words], shown[words]
        assert f"{words}p " in shown[words], (words, shown[words])
    assert "rr dlq inspect " in shown["rr dlq insp"]
    assert "rr status --output json " in shown["rr status --output j"]
    assert "rr completion zsh " in shown["rr completion z"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [("rr run --ur", "--url"), ("rr dlq move --t", "--to"), ("rr dlq insp", "inspect")],
)
def test_fish_completes(line: str, expected: str) -> None:
    binary = _need("fish")
    script = f"source {COMPLETIONS / 'rr.fish'}; complete -C '{line}'"
    result = subprocess.run([binary, "-c", script], capture_output=True, text=True, check=True)
    assert expected in [row.split("\t")[0] for row in result.stdout.splitlines()]
