"""Policies against queue arguments and operator policies (docs/reference/topology.md, "Policies and
arguments"): the same scenarios on RabbitMQ 3.10.8, 4.0.5 and 4.3.6 and on the emulator at
each version (emulator/policies.py), judged by what the queue does.

Policies are set through the management port where the server has an API (RabbitMQ 4.0.5's
and 4.3.6's, ``transport/management_http.py``; the emulator's twin, ``emulator/management.py``),
else with the node's ``rabbitmqctl`` (3.10.8: one ``eval`` of ``rabbit_policy:parse_set`` for
all the policies of a step, as ``rabbitmqctl set_policy`` calls it; its texts go as byte lists,
since that ``eval`` drops quoted quotes).

Each case is one queue: its arguments, its policy, its operator policy, and what it does: a
message of a 300 ms TTL against one of 600 s gone after 2.5 s or not, the depth after 5
publishes with a limit of 2 against 100, a queue expiring after 1 s against 600 s, which of
two publishes a full queue keeps (``reject-publish`` the first, ``drop-head`` the second), where
a rejected message is dead-lettered, how often a message is delivered before a delivery limit
of 1 against 50 takes it, and (4.3) whether a returned message is held back 30 s or 0.1 s.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from rabbitctl_retry.errors import BrokerRefused, ChannelClosed, NotFound, PublishFailed
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.server import Policy, PolicyValue
from rabbitctl_retry.transport.base import Channel
from rabbitctl_retry.transport.management import ManagementApi
from rabbitctl_retry.transport.management_http import HttpManagementApi
from tests.backends import NODE_SETTINGS, Backend, EmulatorBackend, RabbitBackend, ctl
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.contract.versions import expected
from tests.observe import depth

TWIN_URL = "http://guest:guest@emulator:15672/"
SMALL_TTL, SMALL_LENGTH, SMALL_EXPIRES, BIG = 300, 2, 1000, 600_000
QUORUM: dict[str, FieldValue] = {"x-queue-type": "quorum"}

# -- setting policies on each backend ---------------------------------------------------------


def _api(backend: Backend) -> ManagementApi | None:
    if isinstance(backend, EmulatorBackend):
        return backend.emulator.management(TWIN_URL, vhost=backend.vhost)
    url = MANAGEMENT_URLS.get(backend.version)
    return None if url is None else HttpManagementApi(url, vhost=backend.vhost)


def _erl(text: str) -> str:
    return "<<" + ",".join(str(byte) for byte in text.encode()) + ">>"


def _ctl_eval(backend: Backend, calls: list[str]) -> None:
    assert isinstance(backend, RabbitBackend)
    answer = ctl(backend.broker, "eval", "[" + ",".join(calls) + "].")
    answers = answer.replace("\n", "").replace(" ", "").strip("[]").split(",")
    if any(word != "ok" for word in answers):
        raise BrokerRefused(f"rabbitmqctl refused a policy: {answer.strip()}")


async def put_policies(backend: Backend, policies: Sequence[tuple[Policy, bool]]) -> None:
    """Set each ``(policy, operator)`` on ``backend``'s vhost."""
    api = _api(backend)
    if api is not None:
        for policy, operator in policies:
            await api.put_policy(policy, operator=operator)
        return
    calls = []
    for policy, operator in policies:
        function = "parse_set_op" if operator else "parse_set"
        arguments = (
            backend.vhost,
            policy.name,
            policy.pattern,
            json.dumps(policy.keys),
            str(policy.priority),
            policy.apply_to,
            "rr-test",
        )
        calls.append(f"rabbit_policy:{function}({','.join(map(_erl, arguments))})")
    _ctl_eval(backend, calls)


async def delete_policy(backend: Backend, name: str) -> None:
    api = _api(backend)
    if api is not None:
        await api.delete_policy(name)
        return
    _ctl_eval(backend, [f"rabbit_policy:delete({_erl(backend.vhost)},{_erl(name)},<<114>>)"])


def only(name: str) -> str:
    """The pattern that finds the queue ``name`` alone (anchored, dots escaped)."""
    return "^" + name.replace(".", "\\.") + "$"


