"""The event loop rr's commands run on: uvloop where it is installed, else asyncio's own.

``RR_EVENT_LOOP`` chooses (docs/reference/runtime.md, "Speed"):

``auto`` (or unset)
    uvloop if it can be imported (``pip install 'rabbitctl-retry[speed]'`` installs it on
    Linux and macOS), else asyncio's.
``uvloop``
    uvloop, or a usage error if it is not installed.
``asyncio``
    asyncio's own loop, even where uvloop is installed: the switch to turn uvloop off.

:func:`choose` is the pure decision; :func:`run` carries it out for one coroutine.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Literal, TypeVar

from rabbitctl_retry.errors import UsageError

ENV = "RR_EVENT_LOOP"
"""The environment variable that chooses the loop."""

LoopName = Literal["uvloop", "asyncio"]
CHOICES = ("auto", "uvloop", "asyncio")

_T = TypeVar("_T")


def choose(setting: str | None, *, uvloop_installed: bool, stdio_closed: bool = False) -> LoopName:
    """The loop for ``setting`` (``RR_EVENT_LOOP``'s value, ``None`` when unset).

    ``stdio_closed``: the process was started with stdin, stdout or stderr closed. A socket
    then takes that descriptor, and uvloop (0.21) aborts the process when it closes it
    (``uv__close: Assertion `fd > STDERR_FILENO'``): asyncio's loop runs instead, whatever
    the setting (``rr ... >&-`` fails with its documented exit code, not an abort)."""
    wanted = (setting or "auto").strip().lower() or "auto"
    if wanted not in CHOICES:
        raise UsageError(
            f"{ENV}={setting!r} is not a loop rr knows: use auto, uvloop or asyncio "
            "(rr docs runtime 'Running it')"
        )
    if wanted == "asyncio" or stdio_closed:
        return "asyncio"
    if wanted == "uvloop" and not uvloop_installed:
        raise UsageError(
            f"{ENV}=uvloop, but uvloop is not installed: `pip install uvloop`, or set {ENV}=asyncio"
        )
    return "uvloop" if uvloop_installed else "asyncio"


def chosen(environ: Mapping[str, str] | None = None) -> LoopName:
    """The loop this process's environment chooses."""
    environ = os.environ if environ is None else environ
    installed = importlib.util.find_spec("uvloop") is not None
    return choose(environ.get(ENV), uvloop_installed=installed, stdio_closed=_stdio_closed())


def _stdio_closed() -> bool:
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            return True
    return False


def loop_factory(name: LoopName) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What makes a loop of ``name`` (``None``: asyncio's default)."""
    if name == "asyncio":
        return None
    # by name: uvloop is optional (the ``speed`` extra), so rr's types do not depend on it
    uvloop = importlib.import_module("uvloop")
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(coroutine: Coroutine[Any, Any, _T], *, name: LoopName | None = None) -> _T:
    """Run ``coroutine`` to its end on a new loop of ``name`` (default: :func:`chosen`)."""
    try:
        factory = loop_factory(chosen() if name is None else name)
    except BaseException:
        coroutine.close()  # never started: no "never awaited" warning
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coroutine)
