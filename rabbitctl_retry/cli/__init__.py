"""The ``rr`` command line: thin typer commands over the runtime, one module per noun."""

from __future__ import annotations

import logging

import typer

from rabbitctl_retry.cli import completion, declare, dlq, run, simulate, topology

app = typer.Typer(
    name="rr",
    help="Provision, run and operate RabbitMQ retry topologies.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


@app.callback()
def _quiet_drivers() -> None:
    """Provision, run and operate RabbitMQ retry topologies."""
    # aiormq logs every failed connect at ERROR; rr reports the same failure once, censored.
    logging.getLogger("aiormq").setLevel(logging.CRITICAL)


app.command(name="declare")(declare.declare)
app.command(name="run")(run.run_command)
app.command(name="simulate")(simulate.simulate_command)
app.add_typer(topology.app, name="topology")
app.add_typer(dlq.app, name="dlq")
app.command(name="completion")(completion.completion)


def main() -> None:
    """The console script ``rr``."""
    app()