# -- the cases ------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    observe: str
    arguments: dict[str, FieldValue]
    policy: dict[str, PolicyValue] | None
    operator: dict[str, PolicyValue] | None
    outcome: str | dict[str, str]
    """What the queue does, on every line or per line (``backend.version``)."""
    lines: tuple[str, ...] = ("3.10", "4.0", "4.3")
    extra: dict[str, Any] = field(default_factory=dict)

    def expected(self, version: str) -> str:
        return self.outcome if isinstance(self.outcome, str) else self.outcome[version]


def _limits(kind: str) -> list[Case]:
    """message-ttl, max-length (and a classic queue's expires): the smallest of the three."""
    base = QUORUM if kind == "quorum" else {}
    found = []
    keys = [("message-ttl", "ttl", SMALL_TTL), ("max-length", "length", SMALL_LENGTH)]
    if kind == "classic":  # a quorum queue checks its expiry on a tick of 8 to 12 s
        keys.append(("expires", "expires", SMALL_EXPIRES))
    for key, observe, small in keys:
        argument = f"x-{key}"
        for tag, given, policy, operator in (
            ("pol", {}, small, None),
            ("argS-polB", {argument: small}, BIG, None),
            ("argB-polS", {argument: BIG}, small, None),
            ("argB-opS", {argument: BIG}, None, small),
            ("polB-opS", {}, BIG, small),
            ("polS-opB", {}, small, BIG),
        ):
            found.append(
                Case(
                    f"{kind}.{key}.{tag}",
                    observe,
                    {**base, **given},
                    None if policy is None else {key: policy},
                    None if operator is None else {key: operator},
                    "small",
                )
            )
        found.append(
            Case(f"{kind}.{key}.argB", observe, {**base, argument: BIG}, None, None, "big")
        )
    return found


def _overflow(kind: str) -> list[Case]:
    """A classic queue: the argument, then the operator policy, then the policy; a quorum
    queue: the operator policy, then the policy, then the argument (4.0 and 4.3: 3.10's
    operator policies take no overflow)."""
    base: dict[str, FieldValue] = {**(QUORUM if kind == "quorum" else {}), "x-max-length": 1}
    rp, dh = "reject-publish", "drop-head"
    quorum = kind == "quorum"
    rows: list[tuple[str, str | None, str | None, str | None, str, tuple[str, ...]]] = [
        ("pol", None, rp, None, "first", ("3.10", "4.0", "4.3")),
        ("argRP-polDH", rp, dh, None, "second" if quorum else "first", ("3.10", "4.0", "4.3")),
        ("argDH-polRP", dh, rp, None, "first" if quorum else "second", ("3.10", "4.0", "4.3")),
        ("polDH-opRP", None, dh, rp, "first", ("4.0", "4.3")),
        ("polRP-opDH", None, rp, dh, "second", ("4.0", "4.3")),
        ("argDH-opRP", dh, None, rp, "first" if quorum else "second", ("4.0", "4.3")),
        ("argRP-opDH", rp, None, dh, "second" if quorum else "first", ("4.0", "4.3")),
    ]
    return [
        Case(
            f"{kind}.overflow.{tag}",
            "overflow",
            {**base, **({} if argument is None else {"x-overflow": argument})},
            None if policy is None else {"overflow": policy},
            None if operator is None else {"overflow": operator},
            outcome,
            lines,
        )
        for tag, argument, policy, operator, outcome, lines in rows
    ]


def _dead_letters(kind: str) -> list[Case]:
    """The dead-letter exchange and routing key: the argument, key by key."""
    base = QUORUM if kind == "quorum" else {}
    prefix = f"{kind}.dl"
    a, b, d = f"{prefix}.x.a", f"{prefix}.x.b", f"{prefix}.x.d"
    return [
        Case(f"{prefix}.pol", "dead", dict(base), {"dead-letter-exchange": b}, None, "b"),
        Case(
            f"{prefix}.argA-polB",
            "dead",
            {**base, "x-dead-letter-exchange": a},
            {"dead-letter-exchange": b},
            None,
            "a",
        ),
        Case(
            f"{prefix}.rk-pol",
            "dead",
            dict(base),
            {"dead-letter-exchange": d, "dead-letter-routing-key": "b"},
            None,
            "b",
        ),
        Case(
            f"{prefix}.rk-argA-polB",
            "dead",
            {**base, "x-dead-letter-exchange": d, "x-dead-letter-routing-key": "a"},
            {"dead-letter-routing-key": "b"},
            None,
            "a",
        ),
        Case(
            f"{prefix}.rk-argX-polB",
            "dead",
            {**base, "x-dead-letter-exchange": d},
            {"dead-letter-routing-key": "b"},
            None,
            "b",
        ),
    ]


