"""Find the handlers of ``rr run TARGET``: ``module``, ``module:attr`` or a file path.

``refunds`` imports module ``refunds`` (from the current directory first, as ``python -m``
would) and takes every ``@subscriber`` in it; ``refunds:process_refund`` takes one;
``examples/refunds/service.py`` (optionally ``:attr``) imports that file, with its directory
on ``sys.path`` so its own imports work. Startup and shutdown hooks of the module always come
along. Every failure is a :class:`~rabbitctl_retry.errors.HandlerLoadError` that says what
was looked for, never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from rabbitctl_retry.errors import HandlerLoadError
from rabbitctl_retry.runtime.handlers import (
    Hook,
    Subscriber,
    SubscriberOptions,
    hook_kind,
    subscriber_options,
)
from rabbitctl_retry.user_files import HANDLER_FILE_LIMIT_BYTES, FileRefused, check_regular_file

log = logging.getLogger("rr.runtime")


@dataclass(frozen=True, slots=True)
class HandlerSet:
    """What ``rr run`` runs: subscribers and the module's hooks."""

    module: str
    subscribers: tuple[Subscriber, ...]
    startup: tuple[Hook, ...] = ()
    shutdown: tuple[Hook, ...] = ()

    @property
    def queues(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for item in self.subscribers:
            seen.setdefault(item.queue, None)
        return tuple(seen)


def split_target(target: str, *, windows: bool = os.name == "nt") -> tuple[str, str | None]:
    """``"pkg.mod:attr"`` -> ``("pkg.mod", "attr")``. On Windows (``windows``) a one-letter
    module is a drive letter (``C:handlers.py``), not a module; elsewhere ``h:h`` is module
    ``h``, function ``h`` (docs/reference/runtime.md)."""
    module, sep, attr = target.rpartition(":")
    drive_letter = windows and len(module) == 1
    if not sep or not module or drive_letter or "/" in attr or "\\" in attr:
        return target, None
    return module, attr or None


def load_target(target: str) -> HandlerSet:
    """Import ``target`` and collect its subscribers and hooks."""
    location, attr = split_target(target)
    module = _import(location)
    if attr is None:
        return handlers_of_module(module)
    if not hasattr(module, attr):
        raise HandlerLoadError(f"module {module.__name__!r} has no attribute {attr!r}")
    found = subscriber_of(getattr(module, attr), f"{module.__name__}:{attr}")
    if found is None:
        raise HandlerLoadError(
            f"{module.__name__}:{attr} is not a handler: decorate it with @subscriber('QUEUE')"
        )
    return _with_hooks(module, (found,))


def handlers_of_module(module: ModuleType) -> HandlerSet:
    """Every ``@subscriber`` of an imported module (functions, classes, and instances marked
    themselves), in definition order, and its hooks."""
    found = tuple(
        item
        for name, value in vars(module).items()
        if (item := subscriber_of(value, f"{module.__name__}:{name}", own_mark=True)) is not None
    )
    if not found:
        raise HandlerLoadError(
            f"module {module.__name__!r} has no @subscriber handlers "
            f"(looked in {getattr(module, '__file__', None) or module.__name__})"
        )
    return _with_hooks(module, found)


def subscriber_of(obj: object, name: str, *, own_mark: bool = False) -> Subscriber | None:
    """The subscriber ``obj`` is, named ``name``, or None when ``@subscriber`` did not mark
    it: a function; a class with a ``handle`` method, instantiated here with no arguments;
    an instance with one (docs/reference/handlers.md, "Handler classes"). ``own_mark``: an instance
    counts only when it was marked itself, not through its class (a module holding an
    instance of a marked class would otherwise run it twice)."""
    options = subscriber_options(obj)
    if options is None:
        return None
    if isinstance(obj, type):
        return _subscriber_of_instance(_instantiate(obj, name), name, options)
    if inspect.isroutine(obj) or not hasattr(obj, "handle"):
        if not callable(obj):
            raise HandlerLoadError(f"{name} is marked @subscriber but has no handle method")
        return Subscriber(queue=options.queue, handler=obj, name=name, options=options)
    if own_mark and _OWN_MARK not in getattr(obj, "__dict__", {}):
        return None
    return _subscriber_of_instance(obj, name, options)


_OWN_MARK = "__rr_subscriber__"


def _instantiate(cls: type, name: str) -> object:
    """``cls()``: a handler class rr makes itself, with no arguments."""
    if not callable(getattr(cls, "handle", None)):
        raise HandlerLoadError(f"{name} is a class marked @subscriber but has no handle method")
    try:
        inspect.signature(cls).bind()
    except TypeError as error:
        raise HandlerLoadError(
            f"{name} needs arguments to be created ({error}): rr creates a handler class with "
            f"no arguments; register an instance instead, e.g. "
            f"handler = subscriber(QUEUE)({cls.__name__}(...)) at module level "
            '(rr docs handlers "Handler classes")'
        ) from None
    except ValueError:  # no signature to read (a builtin): let the call say
        pass
    try:
        return cls()
    except (KeyboardInterrupt, HandlerLoadError):
        raise
    except BaseException as error:
        log.debug("creating %s failed", name, exc_info=(type(error), error, error.__traceback__))
        raise HandlerLoadError(
            f"creating {name}() failed: {type(error).__name__}: {error}{_where(error)}"
        ) from None


def _subscriber_of_instance(obj: object, name: str, options: SubscriberOptions) -> Subscriber:
    handle = getattr(obj, "handle", None)
    if not callable(handle):
        raise HandlerLoadError(f"{name} is marked @subscriber but has no handle method")
    # the options are the class's or the instance's: a bound method does not carry them
    return Subscriber(
        queue=options.queue, handler=handle, name=name, target=handle, options=options
    )


def instance_hooks(subscribers: tuple[Subscriber, ...], kind: str) -> tuple[Hook, ...]:
    """The ``on_startup`` (``kind`` ``"startup"``) or ``on_shutdown`` methods of the handler
    instances among ``subscribers``, in their order."""
    hooks: list[Hook] = []
    seen: set[int] = set()
    for item in subscribers:
        owner = getattr(item.written, "__self__", None)
        if owner is None or inspect.ismodule(owner) or id(owner) in seen:
            continue
        seen.add(id(owner))
        method = getattr(owner, f"on_{kind}", None)
        if callable(method):
            hooks.append(method)
    return tuple(hooks)


def _with_hooks(module: ModuleType, found: tuple[Subscriber, ...]) -> HandlerSet:
    """The module's hooks with the handler instances' own: at start the module's
    ``@on_startup`` hooks, then the handlers' ``on_startup`` methods; at the end the
    handlers' ``on_shutdown`` methods, then the module's ``@on_shutdown`` hooks."""
    hooks: list[Hook] = [value for value in vars(module).values() if hook_kind(value) is not None]
    return HandlerSet(
        module=module.__name__,
        subscribers=found,
        startup=tuple(h for h in hooks if hook_kind(h) == "startup")
        + instance_hooks(found, "startup"),
        shutdown=instance_hooks(found, "shutdown")
        + tuple(h for h in hooks if hook_kind(h) == "shutdown"),
    )


def load_state_source(spec: str) -> object:
    """``rr simulate --state module:attr`` (or ``path/to/file.py:attr``): the attribute, a
    value or a zero-argument callable that makes it (``runtime/state.py``,
    :func:`~rabbitctl_retry.runtime.state.made_state`)."""
    location, attr = split_target(spec)
    if attr is None:
        raise HandlerLoadError(
            f"--state {spec!r}: say which attribute, as module:attr or path/to/file.py:attr"
        )
    module = _import(location)
    if not hasattr(module, attr):
        raise HandlerLoadError(
            f"--state {spec!r}: module {module.__name__!r} has no attribute {attr!r}"
        )
    return getattr(module, attr)


def _import(location: str) -> ModuleType:
    if location.endswith(".py") or "/" in location or "\\" in location:
        return _import_file(Path(location))
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(location)
    except ModuleNotFoundError as error:
        if error.name is not None and (
            location == error.name or location.startswith(error.name + ".")
        ):
            raise HandlerLoadError(
                f"no module named {location!r} (looked in the current directory and on "
                "sys.path; a file path like path/to/service.py works too)"
            ) from None
        raise _failed(repr(location), error, f"{error}") from None
    except (HandlerLoadError, KeyboardInterrupt):
        raise
    except BaseException as error:  # SystemExit and friends at import are load failures too
        raise _failed(repr(location), error, f"{type(error).__name__}: {error}") from None


def _import_file(path: Path) -> ModuleType:
    try:  # a regular file of at most 16 MiB (docs/reference/cli.md, "Files rr reads")
        check_regular_file(path, limit_bytes=HANDLER_FILE_LIMIT_BYTES)
    except FileRefused as refused:
        raise HandlerLoadError(f"{path}: {refused.reason}") from None
    resolved = path.resolve()
    directory = str(resolved.parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    name = resolved.stem
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) == str(resolved):
        return existing
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise HandlerLoadError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        sys.modules.pop(name, None)
        raise
    except BaseException as error:  # SystemExit and friends at import are load failures too
        sys.modules.pop(name, None)
        raise _failed(str(path), error, f"{type(error).__name__}: {error}") from None
    return module


def _failed(what: str, error: BaseException, text: str) -> HandlerLoadError:
    """``importing X failed: TEXT (at FILE:LINE, in FUNCTION)``; the traceback is logged at
    debug level (``rr run --log-level debug``)."""
    log.debug("importing %s failed", what, exc_info=(type(error), error, error.__traceback__))
    return HandlerLoadError(f"importing {what} failed: {text}{_where(error)}")


def _where(error: BaseException) -> str:
    """Where in the handler's code ``error`` was raised: its file and line."""
    if isinstance(error, SyntaxError) and error.filename:
        return f" (at {error.filename}:{error.lineno})"
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith("<frozen") and "importlib" not in frame.filename
    ]
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {last.filename}:{last.lineno}, in {last.name})"
