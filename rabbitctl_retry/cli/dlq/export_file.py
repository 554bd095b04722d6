"""The file ``rr dlq export QUEUE FILE`` writes: a temporary file beside FILE, renamed to FILE
once whole, so a file of that name is always a whole export (docs/how-to/after-an-outage.md, "2.
Keep a copy").

Every file operation goes under the rule of docs/reference/cli.md, "Output" (cli/output.py): a
missing folder, a path through a file, no permission, no space left is one ``rr: error: cannot write
to FILE: ...`` line and exit 74. The temporary file is made before rr connects, so those are
found before anything is read from the queue.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import TextIO, cast

from rabbitctl_retry.cli.group import GuardedOutput
from rabbitctl_retry.cli.output import writing_to
from rabbitctl_retry.errors import UsageError


class ExportFile:
    """A temporary file beside ``path``: :attr:`stream` to write the lines to, then
    :meth:`commit` (rename it to ``path``) or :meth:`discard`."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._target = str(path)
        directory = path.parent if str(path.parent) else Path(".")
        with writing_to(self._target):
            if path.exists():
                raise UsageError(
                    f"{path} exists; rr does not overwrite an export: choose another name"
                )
            handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
        self._temporary: Path | None = Path(temporary)
        self._file = os.fdopen(handle, "w", encoding="utf-8")
        self.stream = cast(TextIO, GuardedOutput(self._file, target=self._target))

    def commit(self) -> None:
        """Write out the rest and rename the file to its name."""
        temporary = self._temporary
        if temporary is None:
            return
        with writing_to(self._target):
            self._file.close()
            os.replace(temporary, self._path)
        self._temporary = None

    def discard(self) -> None:
        """Remove the temporary file (nothing once committed)."""
        temporary = self._temporary
        if temporary is None:
            return
        with contextlib.suppress(OSError):  # a failed write leaves lines it will not write
            self._file.close()
        temporary.unlink(missing_ok=True)
        self._temporary = None


__all__ = ["ExportFile"]
