"""Static shell completions (bash, zsh, fish) generated from the command tree.

``rr completion SHELL`` prints one; ``completions/`` in the repository holds all three, and a
test regenerates them and fails when they no longer match the CLI. The scripts are static
(they never run ``rr`` while completing), so completing is instant and needs no broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.main


class Shell(StrEnum):
    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"


@dataclass(frozen=True, slots=True)
class OptionSpec:
    names: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...]
    files: bool
    help: str

    def completes(self, *, choices: str, files: str, other: str) -> str:
        """What a shell completes this option's value with, in that shell's words:
        ``choices`` (``{words}`` stands for the choices, space-separated), ``files`` for a
        file name, else ``other``."""
        if self.choices:
            return choices.format(words=" ".join(self.choices))
        return files if self.files else other


@dataclass(frozen=True, slots=True)
class CommandSpec:
    path: tuple[str, ...]
    help: str
    subcommands: tuple[str, ...]
    options: tuple[OptionSpec, ...]
    files: bool
    """Whether a positional argument is a file path."""
    argument_choices: tuple[str, ...] = ()
    """The values a positional argument takes, when it is an enum."""


def command_specs(app: typer.Typer) -> list[CommandSpec]:
    """Every command of ``app``, depth first, the root (path ``()``) first."""
    specs: list[CommandSpec] = []
    _walk(typer.main.get_command(app), (), specs)
    return specs


FILE_TARGETS = frozenset(
    {
        ("run", "target"),
        ("simulate", "target"),
        ("dlq", "export", "file"),
        ("dlq", "edit", "body_file"),
    }
)
"""(command path, parameter) pairs that take a module or a file (``rr run path/to/svc.py``)
but are read as text (so that ``./-`` stays a file, docs/reference/cli.md, "Files rr reads"):
completed with file names."""


def _argument_values(path: tuple[str, ...], name: str) -> tuple[str, ...]:
    """The values a positional argument completes with, where they are known when the script
    is generated: the topics of ``rr docs`` (the pages of the docs tree: cli/docs.py)."""
    if (*path, name) == ("docs", "topic"):
        from rabbitctl_retry.cli.docs import topic_names

        return topic_names()
    return ()


def _walk(command: Any, path: tuple[str, ...], specs: list[CommandSpec]) -> None:
    subcommands: dict[str, Any] = {}
    if hasattr(command, "list_commands"):  # a group: its commands, loaded (cli/lazy.py)
        ctx = typer.Context(command)
        subcommands = {name: command.get_command(ctx, name) for name in command.list_commands(ctx)}
    visible = {name: sub for name, sub in subcommands.items() if not getattr(sub, "hidden", False)}
    options: list[OptionSpec] = []
    files = False
    argument_choices: tuple[str, ...] = ()
    for param in command.params:
        annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        is_path = isinstance(annotation, type) and issubclass(annotation, Path)
        if getattr(param, "param_type_name", "") == "argument":
            files = files or is_path or (*path, param.name) in FILE_TARGETS
            if isinstance(annotation, type) and issubclass(annotation, Enum):
                argument_choices = tuple(str(member.value) for member in annotation)
            argument_choices = argument_choices or _argument_values(path, param.name)
            continue
        if getattr(param, "hidden", False):
            continue
        choices: tuple[str, ...] = ()
        if isinstance(annotation, type) and issubclass(annotation, Enum):
            choices = tuple(str(member.value) for member in annotation)
        options.append(
            OptionSpec(
                names=tuple(param.opts) + tuple(param.secondary_opts),
                takes_value=not getattr(param, "is_flag", False),
                choices=choices,
                files=is_path or (*path, param.name) in FILE_TARGETS,
                help=_first_line(getattr(param, "help", None) or ""),
            )
        )
    options.append(OptionSpec(("-h", "--help"), False, (), False, "Show help and exit."))
    specs.append(
        CommandSpec(
            path=path,
            help=_first_line(getattr(command, "help", None) or ""),
            subcommands=tuple(visible),
            options=tuple(options),
            files=files,
            argument_choices=argument_choices,
        )
    )
    for name, sub in visible.items():
        _walk(sub, (*path, name), specs)


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line.replace("'", "").replace('"', "").replace("`", "")


def render(app: typer.Typer, shell: Shell) -> str:
    specs = command_specs(app)
    match shell:
        case Shell.BASH:
            return _bash(specs)
        case Shell.ZSH:
            return _zsh(specs)
        case Shell.FISH:
            return _fish(specs)


_HEADER = "# Generated by `rr completion {shell}`; regenerate after changing the CLI.\n"


def _key(path: tuple[str, ...]) -> str:
    return " ".join(path)


def _bash(specs: list[CommandSpec]) -> str:
    lines = [_HEADER.format(shell="bash").rstrip(), "_rr() {", "    local cur prev path word i"]
    lines += [
        '    cur="${COMP_WORDS[COMP_CWORD]}"',
        '    prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    path=""',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        word="${COMP_WORDS[i]}"',
        '        case "$path|$word" in',
    ]
    for spec in specs:
        for sub in spec.subcommands:
            new = _key((*spec.path, sub))
            lines.append(f'            "{_key(spec.path)}|{sub}") path="{new}" ;;')
    lines += ["        esac", "    done", '    case "$path|$prev" in']
    for spec in specs:
        for option in spec.options:
            if not option.takes_value:
                continue
            names = "|".join(f'"{_key(spec.path)}|{name}"' for name in option.names)
            reply = option.completes(
                choices='COMPREPLY=($(compgen -W "{words}" -- "$cur")); return 0',
                files='COMPREPLY=($(compgen -f -- "$cur")); return 0',
                other="return 0",
            )
            lines.append(f"        {names}) {reply} ;;")
    lines += ["    esac", '    case "$path" in']
    for spec in specs:
        words = " ".join(
            [*spec.subcommands, *spec.argument_choices, *(n for o in spec.options for n in o.names)]
        )
        if spec.files:
            body = (
                f'if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "{words}" -- "$cur")); '
                'else COMPREPLY=($(compgen -f -- "$cur")); fi'
            )
        else:
            body = f'COMPREPLY=($(compgen -W "{words}" -- "$cur"))'
        lines.append(f'        "{_key(spec.path)}") {body} ;;')
    lines += ["    esac", "}", "complete -o filenames -F _rr rr", ""]
    return "\n".join(lines)


def _zsh(specs: list[CommandSpec]) -> str:
    lines = ["#compdef rr", _HEADER.format(shell="zsh").rstrip(), "_rr() {"]
    lines += [
        "    local -a path_words",
        "    local word i",
        "    for ((i = 2; i < CURRENT; i++)); do",
        "        word=${words[i]}",
        '        case "${(j: :)path_words}|$word" in',
    ]
    for spec in specs:
        for sub in spec.subcommands:
            lines.append(f'            "{_key(spec.path)}|{sub}") path_words+=({sub}) ;;')
    lines += [
        "        esac",
        "    done",
        # _arguments reads the words after the command as its arguments: drop the
        # subcommands' own words, so that `rr dlq move --` is `move --` to it
        '    words=("${words[1]}" "${(@)words[$(( ${#path_words} + 2 )),-1]}")',
        "    (( CURRENT -= ${#path_words} ))",
        '    case "${(j: :)path_words}" in',
    ]
    for spec in specs:
        specs_args: list[str] = []
        for option in spec.options:
            action = (
                option.completes(choices=":value:({words})", files=":file:_files", other=":value: ")
                if option.takes_value
                else ""
            )
            for name in option.names:
                specs_args.append(f"'{name}[{_zsh_description(option.help)}]{action}'")
        if spec.subcommands:
            subs = " ".join(f"'{sub}'" for sub in spec.subcommands)
            specs_args.append(f"'1:command:({subs.replace(chr(39), '')})'")
        elif spec.argument_choices:
            specs_args.append(f"'1:value:({' '.join(spec.argument_choices)})'")
        elif spec.files:
            specs_args.append("'*:file:_files'")
        joined = " ".join(specs_args)
        lines.append(f'        "{_key(spec.path)}") _arguments -s {joined} ;;')
    lines += ["    esac", "}", "compdef _rr rr", ""]
    return "\n".join(lines)


def _zsh_description(text: str) -> str:
    """A help text inside an ``_arguments`` spec's ``[...]``: its brackets (``[broker]``,
    ``[default: ...]``) and backslashes escaped, or zsh refuses the whole spec."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _fish(specs: list[CommandSpec]) -> str:
    lines = [_HEADER.format(shell="fish").rstrip(), "complete -c rr -f"]
    for spec in specs:
        condition = _fish_condition(spec)
        for sub in spec.subcommands:
            sub_spec = next(s for s in specs if s.path == (*spec.path, sub))
            lines.append(f"complete -c rr -n '{condition}' -a {sub} -d '{sub_spec.help}'")
        for option in spec.options:
            parts = []
            for name in option.names:
                if name.startswith("--"):
                    parts.append(f"-l {name[2:]}")
                else:
                    parts.append(f"-s {name[1:]}")
            extra = ""
            if option.takes_value:
                extra = " -r" + option.completes(choices=" -a '{words}'", files=" -F", other="")
            lines.append(
                f"complete -c rr -n '{condition}' {' '.join(parts)}{extra} -d '{option.help}'"
            )
        if spec.argument_choices:
            choices = " ".join(spec.argument_choices)
            lines.append(f"complete -c rr -n '{condition}' -a '{choices}'")
        if spec.files:
            lines.append(f"complete -c rr -n '{condition}' -F")
    lines.append("")
    return "\n".join(lines)


def _fish_condition(spec: CommandSpec) -> str:
    if not spec.path:
        return "__fish_use_subcommand"
    parts = [f"__fish_seen_subcommand_from {word}" for word in spec.path]
    if spec.subcommands:
        parts.append(f"not __fish_seen_subcommand_from {' '.join(spec.subcommands)}")
    return "; and ".join(parts)


def completion(shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")]) -> None:
    """Print the completion script for SHELL.

    Example: rr completion bash > /etc/bash_completion.d/rr
    """
    from rabbitctl_retry.cli import app
    from rabbitctl_retry.cli.finish import Outcome, Raw, finish

    finish(Outcome(table=lambda: [Raw([render(app, shell)])]))