def _delivery_limits() -> list[Case]:
    """A quorum queue's delivery limit: the smallest (1 lets a message be delivered twice)."""
    base = {**QUORUM, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "limit.sink"}
    rows: list[tuple[str, int | None, int | None, int | None]] = [
        ("pol", None, 1, None),
        ("argS-polB", 1, 50, None),
        ("argB-polS", 50, 1, None),
        ("argB-opS", 50, None, 1),
        ("polB-opS", None, 50, 1),
        ("polS-opB", None, 1, 50),
    ]
    found = [
        Case(
            f"quorum.delivery-limit.{tag}",
            "limit",
            {**base, **({} if argument is None else {"x-delivery-limit": argument})},
            None if policy is None else {"delivery-limit": policy},
            None if operator is None else {"delivery-limit": operator},
            "2",
        )
        for tag, argument, policy, operator in rows
    ]
    found.append(
        Case(
            "quorum.delivery-limit.argB", "limit", {**base, "x-delivery-limit": 50}, None, None, "5"
        )
    )
    # RabbitMQ 4: a negative limit is none at all, so the other one applies (3.10 refuses a
    # negative delivery-limit in a policy): rr declares -1 (docs/reference/topology.md)
    unlimited: list[tuple[str, int | None, int | None]] = [
        ("argU-polS", -1, 1),
        ("argS-polU", 1, -1),
        ("argU", -1, None),
        ("polU", None, -1),
    ]
    found.extend(
        Case(
            f"quorum.delivery-limit.{tag}",
            "limit",
            {**base, **({} if argument is None else {"x-delivery-limit": argument})},
            None if policy is None else {"delivery-limit": policy},
            None,
            "2" if 1 in (argument, policy) else "5",
            lines=("4.0", "4.3"),
        )
        for tag, argument, policy in unlimited
    )
    return found


def _delayed_retries() -> list[Case]:
    """4.3: the type from the policies (the operator policy's first), the minimum the smaller
    of the argument and the policies' (the larger of policy and operator policy)."""
    slow, fast = 30_000, 100
    rows: list[
        tuple[
            str,
            dict[str, FieldValue],
            dict[str, PolicyValue] | None,
            dict[str, PolicyValue] | None,
            str,
        ]
    ] = [
        ("pol", {}, {"delayed-retry-type": "all", "delayed-retry-min": slow}, None, "held"),
        (
            "argF-polS",
            {"x-delayed-retry-type": "all", "x-delayed-retry-min": fast},
            {"delayed-retry-type": "all", "delayed-retry-min": slow},
            None,
            "back",
        ),
        (
            "argS-polF",
            {"x-delayed-retry-type": "all", "x-delayed-retry-min": slow},
            {"delayed-retry-type": "all", "delayed-retry-min": fast},
            None,
            "back",
        ),
        (
            "polF-opS",
            {},
            {"delayed-retry-type": "all", "delayed-retry-min": fast},
            {"delayed-retry-min": slow},
            "held",
        ),
        (
            "polS-opF",
            {},
            {"delayed-retry-type": "all", "delayed-retry-min": slow},
            {"delayed-retry-min": fast},
            "held",
        ),
        (
            "argS-opF",
            {"x-delayed-retry-type": "all", "x-delayed-retry-min": slow},
            None,
            {"delayed-retry-min": fast},
            "back",
        ),
        (
            "argall-poloff",
            {"x-delayed-retry-type": "all", "x-delayed-retry-min": slow},
            {"delayed-retry-type": "disabled"},
            None,
            "back",
        ),
        (
            "argoff-polall",
            {"x-delayed-retry-type": "disabled", "x-delayed-retry-min": slow},
            {"delayed-retry-type": "all", "delayed-retry-min": slow},
            None,
            "held",
        ),
        (
            "polall-opoff",
            {},
            {"delayed-retry-type": "all", "delayed-retry-min": slow},
            {"delayed-retry-type": "disabled"},
            "back",
        ),
    ]
    return [
        Case(
            f"quorum.delayed.{tag}",
            "delayed",
            {**QUORUM, **given},
            policy,
            operator,
            outcome,
            ("4.3",),
        )
        for tag, given, policy, operator, outcome in rows
    ]


