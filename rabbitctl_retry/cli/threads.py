"""Ending a process whose handler threads never return.

Python joins every worker thread of a ``ThreadPoolExecutor`` when the interpreter exits, and
a thread cannot be stopped: a synchronous handler that never returns would keep ``rr run``
(or ``rr simulate``) alive after it stopped, for as long as the handler runs
(docs/reference/runtime.md, "Running it"). Once the command is done, it ends the process at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys


def exit_without_joining(threads_running: int, code: int) -> None:
    """With ``threads_running`` handler calls still in their threads, end the process now
    with ``code`` (logs and output flushed first); otherwise return."""
    if threads_running <= 0:
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # None: the process was started with it closed
            with contextlib.suppress(OSError, ValueError):  # broken: nothing more to say
                stream.flush()
    os._exit(code)
