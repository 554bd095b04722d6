"""Which URL a refused one was: ``--url`` is one URL a value, ``$RR_URL`` holds URLs
separated by spaces, and the error line says which gave it (docs/reference/cli.md, "Several hosts",
"Malformed input").

A space in a ``--url`` password (or in one of ``$RR_URL``'s) is the documented "holds a
space" refusal, never two URLs; an error about ``$RR_URL`` never names ``--url``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app

runner = CliRunner(env={"COLUMNS": "200"})

SECRET = "Zq7 s3cr3t"
"""A password with a space in it: never shown."""
SPACED = f"amqp://guest:{SECRET}@127.0.0.1:5672/"
GOOD = "amqp://guest:guest@127.0.0.1:1/"
HOLDS_A_SPACE = "broker URL holds a space or a control character (percent-encode it)"
NO_SCHEME = "broker URL must start with amqp:// or amqps:// (AMQP URLs: rr docs cli 'Connecting')"


def _status(*urls: str, env: str | None = None) -> tuple[int, str, str]:
    args = ["status", "q"]
    for url in urls:
        args += ["--url", url]
    result = runner.invoke(app, args, env={"RR_URL": env})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("urls", "env", "message"),
    [
        ([SPACED], None, f"{HOLDS_A_SPACE} (given by --url)"),
        ([GOOD, SPACED], None, f"{HOLDS_A_SPACE} (given by --url number 2)"),
        ([], SPACED, f"{HOLDS_A_SPACE} (given by $RR_URL)"),
        ([], f"{GOOD} {SPACED}", f"{HOLDS_A_SPACE} (given by $RR_URL's URL number 2)"),
        ([], f"{SPACED}   {GOOD}", f"{HOLDS_A_SPACE} (given by $RR_URL's URL number 1)"),
        ([], f"{GOOD} http://127.0.0.1/", f"{NO_SCHEME} (given by $RR_URL's URL number 2)"),
        ([], "guest:pw@127.0.0.1", f"{NO_SCHEME} (given by $RR_URL)"),
        (["guest:pw@127.0.0.1"], SPACED, f"{NO_SCHEME} (given by --url)"),  # --url wins
    ],
    ids=[
        "--url",
        "second --url",
        "RR_URL",
        "RR_URL second",
        "RR_URL first",
        "RR_URL http",
        "RR_URL no scheme",
        "--url over RR_URL",
    ],
)
def test_the_error_names_the_url_that_was_refused(
    urls: list[str], env: str | None, message: str
) -> None:
    code, stdout, stderr = _status(*urls, env=env)
    assert code == 2
    assert stderr == f"rr: error: {message}\n"
    assert stdout == ""
    assert SECRET not in stderr
    assert "s3cr3t" not in stderr


def test_rr_url_with_a_spaced_password_in_a_real_process() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", "dlq", "inspect", "dead"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RR_URL": SPACED},
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == f"rr: error: {HOLDS_A_SPACE} (given by $RR_URL)\n"


def test_several_urls_still_work_from_both() -> None:
    from rabbitctl_retry.cli.given_urls import env_urls, flag_urls

    assert flag_urls(["amqp://a/", "amqp://b/"]) == ("amqp://a/", "amqp://b/")
    assert env_urls(["amqp://a/", "amqp://b/"]) == ("amqp://a/", "amqp://b/")
    assert env_urls(["amqp://a/ \t amqps://b/\n"]) == ("amqp://a/", "amqps://b/")


@pytest.mark.parametrize(
    ("words", "urls"),
    [
        (["amqp://u:p", "ss@h/"], ("amqp://u:p ss@h/",)),
        (["amqp://u:p", "s", "s@h/", "amqp://h2/"], ("amqp://u:p s s@h/", "amqp://h2/")),
        (["guest:p", "w@h"], ("guest:p w@h",)),
        (["AMQP://h/", "http://x/"], ("AMQP://h/", "http://x/")),
        ([], ()),
    ],
)
def test_a_word_without_a_scheme_is_the_rest_of_the_url_before_it(
    words: list[str], urls: tuple[str, ...]
) -> None:
    from rabbitctl_retry.cli.given_urls import env_urls

    assert env_urls(words) == urls


def test_the_labels() -> None:
    from rabbitctl_retry.cli.given_urls import url_label

    assert url_label(from_env=False, index=0, count=1) == "--url"
    assert url_label(from_env=False, index=1, count=3) == "--url number 2"
    assert url_label(from_env=True, index=0, count=1) == "$RR_URL"
    assert url_label(from_env=True, index=2, count=3) == "$RR_URL's URL number 3"