CASES = [
    *_limits("classic"),
    *_limits("quorum"),
    *_overflow("classic"),
    *_overflow("quorum"),
    *_dead_letters("classic"),
    *_dead_letters("quorum"),
    *_delivery_limits(),
    *_delayed_retries(),
]


# -- observing ------------------------------------------------------------------------------


async def _exists(backend: Backend, queue: str) -> bool:
    connection = await backend.connect()
    try:
        channel = await connection.channel()
        try:
            await channel.queue_declare(queue, passive=True)
        except (NotFound, ChannelClosed):
            return False
        return True
    finally:
        await connection.close()


async def _dead_letter_sinks(channel: Channel) -> None:
    for kind in ("classic", "quorum"):
        prefix = f"{kind}.dl"
        for letter in ("a", "b"):
            await channel.exchange_declare(f"{prefix}.x.{letter}", type="fanout")
            await channel.queue_declare(f"{prefix}.to.{letter}")
            await channel.queue_bind(f"{prefix}.to.{letter}", f"{prefix}.x.{letter}")
        await channel.exchange_declare(f"{prefix}.x.d", type="direct")
        for letter in ("a", "b"):
            await channel.queue_declare(f"{prefix}.rk.{letter}")
            await channel.queue_bind(f"{prefix}.rk.{letter}", f"{prefix}.x.d", letter)
    await channel.queue_declare("limit.sink")


async def _start(backend: Backend, channel: Channel, case: Case) -> None:
    """What each case does before the time passes."""
    queue = case.name
    if case.observe == "ttl":
        await channel.publish(b"m", routing_key=queue)
    elif case.observe == "length":
        for number in range(5):
            await channel.publish(b"m%d" % number, routing_key=queue)
    elif case.observe == "overflow":
        for body in (b"first", b"second"):
            with contextlib.suppress(PublishFailed):  # reject-publish refuses the second
                await channel.publish(body, routing_key=queue)
    elif case.observe == "delayed":
        await channel.publish(b"m", routing_key=queue)
        delivery = await _get(backend, channel, queue)
        assert delivery is not None
        await channel.reject(delivery.delivery_tag, requeue=True)


async def _get(backend: Backend, channel: Channel, queue: str) -> Any:
    delivery = await channel.get(queue)
    if delivery is None and isinstance(backend, RabbitBackend):
        await backend.elapse(0.3)  # a quorum queue takes a moment to give a message back
        delivery = await channel.get(queue)
    return delivery


async def _outcome(backend: Backend, channel: Channel, case: Case) -> str:
    """What ``case``'s queue did, once the time passed."""
    queue = case.name
    match case.observe:
        case "ttl":
            return "small" if await depth(channel, queue) == 0 else "big"
        case "length":
            return "small" if await depth(channel, queue) == SMALL_LENGTH else "big"
        case "expires":
            return "big" if await _exists(backend, queue) else "small"
        case "overflow":
            delivery = await channel.get(queue, no_ack=True)
            return "none" if delivery is None else delivery.body.decode()
        case "delayed":
            return "back" if await channel.get(queue, no_ack=True) is not None else "held"
        case "dead":
            await channel.publish(b"m", routing_key=queue)
            delivery = await _get(backend, channel, queue)
            assert delivery is not None
            await channel.reject(delivery.delivery_tag, requeue=False)
            prefix = queue.rsplit(".", 1)[0]
            sinks = [f"{prefix}.to.a", f"{prefix}.to.b", f"{prefix}.rk.a", f"{prefix}.rk.b"]
            found: list[str] = []

            async def arrived() -> bool:
                found[:] = [s[-1] for s in sinks if await depth(channel, s) > 0]
                return bool(found)

            await backend.until(arrived, f"the dead letter of {queue}")
            for sink in sinks:
                await channel.queue_purge(sink)
            return ",".join(found)
        case "limit":
            await channel.publish(b"m", routing_key=queue)
            deliveries = 0
            while deliveries < 5:
                delivery = await _get(backend, channel, queue)
                if delivery is None:
                    break
                deliveries += 1
                await channel.reject(delivery.delivery_tag, requeue=True)
            return str(deliveries)
    raise AssertionError(case.observe)


