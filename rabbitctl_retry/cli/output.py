"""Writing a command's output where cli/group.py's guard of stdout does not reach: export
files, and lines written inside a read's callback (docs/reference/cli.md, "Output").

The rule is the same (:func:`~rabbitctl_retry.errors.write_failure`): a write that fails is
one ``rr: error: cannot write to ...`` line and exit 74; stdout's reader going away ends the
command quietly with exit 141.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rabbitctl_retry.cli.group import GuardedOutput, closed_stdout
from rabbitctl_retry.errors import ReaderGone, WriteError, write_failure


def require_stdout() -> None:
    """Refuse, before anything is read, to write a command's data to a closed stdout."""
    stdout = sys.stdout
    if stdout is None or (isinstance(stdout, GuardedOutput) and stdout.stream is None):
        raise closed_stdout()


@contextmanager
def writing_to(target: str) -> Iterator[None]:
    """File operations on ``target`` (an export file: create, write, rename) under the rule:
    an :class:`OSError` inside becomes :func:`write_failure`'s exception."""
    try:
        yield
    except OSError as error:
        raise write_failure(error, target) from None


class FirstFailure:
    """Keeps the first output failure of writes made in a callback whose exceptions would be
    lost (a consumer's: the transport logs and drops them), to raise it once the read is over.
    """

    def __init__(self) -> None:
        self.failure: WriteError | ReaderGone | None = None

    def attempt(self, write: Callable[[], None]) -> bool:
        """Run ``write``; False (stop reading) once a write failed."""
        if self.failure is not None:
            return False
        try:
            write()
        except (WriteError, ReaderGone) as failure:
            self.failure = failure
            return False
        return True

    def raise_first(self) -> None:
        if self.failure is not None:
            raise self.failure


__all__ = ["FirstFailure", "GuardedOutput", "require_stdout", "writing_to"]
