"""The ``rr`` command line: thin typer commands over the runtime, one module per noun, each
loaded when its command runs (cli/lazy.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from rabbitctl_retry.cli.lazy import LazyRootGroup

app = typer.Typer(
    name="rr",
    help="Provision, run and operate RabbitMQ retry topologies.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    cls=LazyRootGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)

DISTRIBUTION = "rabbitctl-retry"


def version_text() -> str:
    """``rr 0.1.0 (Python 3.11.7, aiormq 6.8.1)``: what ``rr --version`` prints (aiormq's
    only with the ``aiormq`` extra installed)."""
    import platform
    from importlib import metadata  # 40 ms: only for --version

    try:
        own = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        own = "(not installed)"
    try:
        aiormq = f", aiormq {metadata.version('aiormq')}"
    except metadata.PackageNotFoundError:  # without the aiormq extra
        aiormq = ""
    return f"rr {own} (Python {platform.python_version()}{aiormq})"


def _print_version(asked: bool) -> None:
    if asked:
        from rabbitctl_retry.cli._common import exit_with

        typer.echo(version_text())
        exit_with(0)


@app.callback()
def _quiet_drivers(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print rr's version (and Python's, aiormq's) and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """Provision, run and operate RabbitMQ retry topologies."""
    from rabbitctl_retry.cli.logs import install_stderr_fallback, quiet_the_driver

    quiet_the_driver()
    # Warnings no handler takes (pamqp's and aiormq's may quote a header name or a reply text
    # raw) go through rr's escaping formatter, not Python's raw last resort (docs/reference/cli.md,
    # "Output").
    install_stderr_fallback()


# The commands (cli/lazy.py COMMANDS) are loaded when they run, not here.


def main() -> None:
    """The console script ``rr`` (also ``python -m rabbitctl_retry``)."""
    app(prog_name="rr")
