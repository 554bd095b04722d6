"""``rr completion SHELL``: print a static completion script."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from rabbitctl_retry.cli.completions import Shell, render


def completion(shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")]) -> None:
    """Print the completion script for SHELL.

    Example: rr completion bash > /etc/bash_completion.d/rr
    """
    from rabbitctl_retry.cli import app

    sys.stdout.write(render(app, shell))