async def test_argument_policy_and_operator_policy_per_key(backend: Backend) -> None:
    cases = [case for case in CASES if backend.version in case.lines]
    policies: list[tuple[Policy, bool]] = []
    for number, case in enumerate(cases):
        if case.policy is not None:
            policies.append((Policy.of(f"p{number}", only(case.name), case.policy), False))
        if case.operator is not None:
            policies.append((Policy.of(f"o{number}", only(case.name), case.operator), True))
    await put_policies(backend, policies)
    channel = await backend.channel()
    await _dead_letter_sinks(channel)
    for case in cases:
        await channel.queue_declare(case.name, arguments=case.arguments)
    for case in cases:
        await _start(backend, channel, case)
    await backend.elapse(2.5)
    if isinstance(backend, EmulatorBackend):
        await backend.emulator.settle()
    found = {}
    for case in sorted(cases, key=lambda case: case.observe in ("dead", "limit")):
        found[case.name] = await _outcome(backend, channel, case)  # the timed ones first

    assert found == {case.name: case.expected(backend.version) for case in cases}


async def test_which_policy_applies_and_a_change_applies_at_once(backend: Backend) -> None:
    two = {"max-length": 2}
    policies = [
        Policy.of("prio-a-low", only("prio.a"), {"max-length": 3}, priority=1),
        Policy.of("prio-a-high", only("prio.a"), two, priority=2),
        Policy.of("prio-b-high", only("prio.b"), {"max-length": 3}, priority=2),
        Policy.of("prio-b-low", only("prio.b"), two, priority=1),
        Policy.of("exchanges", only("apply.ex"), two, apply_to="exchanges"),
        Policy.of("dot", "^re.a.b$", two),
        Policy.of("escaped", "^re2\\.a\\.b$", two),
        Policy.of("unanchored", "mid", two),
        Policy.of("change-c", only("chg.c"), {"max-length": 5}),
        Policy.of("change-q", only("chg.q"), {"max-length": 5}),
    ]
    operator = [
        Policy.of("op-high", only("op.prio"), {"max-length": 4}, priority=5),
        Policy.of("op-low", only("op.prio"), two, priority=1),
    ]
    await put_policies(
        backend,
        [(policy, False) for policy in policies] + [(policy, True) for policy in operator],
    )
    channel = await backend.channel()
    queues = ("prio.a", "prio.b", "apply.ex", "re.aXb", "re2.aXb", "x.mid.y", "op.prio")
    for queue in (*queues, "chg.c"):
        await channel.queue_declare(queue)
    await channel.queue_declare("chg.q", arguments=QUORUM)
    for queue in (*queues, "chg.c", "chg.q"):
        for number in range(6):
            await channel.publish(b"m%d" % number, routing_key=queue)

    async def depths(*names: str) -> list[int]:
        return [await depth(channel, name) for name in names]

    await backend.elapse(0.3)
    # the highest priority alone (operator policies too: 4, not the smaller 2); '.' any
    # character, the pattern found anywhere in the name
    assert await depths(*queues) == [2, 3, 6, 2, 6, 2, 4]
    assert await depths("chg.c", "chg.q") == [5, 5]

    await put_policies(
        backend,
        [
            (Policy.of("change-c", only("chg.c"), two), False),
            (Policy.of("change-q", only("chg.q"), two), False),
        ],
    )

    async def applied() -> bool:
        # the server applies a changed policy to its queues in the background: on a busy
        # machine later than any fixed wait
        return await depths("chg.c", "chg.q") == [2, 2]

    await backend.until(applied, "the changed limit applied")  # the oldest dropped, no redeclare
    oldest = await channel.get("chg.c", no_ack=True)
    assert oldest is not None
    assert oldest.body == b"m4"

    await delete_policy(backend, "change-c")
    await delete_policy(backend, "change-q")
    for queue in ("chg.c", "chg.q"):
        for number in range(5):
            await channel.publish(b"n%d" % number, routing_key=queue)
    await backend.elapse(0.3)
    assert await depths("chg.c", "chg.q") == [6, 7]  # no limit any more


async def test_a_policy_delivery_limit_replaces_the_default(backend: Backend) -> None:
    """RabbitMQ 4 gives a quorum queue without ``x-delivery-limit`` a limit of 20; a policy's
    limit replaces it (the smallest of argument and policies, not of the default)."""
    await put_policies(
        backend, [(Policy.of("limit", only("limited"), {"delivery-limit": 30}), False)]
    )
    channel = await backend.channel()
    await channel.queue_declare("limited", arguments=QUORUM)
    await channel.publish(b"m", routing_key="limited")
    deliveries = 0
    while deliveries < 25:
        delivery = await _get(backend, channel, "limited")
        if delivery is None:
            break
        deliveries += 1
        await channel.reject(delivery.delivery_tag, requeue=True)
    assert deliveries == 25


