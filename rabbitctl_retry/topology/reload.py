"""Pure. What a changed topology file changes in a running ``rr run`` (docs/reference/runtime.md,
"Changing max_attempts while it runs").

``rr run`` builds each consumed queue's retry policy (``retry/policy.py``) from its topology
file. When the file changes (SIGHUP, or the file watched every ``--reload-interval``),
:func:`plan_reload` compares the topology rr run runs with the new file, setting by setting,
and returns the topology to run from now on: the running one with the differences a running
consumer can take at its next delivery (``applied``); every other difference is ``kept`` at
its running value, with the reason (a restart of ``rr run``, or a migration of the queue).

What applies live, per queue (the running queue's type and ``settings`` decide: they are
what the broker holds):

====================================  =======  ====================================================
setting                               applies  why
====================================  =======  ====================================================
``max_attempts``, classic queue       yes      rr counts the attempts itself (the retry header)
``max_attempts``, quorum queue,       yes      ``rr declare`` puts ``delivery-limit = N - 1`` in
``settings = "policy"`` (a number              ``rr.<queue>``, which the queue takes at once; a
to another)                                    limit added or removed is a restart
``max_attempts``, quorum queue,       no       ``x-delivery-limit`` is an argument, fixed for the
``settings = "arguments"``                     queue's life: rr run keeps the number the broker
                                               enforces (a change is a migration)
``delay``, ``delay_tiers``,           yes      when every wait queue (or the delay exchange) the
``wait_queue``, ``wait_queue_type``            new value uses was in the topology rr run declared
                                               at its start (``declared``): a tier removed,
                                               ``dlx-ttl`` back to ``memory``; a new wait queue is
                                               a restart
``delay`` to or from ``"server"``     no       the quorum queue's own ``x-delayed-retry-*``: a
                                               restart
``delay_min``, ``delay_max``,         yes      in ``settings = "policy"`` (``rr declare`` puts the
``delay_returns`` (``"server"``)               policy); in ``arguments``: a migration
``delivery_limit``, quorum queue      yes      with ``max_attempts`` in ``settings = "policy"``
                                               (the model makes them agree); else as below
``dead_letter``                       no       only unchanged: the route is the broker's (quorum) or
                                               a queue rr declares: a restart
``type``, ``durable``, ``replicas``,  no       a migration of the queue, then a restart
``settings``
``arguments``, ``bindings``,          no       the broker's, not rr run's: ``rr declare`` applies
``dead_letter_exchange``, ``rejected``,        them (live in rr's policy, else a migration); rr
``dead_letter_strategy``                       run re-declares the running values on a reconnect
``publish``                           no       restart ``rr run``
a queue added or removed, an          no       restart ``rr run``
exchange, ``[broker]``
====================================  =======  ====================================================

The applied settings of a queue must make a valid queue on their own, beside the kept ones
(the model's own checks): otherwise none of that queue's changes apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from enum import Enum

from rabbitctl_retry.errors import ConfigError
from rabbitctl_retry.topology.model import (
    DelayMode,
    Queue,
    QueueType,
    SettingsMode,
    Topology,
)

DEFAULT_RELOAD_INTERVAL_S = 1.0
"""``rr run --reload-interval``'s default: one ``stat`` of the topology file a second (the
file is read only when that changes), so an edit applies within about a second."""

RESTART = "restart rr run to apply it (run rr declare first)"
"""Why a change waits for the next start of ``rr run``."""
MIGRATION = (
    "the broker cannot change it on the existing queue: a migration "
    "(rr docs migrate-to-quorum 'Changing a topology'), then restart rr run"
)
"""Why a change needs the queue rebuilt first."""
BROKER = (
    "a setting of the queue on the broker that rr run's retry decisions do not use: rr declare "
    "applies it (live when rr's policy holds it, else a migration); rr run declares the "
    "running value when it reconnects"
)
"""Why rr run leaves a change to ``rr declare``."""

_TOML_KEY: Mapping[str, str] = {
    "delay_tiers_ms": "delay_tiers",
    "delay_min_ms": "delay_min",
    "delay_max_ms": "delay_max",
}
"""A :class:`Queue` attribute -> its key in the file, where they differ."""

_DELAY = ("delay", "delay_tiers_ms", "wait_queue", "wait_queue_type")
_SERVER_DELAY = ("delay_min_ms", "delay_max_ms", "delay_returns")
_MS = frozenset({"delay_tiers_ms", "delay_min_ms", "delay_max_ms"})


@dataclass(frozen=True, slots=True)
class SettingChange:
    """One difference between the running topology and the new file."""

    queue: str | None
    """The queue it belongs to; ``None`` for ``[broker]``, ``[exchanges]`` and a queue added
    or removed (``queues.NAME``)."""
    setting: str
    """The key in the file (``max_attempts``, ``broker.retry_header``, ``exchanges.events``)."""
    old: str
    new: str
    reason: str | None = None
    """Why it is not applied; ``None`` when it is."""

    def __str__(self) -> str:
        where = f"{self.queue}.{self.setting}" if self.queue is not None else self.setting
        return f"{where} {self.old} -> {self.new}"


@dataclass(frozen=True, slots=True)
class Reload:
    """What a reload does: the topology to run from now on, and each difference."""

    topology: Topology
    """The running topology with the ``applied`` changes (the retry policies to use)."""
    applied: tuple[SettingChange, ...] = ()
    kept: tuple[SettingChange, ...] = ()
    """Differences of the file left at their running value, each with its reason."""

    @property
    def changed(self) -> bool:
        """Something applies: the running retry policies change."""
        return bool(self.applied)


def shown(value: object, *, ms: bool = False) -> str:
    """A setting's value as a reload's log line shows it."""
    if value is None:
        return "(none)"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, tuple):
        return "[" + ", ".join(shown(item, ms=ms) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key} = {value[key]!r}" for key in sorted(value)) + "}"
    if ms and isinstance(value, int):
        return f"{value} ms"
    return str(value)


def plan_reload(running: Topology, new: Topology, *, declared: Topology | None = None) -> Reload:
    """What of ``new`` a running ``rr run`` takes (the module's table).

    Args:
        running: the topology rr run runs now (its start file, and the changes applied since).
        new: the topology the file describes now.
        declared: the topology rr run declared (or checked) at its start: the wait queues and
            delay exchanges that exist. Default: ``running``.
    """
    declared = declared or running
    applied: list[SettingChange] = []
    kept: list[SettingChange] = []
    queues: list[Queue] = []
    for queue in running.queues:
        wanted = new.queue(queue.name)
        if wanted is None:
            kept.append(SettingChange(None, f"queues.{queue.name}", "listed", "(none)", RESTART))
            queues.append(queue)
            continue
        before = declared.queue(queue.name) or queue
        mode = running.settings_of(queue)
        result, queue_applied, queue_kept = _queue(queue, wanted, before, mode)
        queues.append(result)
        applied += queue_applied
        kept += queue_kept
    for queue in new.queues:
        if running.queue(queue.name) is None:
            kept.append(SettingChange(None, f"queues.{queue.name}", "(none)", "listed", RESTART))
    kept += _broker(running, new)
    kept += _exchanges(running, new)
    if not applied:
        return Reload(topology=running, kept=tuple(kept))
    try:
        topology = Topology(
            broker=running.broker, queues=tuple(queues), exchanges=running.exchanges
        )
    except ConfigError as error:
        reason = f"the topology would not be valid with these changes alone ({error})"
        return Reload(
            topology=running,
            kept=tuple(replace(change, reason=reason) for change in applied) + tuple(kept),
        )
    return Reload(topology=topology, applied=tuple(applied), kept=tuple(kept))


def _queue(
    queue: Queue, wanted: Queue, declared: Queue, mode: SettingsMode
) -> tuple[Queue, list[SettingChange], list[SettingChange]]:
    """One queue: the queue with its applied changes, the applied ones, the kept ones."""
    differing = [
        item.name
        for item in fields(Queue)
        if getattr(queue, item.name) != getattr(wanted, item.name)
    ]
    if not differing:
        return queue, [], []
    reasons = {name: _reason(name, queue, wanted, declared, mode) for name in differing}
    applies = {name: getattr(wanted, name) for name in differing if reasons[name] is None}
    changes = {name: _change(queue, wanted, name, reasons[name]) for name in differing}
    if not applies:
        return queue, [], list(changes.values())
    try:
        result = replace(queue, **applies)
    except ConfigError as error:
        reason = f"it does not apply without the changes kept ({error})"
        return (
            queue,
            [],
            [replace(change, reason=change.reason or reason) for change in changes.values()],
        )
    return (
        result,
        [changes[name] for name in differing if name in applies],
        [changes[name] for name in differing if name not in applies],
    )


def _change(queue: Queue, wanted: Queue, name: str, reason: str | None) -> SettingChange:
    ms = name in _MS
    return SettingChange(
        queue.name,
        _TOML_KEY.get(name, name),
        shown(getattr(queue, name), ms=ms),
        shown(getattr(wanted, name), ms=ms),
        reason=reason,
    )


def _reason(
    name: str, queue: Queue, wanted: Queue, declared: Queue, mode: SettingsMode
) -> str | None:
    """Why the difference in setting ``name`` does not apply live; ``None`` when it does."""
    if name == "max_attempts":
        return _max_attempts(queue, wanted, mode)
    if name in _DELAY:
        return _delay(queue, wanted, declared)
    if name in _SERVER_DELAY:
        if _delay(queue, wanted, declared) is not None:
            return RESTART
        return None if mode is SettingsMode.POLICY else MIGRATION
    if name == "delivery_limit":
        if (
            mode is SettingsMode.POLICY
            and queue.max_attempts is not None
            and wanted.max_attempts is not None
        ):
            return None  # it follows max_attempts (the model makes them agree)
        return BROKER
    if name == "dead_letter":
        return (
            "the dead-letter route is the queue's own setting on the broker "
            "(or a queue rr declares): " + RESTART
        )
    if name in ("type", "durable", "settings", "replicas"):
        return MIGRATION
    if name in (
        "arguments",
        "dead_letter_exchange",
        "rejected",
        "dead_letter_strategy",
        "bindings",
    ):
        return BROKER
    return RESTART


def _max_attempts(queue: Queue, wanted: Queue, mode: SettingsMode) -> str | None:
    if queue.type is QueueType.CLASSIC:
        return None  # rr counts the attempts of a classic queue itself
    if mode is SettingsMode.ARGUMENTS:
        return (
            f"the quorum queue's x-delivery-limit ({shown(queue.server_delivery_limit)}) is an "
            "argument, fixed for the queue's life: rr run keeps the max_attempts the broker "
            "enforces. " + MIGRATION[0].upper() + MIGRATION[1:]
        )
    if queue.max_attempts is None or wanted.max_attempts is None:
        return "a delivery limit added to or removed from a quorum queue: " + RESTART
    return None  # rr declare puts delivery-limit = N - 1 in rr's policy: live


def _delay(queue: Queue, wanted: Queue, declared: Queue) -> str | None:
    """The delay settings apply together, when what they wait in exists."""
    if DelayMode.SERVER in (queue.delay, wanted.delay) and queue.delay is not wanted.delay:
        return 'delay = "server" is the quorum queue\'s own setting on the broker: ' + RESTART
    missing = [name for name in wanted.wait_queue_names if name not in declared.wait_queue_names]
    if missing:
        return f"its wait queue {missing[0]!r} was not declared when rr run started: " + RESTART
    if wanted.wait_queue_names and (
        wanted.effective_wait_queue_type is not declared.effective_wait_queue_type
    ):
        return "its wait queues were declared with another type: " + MIGRATION
    if wanted.delay_exchange is not None and wanted.delay_exchange != declared.delay_exchange:
        return (
            f"its delay exchange {wanted.delay_exchange!r} was not declared when rr run "
            "started: " + RESTART
        )
    return None


def _broker(running: Topology, new: Topology) -> list[SettingChange]:
    return [
        SettingChange(
            None,
            f"broker.{item.name}",
            shown(getattr(running.broker, item.name)),
            shown(getattr(new.broker, item.name)),
            reason=MIGRATION if item.name == "settings" else RESTART,
        )
        for item in fields(type(running.broker))
        if getattr(running.broker, item.name) != getattr(new.broker, item.name)
    ]


def _exchanges(running: Topology, new: Topology) -> list[SettingChange]:
    old = {exchange.name: exchange for exchange in running.exchanges}
    now = {exchange.name: exchange for exchange in new.exchanges}
    return [
        SettingChange(
            None,
            f"exchanges.{name}",
            "listed" if name in old else "(none)",
            ("changed" if name in old else "listed") if name in now else "(none)",
            reason=RESTART,
        )
        for name in sorted(old.keys() | now.keys())
        if old.get(name) != now.get(name)
    ]


__all__ = [
    "BROKER",
    "DEFAULT_RELOAD_INTERVAL_S",
    "MIGRATION",
    "RESTART",
    "Reload",
    "SettingChange",
    "plan_reload",
    "shown",
]
