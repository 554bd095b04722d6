"""The ``rr`` command line: thin typer commands over the runtime, one module per noun."""

from __future__ import annotations

import logging

import typer

from rabbitctl_retry.cli import completions, declare, dlq, doctor, run, simulate, topology
from rabbitctl_retry.cli.group import RrGroup
from rabbitctl_retry.runtime.logs import install_stderr_fallback

app = typer.Typer(
    name="rr",
    help="Provision, run and operate RabbitMQ retry topologies.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    cls=RrGroup,
)


@app.callback()
def _quiet_drivers() -> None:
    """Provision, run and operate RabbitMQ retry topologies."""
    # aiormq logs every failed connect at ERROR; rr reports the same failure once, censored.
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)
    # Warnings no handler takes (pamqp's and aiormq's may quote a header name or a reply text
    # raw) go through rr's escaping formatter, not Python's raw last resort (docs/cli.md,
    # "Output").
    install_stderr_fallback()


app.command(name="declare")(declare.declare)
app.command(name="run")(run.run_command)
app.command(name="simulate")(simulate.simulate_command)
app.add_typer(topology.app, name="topology")
app.add_typer(dlq.app, name="dlq")
app.command(name="doctor")(doctor.doctor_command)
app.command(name="completion")(completions.completion)


def main() -> None:
    """The console script ``rr`` (also ``python -m rabbitctl_retry``)."""
    app(prog_name="rr")
