"""The shell of ``rr migrate``: rebuild the queues a plan marks ``migration``, with their
messages (docs/how-to/migrate-to-quorum.md, "Migrating a queue").

What is rebuilt, the steps and where a rerun goes on from are decided in
``topology/migration.py``; this module looks at the broker and carries the steps out. Every
message moves on the transfer engine (``ops/transfer.py``): published with confirms, acked in
its old place only once its copy is confirmed, so a run that stops anywhere (Ctrl-C, a kill,
a lost connection) leaves each message in one place or, for the copies under way, in two;
running the same command again reads where the broker stands and finishes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from rabbitctl_retry.dlq.choice import Choice, Send
from rabbitctl_retry.dlq.report import TransferKind, TransferReport
from rabbitctl_retry.errors import ConfigError, ConflictError, PreconditionFailed
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.ops.declare import (
    POLICY_NEEDS_MANAGEMENT,
    apply,
    declare_entity,
    need_management_for_policies,
    observe_and_plan,
    opened,
    provision,
    unbind_entity,
)
from rabbitctl_retry.ops.probe import (
    compare_queue,
    depth_on,
    queue_arguments,
    queue_info,
    queue_type,
)
from rabbitctl_retry.ops.transfer import TransferOptions, transfer
from rabbitctl_retry.topology.expand import QueueEntity, expand
from rabbitctl_retry.topology.migration import (
    Found,
    Phase,
    Rebuild,
    Refusal,
    Step,
    apart_from,
    foreign_holdings,
    holding_fits,
    holding_name,
    is_rr_holding,
    not_rr_holding,
    phase,
    rebuilds,
    refill_problem,
    shortfalls,
    weighs_bytes,
)
from rabbitctl_retry.topology.model import Topology
from rabbitctl_retry.topology.plan import Matches, Plan, Refused
from rabbitctl_retry.transport.base import Connection, Connector, QueueInfo
from rabbitctl_retry.transport.management import ManagementApi, ManagementConnector

DRAIN_ROUNDS = 20
"""Moves of a queue before rr concludes that something keeps filling it (a publisher by name,
a consumer's retries with ``--force``): the run stops there, nothing deleted."""


UNCHECKED_PUBLISHERS = (
    "publishing by name (the default exchange, routing key = the queue) was not checked: it "
    "needs the management API (--management-url); a message published by name to a queue in "
    "the instant it is deleted is lost, although the broker confirmed it and returned "
    'nothing (rr docs migrate-to-quorum "Migrating a queue")'
)

NO_MANAGEMENT_API = (
    "rr migrate: publishing by name (the default exchange, routing key = the queue) cannot be "
    "checked without the management API: a message published by name to a queue in the "
    "instant it is deleted is lost, although the broker confirmed it and returned nothing. "
    "Give --management-url (or [broker] management_url), or stop such publishers and pass "
    '--force (rr docs migrate-to-quorum "Migrating a queue"); nothing was changed'
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Look:
    """One rebuild, as the broker stands before the run."""

    rebuild: Rebuild
    found: Mapping[str, Found]
    """Each subject (the queue, the rebuilt wait queues): absent, as it was, or as the file
    says."""
    phase: Phase
    messages: Mapping[str, int]
    """Queue -> its ready messages, for each queue of the rebuild that exists (holding ones
    included)."""
    consumers: Mapping[str, int]
    """Queue -> its consumers, for each that has any."""


@dataclass(slots=True)
class StepReport:
    """One step of one rebuild, as it ran."""

    queue: str
    step: Step
    done: list[str] = field(default_factory=list)
    """What it did, one line each (``moved 10,000 messages refunds -> refunds.rr-migrating``)."""
    moved: int = 0
    possible_duplicates: int = 0


@dataclass(slots=True)
class Migration:
    """What ``rr migrate`` found and did; filled as the run goes."""

    looks: list[Look] = field(default_factory=list)
    steps: list[StepReport] = field(default_factory=list)
    final: Plan | None = None
    """The plan of the whole file after the run (every queue as the file says, unless a
    ``--queue`` left others to rebuild)."""
    dry_run: bool = False
    finished: bool = False
    """The run got to its end (a dry run: once it looked)."""

    @property
    def moved(self) -> int:
        """Copies made, every step together: a message rebuilt counts twice (out to the
        holding queue, and back)."""
        return sum(step.moved for step in self.steps)

    def moved_by(self, step: Step) -> int:
        """Messages the steps ``step`` moved (``drain``: out, ``refill``: back)."""
        return sum(report.moved for report in self.steps if report.step is step)

    @property
    def possible_duplicates(self) -> int:
        return sum(step.possible_duplicates for step in self.steps)


@dataclass(frozen=True, slots=True)
class MigrateHooks:
    """What the command says and asks on the way."""

    agreed: Callable[[Migration], Awaitable[None]]
    """Told what the run will do, before anything changes: asks, or raises."""
    step: Callable[[StepReport], None]
    """A step begins (a log line: a killed run shows where it was)."""
    warn: Callable[[str], None]
    """What the run cannot check, said before it asks and before the first step."""


def _verbatim(target: str) -> Callable[..., Choice]:
    """A migration moves every message as it is: properties as received (its ``expiration``
    included: a copy waiting in a wait queue waits again), headers untouched."""

    def choose(
        headers: Mapping[str, FieldValue] | None,
        now: datetime,
        undecodable: tuple[str, ...],
        contents: object = None,
    ) -> Choice:
        return Send(to=target, headers={}, verbatim=True)

    return choose


async def migrate_topology(
    topology: Topology,
    urls: Sequence[str],
    *,
    dry_run: bool,
    force: bool,
    only: Sequence[str],
    connector: Connector,
    hooks: MigrateHooks,
    done: Migration,
    management_url: str | None = None,
    management: ManagementConnector | None = None,
) -> None:
    """``rr migrate``: plan, look, ask, then the rest of the file (as ``rr declare``) and each
    rebuild; the whole file is planned again at the end (``done.final``)."""
    need_management_for_policies(topology, management_url)
    done.dry_run = dry_run
    async with opened(urls, connector, management_url, management) as (connection, api, connect):
        desired = expand(topology, connection.server_version.release)
        policies = await api.policies() if api is not None and topology.uses_policies else None
        nodes = await api.nodes() if api is not None else None
        _, whole = await observe_and_plan(
            connection, desired, connect=connect, cluster_nodes=nodes, policies=policies
        )
        owned = {
            queue.name: await _holding_is_rr(connection, api, queue.name)
            for queue in desired.queues
        }
        foreign = foreign_holdings(desired, owned, only=only)
        if foreign:
            raise ConflictError(f"rr migrate: {not_rr_holding(foreign)}")
        held = [name for name, rr_s in owned.items() if rr_s]
        units = rebuilds(whole, desired, held=held, only=only)
        if isinstance(units, Refusal):
            raise ConflictError(f"rr migrate: {units.reason}")
        done.looks = [await look(connection, unit) for unit in units]
        problems = [
            problem
            for found in done.looks
            if found.phase is not Phase.DONE
            for problem in shortfalls(found.rebuild, found.messages, await _weights(api, found))
        ]
        if problems:
            raise ConflictError(f"rr migrate: {'; '.join(problems)}; nothing was changed")
        busy = [
            f"{queue} ({count} consumer{'' if count == 1 else 's'})"
            for found in done.looks
            if found.phase is Phase.BEFORE
            for queue, count in found.consumers.items()
        ]
        if busy and not force:
            raise ConflictError(
                f"rr migrate: consumers are attached to {', '.join(busy)}: stop them first, "
                'or pass --force (rr docs migrate-to-quorum "Migrating a queue"); nothing was '
                "changed"
            )
        starting = any(found.phase is Phase.BEFORE for found in done.looks)
        if starting and api is None:
            if not force:
                raise ConflictError(NO_MANAGEMENT_API)
            hooks.warn(UNCHECKED_PUBLISHERS)
        if starting and api is not None and not force:
            rate = await api.publish_rate("")
            if rate:
                raise ConflictError(
                    f"rr migrate: messages are being published by name (the default exchange, "
                    f"{rate:g}/s by the management API): one published to a queue in the "
                    "instant it is rebuilt is lost, and no broker feature can catch it. Stop "
                    "those publishers (rr run services publish their retries by name too), or "
                    'pass --force (rr docs migrate-to-quorum "Migrating a queue"); nothing was '
                    "changed"
                )
        await hooks.agreed(done)
        if dry_run:
            done.finished = True
            return
        rest = apart_from(whole, units)
        if rest.can_apply:
            await apply(connection, rest, api=api)
        for found in done.looks:
            await _Run(connection, found, api=api, hooks=hooks, done=done).rebuild()
        done.final = await provision(
            connection,
            desired,
            dry_run=False,
            connect=connect,
            cluster_nodes=nodes,
            api=api,
            policies=await api.policies() if api is not None and topology.uses_policies else None,
        )
        done.finished = True


async def _holding_is_rr(
    connection: Connection, api: ManagementApi | None, queue: str
) -> bool | None:
    """Whether the holding queue of ``queue`` on the broker is rr's (``topology/migration.py``
    ``is_rr_holding``): by all its arguments where the management API is given, else by the
    ones AMQP reads; None when there is none."""
    if not holding_fits(queue):  # a name AMQP cannot carry: no such queue to look for
        return None
    name = holding_name(queue)
    if await queue_info(connection, name) is None:
        return None
    if api is not None:
        state = await api.queue_state(name)
        if state is not None:
            return is_rr_holding(queue, state.arguments, marker_visible=True)
    arguments = await queue_arguments(connection, name)
    return is_rr_holding(queue, arguments, marker_visible=False)


async def _weights(api: ManagementApi | None, found: Look) -> Mapping[str, int] | None:
    """What the messages of each queue of ``found`` weigh in bytes, as the management API
    states it; None without the API, or when it states none for a queue that holds messages
    (its statistics not sampled yet): not known, and the plan decides as if too heavy."""
    if api is None:
        return None
    if not weighs_bytes(found.rebuild):
        return {}
    weights: dict[str, int] = {}
    for name, count in found.messages.items():
        state = await api.queue_state(name)
        weight = None if state is None else state.message_bytes
        if weight is None and count:
            return None
        weights[name] = weight or 0
    return weights


async def look(connection: Connection, rebuild: Rebuild) -> Look:
    """How ``rebuild`` stands on the broker (see :class:`Look`)."""
    subjects = {rebuild.name: rebuild.queue} | {
        wait.name: wait for wait in rebuild.waits if wait.name in rebuild.rebuilt_waits
    }
    found = {name: await _found(connection, entity) for name, entity in subjects.items()}
    names = [rebuild.name, *(wait.name for wait in rebuild.waits)]
    names += [entity.name for entity in rebuild.holding_queues]
    messages: dict[str, int] = {}
    consumers: dict[str, int] = {}
    holding = {entity.name for entity in rebuild.holding_queues}
    holding_present = False
    for name in names:
        info = await queue_info(connection, name)
        if info is None:
            continue
        holding_present = holding_present or name in holding
        messages[name] = info.message_count
        if info.consumer_count:
            consumers[name] = info.consumer_count
    return Look(
        rebuild=rebuild,
        found=found,
        phase=phase(rebuild, found, holding_present),
        messages=messages,
        consumers=consumers,
    )


async def _found(connection: Connection, entity: QueueEntity) -> Found:
    if await queue_info(connection, entity.name) is None:
        return Found.ABSENT
    observation = await compare_queue(connection, entity)
    if isinstance(observation, Refused):
        raise ConflictError(f"rr migrate: queue {entity.name!r}: {observation.reason}")
    return Found.AS_FILE if isinstance(observation, Matches) else Found.OLD


class _Run:
    """One rebuild's steps on one connection (the order is ``topology/migration.py``'s)."""

    def __init__(
        self,
        connection: Connection,
        found: Look,
        *,
        api: ManagementApi | None,
        hooks: MigrateHooks,
        done: Migration,
    ) -> None:
        self._connection = connection
        self._look = found
        self._rebuild = found.rebuild
        self._api = api
        self._hooks = hooks
        self._done = done
        self._report: StepReport | None = None

    def _begin(self, step: Step) -> StepReport:
        report = StepReport(queue=self._rebuild.name, step=step)
        self._done.steps.append(report)
        self._report = report
        self._hooks.step(report)
        return report

    async def rebuild(self) -> None:
        """The steps of the rebuild still to take, from where a stopped run left it."""
        if self._look.phase is Phase.BEFORE:
            await self.before()
        if self._look.phase is not Phase.DONE:
            await self.after()

    async def before(self) -> None:
        rebuild = self._rebuild
        report = self._begin(Step.HOLD)
        channel = await self._connection.channel()
        try:
            for entity in rebuild.holding_queues:
                await declare_entity(channel, entity)
                report.done.append(f"declared {entity.name}")
            holding = rebuild.holding
            if holding is not None:
                report = self._begin(Step.REDIRECT)
                for binding in rebuild.bindings:  # each bound to the queue itself
                    await declare_entity(channel, replace(binding, queue=holding.name))
                    await unbind_entity(channel, binding)
                    report.done.append(
                        f"{binding.exchange} ({binding.routing_key!r}) -> {holding.name} "
                        f"instead of {rebuild.name}"
                    )
        finally:
            await channel.close()
        self._begin(Step.DRAIN)
        await self._drain()
        report = self._begin(Step.DELETE)
        for name in reversed(rebuild.subjects):  # the wait queues first, then the queue
            if self._look.found.get(name) is Found.OLD:
                await self._delete_empty(name, report)

    async def _drain(self) -> None:
        rebuild = self._rebuild
        pairs = [(wait.name, holding_name(wait.name)) for wait in rebuild.drained]
        if rebuild.rebuilt:
            pairs.append((rebuild.name, holding_name(rebuild.name)))
        await self._move_until_empty(pairs)

    async def _move_until_empty(
        self, pairs: Sequence[tuple[str, str]], *, refilled: Mapping[str, QueueEntity] | None = None
    ) -> None:
        """Move each source of ``pairs`` into its target until all are empty; ``refilled``:
        the file's queues by name, when the targets are rebuilt queues (the refill: each move
        checked first, :meth:`_may_refill`)."""
        for _ in range(DRAIN_ROUNDS):
            left = 0
            for source, target in pairs:
                if await queue_info(self._connection, source) is None:
                    continue
                if refilled is not None:
                    await self._may_refill(source, refilled[target])
                await self._move(source, target)
            for source, _target in pairs:
                if await queue_info(self._connection, source) is None:
                    continue
                left += (await self._depth(source)).message_count
            if not left:
                return
        shown = ", ".join(source for source, _ in pairs)
        raise ConflictError(
            f"rr migrate: {shown} kept filling after {DRAIN_ROUNDS} moves: something publishes "
            "to them by name, or a consumer retries into them; stop it and run the same "
            "command again (nothing was deleted)"
        )

    async def _may_refill(self, source: str, target: QueueEntity) -> None:
        """Raise before a move into ``target`` that it could not keep (``topology/migration.py``
        ``refill_problem``): the plan weighed the numbers, but messages may have come since;
        nothing moves, and they stay in ``source``."""
        to_move = (await self._depth(source)).message_count
        in_queue = (await self._depth(target.name)).message_count
        problem = refill_problem(target, in_queue=in_queue, to_move=to_move)
        if problem is not None:
            raise ConflictError(
                f"rr migrate: the refill {source} -> {target.name} stopped before it moved a "
                f"message: {problem}; its {to_move:,} messages stay in {source}, none dropped "
                '(rr docs migrate-to-quorum "Migrating a queue")'
            )

    async def _depth(self, queue: str) -> QueueInfo:
        channel = await self._connection.channel()
        try:
            return await depth_on(self._connection, channel, queue)
        finally:
            await channel.close()

    async def _move(self, source: str, target: str) -> None:
        report = self._report
        assert report is not None
        result: TransferReport = await transfer(
            self._connection,
            source,
            _verbatim(target),
            TransferOptions(),
            kind=TransferKind.MOVE,
        )
        report.moved += result.sent
        report.possible_duplicates += result.possible_duplicates
        if result.sent:
            report.done.append(f"moved {result.sent:,} messages {source} -> {target}")
        problem = result.interrupted or result.stopped
        # No message came for a while (the only stop a move without a limit makes): a wait
        # queue's copies expire while it is drained, by their dead-letter route to the queue
        # (drained after it). If the source is empty now, the move is done
        # (docs/how-to/migrate-to-quorum.md, "Migrating a queue").
        went_quiet = result.interrupted is None and result.stopped is not None
        if went_quiet and not result.failed and (await self._depth(source)).message_count == 0:
            return
        if problem is None and result.failed:
            reasons = sorted({r.reason for r in result.results if r.reason})
            problem = f"{result.failed:,} could not be moved ({'; '.join(reasons)})"
        if problem is not None:
            raise ConflictError(
                f"rr migrate: the move {source} -> {target} stopped: {problem}; every message "
                "is in one of the two queues (or, for copies under way, both); run the same "
                "command again"
            )

    async def _delete_empty(self, name: str, report: StepReport) -> None:
        """Delete ``name`` only when it holds no message: a classic queue by the broker's own
        check (``if-empty``), a quorum queue (whose delete takes no such flag on RabbitMQ
        3.10 and 4.0) after a confirmed depth of 0."""
        quorum, _ = await queue_type(self._connection, name)
        channel = await self._connection.channel()
        try:
            if quorum:
                depth = await depth_on(self._connection, channel, name)
                if depth.message_count:
                    raise ConflictError(
                        f"rr migrate: {name} is not empty ({depth.message_count:,} messages "
                        "arrived): run the same command again"
                    )
                await channel.queue_delete(name)
            else:
                await channel.queue_delete(name, if_empty=True)
        except PreconditionFailed as error:
            raise ConflictError(
                f"rr migrate: {name} is not empty ({error}): run the same command again"
            ) from error
        finally:
            await channel.close()
        report.done.append(f"deleted {name}")

    async def after(self) -> None:
        rebuild = self._rebuild
        report = self._begin(Step.DECLARE)
        channel = await self._connection.channel()
        try:
            # every wait queue, not only the rebuilt ones: a run stopped after the delete
            # finds them gone, and the plan then calls them new, not rebuilt
            subjects = [rebuild.queue] if rebuild.rebuilt else []
            subjects += rebuild.waits
            for entity in subjects:
                if entity.policy is not None:
                    if self._api is None:
                        raise ConfigError(POLICY_NEEDS_MANAGEMENT)
                    await self._api.put_policy(entity.policy)
                await declare_entity(channel, entity)
                report.done.append(f"declared {entity.name} as the file says")
            holding = rebuild.holding
            if holding is not None:
                report = self._begin(Step.RESTORE)
                for binding in rebuild.bindings:
                    await declare_entity(channel, binding)
                    await unbind_entity(channel, replace(binding, queue=holding.name))
                    report.done.append(
                        f"{binding.exchange} ({binding.routing_key!r}) -> {rebuild.name} again"
                    )
        finally:
            await channel.close()
        self._begin(Step.REFILL)
        pairs = [(holding_name(wait.name), wait.name) for wait in rebuild.drained]
        if holding is not None:
            pairs.append((holding.name, rebuild.name))
        refilled = {rebuild.name: rebuild.queue} | {wait.name: wait for wait in rebuild.waits}
        await self._move_until_empty(pairs, refilled=refilled)
        report = self._begin(Step.CLEAN)
        for source, _ in pairs:  # the holding wait queues first: they feed the holding queue
            if await queue_info(self._connection, source) is not None:
                await self._delete_empty(source, report)


__all__ = [
    "Look",
    "MigrateHooks",
    "Migration",
    "StepReport",
    "migrate_topology",
]