async def test_a_policy_per_queue_type(backend: Backend) -> None:
    two = {"max-length": 2}
    by_type = [
        Policy.of("classic-only", "^typed\\.", two, apply_to="classic_queues"),
        Policy.of("quorum-only", "^typed\\.", {"max-length": 3}, apply_to="quorum_queues"),
    ]
    if not expected(backend.version, "policy-apply-to-queue-type"):
        with pytest.raises(BrokerRefused):
            await put_policies(backend, [(by_type[0], False)])
        return
    await put_policies(backend, [(policy, False) for policy in by_type])
    channel = await backend.channel()
    await channel.queue_declare("typed.classic")
    await channel.queue_declare("typed.quorum", arguments=QUORUM)
    for queue in ("typed.classic", "typed.quorum"):
        for number in range(5):
            await channel.publish(b"m%d" % number, routing_key=queue)
    await backend.elapse(0.3)
    assert [await depth(channel, q) for q in ("typed.classic", "typed.quorum")] == [2, 3]


async def test_operator_policies_take_only_some_keys(backend: Backend) -> None:
    refused = []
    for key, value in (
        ("overflow", "reject-publish"),
        ("dead-letter-exchange", "x"),
        ("delayed-retry-min", 100),
    ):
        try:
            await put_policies(backend, [(Policy.of(f"op-{key}", "^none$", {key: value}), True)])
        except BrokerRefused:
            refused.append(key)

    assert refused == expected(backend.version, "operator-policy-refuses")


RETRY_S = 1.0


@pytest.mark.xdist_group(NODE_SETTINGS)  # the timeout is node-wide: one test at a time
async def test_the_dead_letter_strategy_of_the_argument(backend: Backend) -> None:
    """At-least-once keeps a dead letter its target refuses (here: the queue is missing) and
    sends it once the target is there; at-most-once drops it. The argument wins over the
    policy; the policy's overflow counts (at-least-once needs ``reject-publish``)."""
    backend.set_dead_letter_retry(RETRY_S)
    least, most = "at-least-once", "at-most-once"
    rp: dict[str, FieldValue] = {"x-overflow": "reject-publish"}
    rows: list[tuple[str, dict[str, FieldValue], dict[str, PolicyValue], bool]] = [
        ("dls.pol", rp, {"dead-letter-strategy": least}, True),
        (
            "dls.argM-polL",
            {**rp, "x-dead-letter-strategy": most},
            {"dead-letter-strategy": least},
            False,
        ),
        (
            "dls.argL-polM",
            {**rp, "x-dead-letter-strategy": least},
            {"dead-letter-strategy": most},
            True,
        ),
        ("dls.argL-polRP", {"x-dead-letter-strategy": least}, {"overflow": "reject-publish"}, True),
        (
            "dls.argL-polDH",
            {**rp, "x-dead-letter-strategy": least},
            {"overflow": "drop-head"},
            False,
        ),
    ]
    await put_policies(
        backend,
        [(Policy.of(f"p{n}", only(name), p), False) for n, (name, _, p, _) in enumerate(rows)],
    )
    channel = await backend.channel()
    for name, arguments, _, _ in rows:
        dead = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"{name}.dead"}
        await channel.queue_declare(name, arguments={**QUORUM, **dead, **arguments})
        await channel.publish(b"m", routing_key=name)
        delivery = await _get(backend, channel, name)
        assert delivery is not None
        await channel.reject(delivery.delivery_tag, requeue=False)
    await backend.elapse(0.3)
    for name, *_ in rows:
        await channel.queue_declare(f"{name}.dead")
    await backend.elapse(RETRY_S * 3)

    async def arrived() -> bool:
        found = [await depth(channel, f"{name}.dead") for name, *_ in rows]
        return found == [int(kept) for *_, kept in rows]

    await backend.until(arrived, "the kept dead letters sent again")
    assert {name: await depth(channel, f"{name}.dead") for name, *_ in rows} == {
        name: int(kept) for name, _, _, kept in rows
    }
