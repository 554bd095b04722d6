"""RabbitMQ's ``deps/rabbit/test/dead_lettering_SUITE.erl``, ported as contract scenarios.

Each test is the Erlang case of its name, run on the queue kinds of the suite's groups
(support.py): ``classic_queue/at_most_once``, ``quorum_queue/at_most_once`` and
``quorum_queue/at_least_once`` (``x-dead-letter-strategy`` at-least-once with ``x-overflow``
reject-publish; it leaves out the drop-head cases and ``dead_letter_missing_exchange``, as the
suite does), and the metric cases on ``classic_queue/disabled`` and ``quorum_queue/disabled``.
The ``mirrored_queue`` group and the cases not ported at all are listed with the reason in
rabbitmq_suite/__init__.py ``NOT_PORTED``.

What cannot be observed over AMQP 0-9-1 is left out, here once for all cases:

* ``counted(Metric, Config)``: the node's global dead-letter counters
  (``rabbit_global_counters``, read by RPC) -- every ``?assertEqual(N, counted(...))`` and the
  whole assertion of the ``metric_*`` cases. Those cases are ported with what a client sees
  instead: which messages the queue still holds.
* ``wait_for_messages``' total and unacked columns (support.py): the ready count and the
  consumer count of ``queue.declare-ok`` are checked instead.

Where the suite only looked at some headers, the scenarios check every header and the routing
of each dead letter exactly; where RabbitMQ 3.10 and 4.0 differ, the expectation is per
version (tests/contract/versions.py and support.DIFFERENCES). The Erlang suite's fixed sleeps
and ``consistently`` checks are replaced by waiting for a queue's ready count, and its
message TTLs of 0 or 1 ms stay as they are (the emulator lets that time pass on its clock).
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.errors import PublishFailed
from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.transport.base import Delivery
from tests.backends import NODE_SETTINGS, Backend
from tests.contract.rabbitmq_suite import EMULATOR_GAPS, NOT_PORTED
from tests.contract.rabbitmq_suite.support import (
    CLASSIC,
    CLASSIC_DISABLED,
    QUORUM_AT_LEAST_ONCE,
    QUORUM_AT_MOST_ONCE,
    QUORUM_DISABLED,
    QueueKind,
    Scenario,
    expected,
    kinds,
)
from tests.contract.support import death, first_death, view
from tests.contract.versions import last_death

SUITE = "dead_lettering_SUITE"

DEAD_LETTERING_CASES = (
    # DeadLetterTests
    "dead_letter_nack",
    "dead_letter_multiple_nack",
    "dead_letter_nack_requeue",
    "dead_letter_nack_requeue_multiple",
    "dead_letter_reject",
    "dead_letter_reject_many",
    "dead_letter_reject_requeue",
    "dead_letter_max_length_drop_head",
    "dead_letter_reject_requeue_reject_norequeue",
    "dead_letter_missing_exchange",
    "dead_letter_routing_key",
    "dead_letter_routing_key_header_CC",
    "dead_letter_routing_key_header_BCC",
    "dead_letter_routing_key_cycle_max_length",
    "dead_letter_routing_key_cycle_with_reject",
    "dead_letter_policy",
    "dead_letter_override_policy",
    "dead_letter_ignore_policy",
    "dead_letter_headers",
    "dead_letter_headers_reason_maxlen",
    "dead_letter_headers_cycle",
    "dead_letter_headers_BCC",
    "dead_letter_headers_CC",
    "dead_letter_headers_CC_with_routing_key",
    "dead_letter_headers_first_death",
    "dead_letter_headers_first_death_route",
    "dead_letter_ttl",
    "dead_letter_routing_key_cycle_ttl",
    "dead_letter_headers_reason_expired",
    "dead_letter_headers_reason_expired_per_message",
    "dead_letter_extra_bcc",
    # DisabledMetricTests
    "metric_maxlen",
    "metric_rejected",
    "metric_expired_queue_msg_ttl",
    "metric_expired_per_msg_msg_ttl",
    # classic_queue/at_most_once only
    "dead_letter_max_length_reject_publish_dlx",
)
"""Every case name of the suite's ``groups()``."""

DEAD_LETTERING_GROUPS = ("classic_queue", "mirrored_queue", "quorum_queue")
"""The suite's queue-kind groups (each holds at_most_once, disabled and, for quorum queues,
at_least_once)."""

AT_MOST_ONCE = kinds(CLASSIC, QUORUM_AT_MOST_ONCE)
"""The groups of a case the suite leaves out of ``quorum_queue/at_least_once``."""
EVERY_KIND = kinds(CLASSIC, QUORUM_AT_MOST_ONCE, QUORUM_AT_LEAST_ONCE)
DISABLED = kinds(CLASSIC_DISABLED, QUORUM_DISABLED)
"""The ``disabled`` groups (no dead-letter exchange) of the metric cases."""

NACKED = (
    "publish to the default exchange with routing key '{q}': the broker refused the message "
    "(basic.nack)"
)
"""A negative publisher confirm, as the transport reports it."""

RETRY_S = 0.5
"""``dead_letter_worker_publisher_confirm_timeout`` for the at-least-once cases that need the
dead-letter worker to send a dead letter again (the suite sets 2 s for the whole node)."""


@pytest.fixture
async def s(request: pytest.FixtureRequest, backend: Backend, kind: QueueKind) -> Scenario:
    """The case of the test's name on ``backend`` and the queue kind ``kind``."""
    case = request.node.originalname.removeprefix("test_")
    return await Scenario.open(backend, kind, case)


def bodies_of(deliveries: list[Delivery]) -> list[str]:
    return [d.body.decode() for d in deliveries]


# -- 1) rejected with basic.reject or basic.nack, requeue=false -------------------------------


@EVERY_KIND
async def test_dead_letter_nack(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_nack -- basic.nack, requeue=false,
    multiple=false: the last of three first, then the other two."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues()
    await s.publish(q, ["msg1", "msg2", "msg3"])
    await s.wait_for_messages(q, 3)
    m1, m2, m3 = await s.consume(q, ["msg1", "msg2", "msg3"])
    await s.nack(m3, requeue=False)
    await s.wait_for_messages(dlq, 1)
    await s.consume_empty(q)
    [dead] = await s.consume(dlq, ["msg3"])
    assert view(dead) == {
        "body": "msg3",
        "exchange": s.names.dlx_exchange,
        "routing_key": dlq,
        "redelivered": False,
        "headers": s.died("rejected", q),
        "expiration": None,
    }
    await s.consume_empty(dlq)
    await s.nack(m1, requeue=False)
    await s.nack(m2, requeue=False)
    await s.consume_empty(q)
    # the suite gets them at once; a real broker may take a moment to move them
    await s.wait_for_messages(dlq, 2, unacked=1)
    await s.consume(dlq, ["msg1", "msg2"])
    await s.consume_empty(dlq)


@EVERY_KIND
async def test_dead_letter_multiple_nack(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_multiple_nack -- basic.nack, requeue=false,
    multiple=true: all three, in order."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues()
    await s.publish(q, ["msg1", "msg2", "msg3"])
    await s.wait_for_messages(q, 3)
    *_, m3 = await s.consume(q, ["msg1", "msg2", "msg3"])
    await s.nack(m3, multiple=True, requeue=False)
    await s.wait_for_messages(dlq, 3)
    dead = await s.consume(dlq, ["msg1", "msg2", "msg3"])
    assert [view(d)["headers"] for d in dead] == [s.died("rejected", q)] * 3
    await s.consume_empty(dlq)
    await s.consume_empty(q)


@EVERY_KIND
async def test_dead_letter_nack_requeue(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_nack_requeue -- basic.nack, requeue=true,
    multiple=false: no dead-lettering."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues()
    await s.publish(q, ["msg1", "msg2", "msg3"])
    await s.wait_for_messages(q, 3)
    *_, m3 = await s.consume(q, ["msg1", "msg2", "msg3"])
    await s.consume_empty(q)
    await s.nack(m3, requeue=True)
    await s.wait_for_messages(q, 1, unacked=2)
    [again] = await s.consume(q, ["msg3"])
    assert again.redelivered
    await s.consume_empty(q)
    await s.consume_empty(dlq)


@EVERY_KIND
async def test_dead_letter_nack_requeue_multiple(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_nack_requeue_multiple -- basic.nack, requeue=true,
    multiple=true: no dead-lettering, all three back in order."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues()
    await s.publish(q, ["msg1", "msg2", "msg3"])
    await s.wait_for_messages(q, 3)
    *_, m3 = await s.consume(q, ["msg1", "msg2", "msg3"])
    await s.consume_empty(q)
    await s.nack(m3, multiple=True, requeue=True)
    await s.wait_for_messages(q, 3)
    again = await s.consume(q, ["msg1", "msg2", "msg3"])
    assert [d.redelivered for d in again] == [True, True, True]
    await s.consume_empty(q)
    await s.consume_empty(dlq)


@EVERY_KIND
async def test_dead_letter_reject(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_reject -- basic.reject, requeue=false."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues()
    await s.publish(q, ["msg1", "msg2", "msg3"])
    await s.wait_for_messages(q, 3)
    [m1] = await s.consume(q, ["msg1"])
    await s.reject(m1, requeue=False)
    await s.wait_for_messages(dlq, 1)
    [dead] = await s.consume(dlq, ["msg1"])
    assert view(dead)["headers"] == s.died("rejected", q)
    await s.consume_empty(dlq)
    await s.consume(q, ["msg2", "msg3"])
    await s.consume_empty(q)


@EVERY_KIND
async def test_dead_letter_reject_many(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_reject_many -- 100 messages rejected by one consumer
    are dead-lettered in order."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues()
    payloads = [str(n) for n in range(1, 101)]
    await s.publish(q, payloads)
    await s.wait_for_messages(q, 100)
    assert [body.decode() for body in await s.reject_all(q, 100)] == payloads
    await s.wait_for_messages(dlq, 100)
    await s.consume(dlq, payloads)
    await s.consume_empty(dlq)


@EVERY_KIND
async def test_dead_letter_reject_requeue(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_reject_requeue -- basic.reject, requeue=true: no
    dead-lettering, the message back at the head.

    Adapted: the suite sets a policy ``delivery-limit: 50`` (so that a quorum queue requeues
    at the head, as a classic queue does); the emulator has no policies, so a quorum queue is
    declared with the argument ``x-delivery-limit: 50`` instead, which sets the same limit (a
    classic queue ignores the policy and gets no argument)."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues({"x-delivery-limit": 50} if s.kind.quorum else {})
    await s.publish(q, ["msg1", "msg2", "msg3"])
    await s.wait_for_messages(q, 3)
    [m1] = await s.consume(q, ["msg1"])
    await s.reject(m1, requeue=True)
    await s.wait_for_messages(q, 3)
    again = await s.consume(q, ["msg1", "msg2", "msg3"])
    assert [d.redelivered for d in again] == [True, False, False]
    await s.consume_empty(q)
    await s.consume_empty(dlq)


@EVERY_KIND
async def test_dead_letter_reject_requeue_reject_norequeue(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_reject_requeue_reject_norequeue
    (rabbitmq-server#4940) -- rejected with requeue, then without: dead-lettered once."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues()
    await s.publish(q, ["msg"])
    await s.wait_for_messages(q, 1)
    [first] = await s.consume(q, ["msg"])
    await s.wait_for_messages(q, 0, unacked=1)
    await s.reject(first, requeue=True)
    await s.wait_for_messages(q, 1)
    [second] = await s.consume(q, ["msg"])
    await s.wait_for_messages(q, 0, unacked=1)
    await s.reject(second, requeue=False)
    await s.wait_for_messages(dlq, 1)
    [dead] = await s.consume(dlq, ["msg"])
    assert view(dead) == {
        "body": "msg",
        "exchange": s.names.dlx_exchange,
        "routing_key": dlq,
        "redelivered": s.redelivered(q, dlq, rejects=2),
        "headers": s.died("rejected", q),
        "expiration": None,
    }
    await s.consume_empty(dlq)
    await s.consume_empty(q)


# -- 2) message TTL ---------------------------------------------------------------------------


@EVERY_KIND
async def test_dead_letter_ttl(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_ttl -- x-message-ttl 1 ms."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues({"x-message-ttl": 1})
    await s.publish(q, ["msg1"])
    await backend.elapse(0.01)
    await s.wait_for_messages(dlq, 1)
    await s.consume_empty(q)
    [dead] = await s.consume(dlq, ["msg1"])
    assert view(dead)["headers"] == s.died("expired", q)


# -- 3) queue length limit --------------------------------------------------------------------


@AT_MOST_ONCE
async def test_dead_letter_max_length_drop_head(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_max_length_drop_head -- x-max-length 1, drop-head:
    the two oldest are dead-lettered (maxlen). Not at-least-once (drop-head)."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues({"x-max-length": 1})
    await s.publish(q, ["msg1", "msg2", "msg3"])
    await s.wait_for_messages(q, 1)
    await s.consume(q, ["msg3"])
    await s.consume_empty(q)
    await s.wait_for_messages(dlq, 2)
    dead = await s.consume(dlq, ["msg1", "msg2"])
    assert [view(d)["headers"] for d in dead] == [s.died("maxlen", q)] * 2
    await s.consume_empty(dlq)


@kinds(CLASSIC)
async def test_dead_letter_max_length_reject_publish_dlx(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_max_length_reject_publish_dlx -- x-max-length 1,
    x-overflow reject-publish-dlx: the new ones are dead-lettered (maxlen), and (what the
    suite, without confirms, does not see) negatively confirmed. Classic only."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues({"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
    await s.publish(q, ["msg1"])
    for refused in ("msg2", "msg3"):
        with pytest.raises(PublishFailed) as nacked:
            await s.publish(q, [refused])
        assert str(nacked.value) == NACKED.format(q=q)
    await s.wait_for_messages(q, 1)
    await s.consume(q, ["msg1"])
    await s.consume_empty(q)
    await s.wait_for_messages(dlq, 2)
    dead = await s.consume(dlq, ["msg2", "msg3"])
    assert [view(d)["headers"] for d in dead] == [s.died("maxlen", q)] * 2
    await s.consume_empty(dlq)


@AT_MOST_ONCE
async def test_dead_letter_missing_exchange(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_missing_exchange -- a dead-letter exchange missing
    when the message dies drops it; once declared, the next one arrives. Not at-least-once
    (the suite tests that in rabbit_fifo_dlx_integration_SUITE)."""
    q, dlq = s.names.queue, s.names.dlx_queue
    dlx = "dlx-exchange-2"
    await s.channel.exchange_delete(dlx)  # delete-ok for an exchange that does not exist
    await s.declare_source(
        q,
        {
            "x-max-length": 1,
            "x-dead-letter-exchange": dlx,
            "x-dead-letter-routing-key": dlq,
        },
        {},
    )
    await s.declare_queue(dlq, durable=s.kind.durable)
    await s.publish(q, ["msg1"])
    await s.wait_for_messages(q, 1)
    [m1] = await s.consume(q, ["msg1"])
    await s.reject(m1, requeue=False)
    await s.wait_for_messages(q, 0)
    await s.consume_empty(dlq)
    await s.channel.exchange_declare(dlx, durable=False)
    await s.channel.queue_bind(dlq, dlx, dlq)
    await s.publish(q, ["msg2"])
    await s.wait_for_messages(q, 1)
    [m2] = await s.consume(q, ["msg2"])
    await s.reject(m2, requeue=False)
    await s.wait_for_messages(dlq, 1)
    dead = await s.get(dlq)
    assert view(dead) == {
        "body": "msg2",
        "exchange": dlx,
        "routing_key": dlq,
        "redelivered": s.redelivered(q, dlq, rejects=1),
        "headers": s.died("rejected", q),
        "expiration": None,
    }
    await s.consume_empty(dlq)


# -- routing: the dead-letter routing key, or the message's own keys (CC, BCC) ------------


@EVERY_KIND
@pytest.mark.xdist_group(NODE_SETTINGS)  # at-least-once: the worker's retry is node-wide
async def test_dead_letter_routing_key(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_routing_key -- without x-dead-letter-routing-key the
    message keeps its routing key: unroutable in the DLX until the DLX queue is bound with it.
    At-most-once drops the first one; at-least-once keeps it (not ready) and sends it again
    after the dead-letter worker's timeout (shortened to RETRY_S).

    Adapted for at-least-once: the worker sends msg1 again at each tick of its timer (every
    RETRY_S) and msg2, nacked after the binding, at once; so that the order is the suite's
    (msg1, msg2) and not a race between a tick and msg2's nack, the scenario waits for msg1
    in the DLX queue before it publishes msg2 (measured on 3.10.8 and 4.0.5: without that
    wait msg2 comes first)."""
    if s.kind.at_least_once:
        backend.set_dead_letter_retry(RETRY_S)
    q, dlq, dlx = s.names.queue, s.names.dlx_queue, s.names.dlx_exchange
    await s.channel.exchange_declare(dlx, durable=False)
    await s.declare_source(q, {"x-dead-letter-exchange": dlx}, {})
    await s.declare_queue(dlq, durable=s.kind.durable)
    await s.publish(q, ["msg1"])
    await s.wait_for_messages(q, 1)
    [m1] = await s.consume(q, ["msg1"])
    await s.nack(m1, requeue=False)
    await s.wait_for_messages(q, 0)  # at-least-once: total 1 (kept), ready 0
    await s.consume_empty(q)
    await s.consume_empty(dlq)
    await s.channel.queue_bind(dlq, dlx, q)
    if s.kind.at_least_once:
        await backend.elapse(RETRY_S * 2)  # the worker's next attempt for msg1
        await s.wait_for_messages(dlq, 1)
    await s.publish(q, ["msg2"])
    await s.wait_for_messages(q, 1)
    [m2] = await s.consume(q, ["msg2"])
    await s.nack(m2, requeue=False)
    if s.kind.at_least_once:
        await s.wait_for_messages(dlq, 2)
        dead = await s.consume(dlq, ["msg1", "msg2"])
    else:
        await s.wait_for_messages(dlq, 1)
        dead = await s.consume(dlq, ["msg2"])
    for delivery in dead:
        assert (delivery.exchange, delivery.routing_key) == (dlx, q)
        assert view(delivery)["headers"] == s.died("rejected", q)
    await s.consume_empty(q)


async def routed_by_header(s: Scenario, header: str) -> None:
    """dead_letter_routing_key_header_CC and _BCC: msg2 carries ``header`` naming the DLX
    queue, so it reaches that queue when published (default exchange) and when dead-lettered
    (the DLX routes it by its own keys: the queue's name and the header's); msg1 does not."""
    q, dlq, dlx = s.names.queue, s.names.dlx_queue, s.names.dlx_exchange
    await s.channel.exchange_declare(dlx, durable=False)
    await s.declare_source(q, {"x-dead-letter-exchange": dlx}, {})
    await s.declare_queue(dlq, durable=s.kind.durable)
    await s.channel.queue_bind(dlq, dlx, dlq)
    await s.publish(q, ["msg1"])
    await s.publish(q, ["msg2"], {header: [dlq]})
    await s.wait_for_messages(q, 2)
    _, m2 = await s.consume(q, ["msg1", "msg2"])
    [copy] = await s.consume(dlq, ["msg2"])
    await s.nack(m2, multiple=True, requeue=False)
    await s.wait_for_messages(dlq, 1, unacked=1)
    await s.consume_empty(q)
    [dead] = await s.consume(dlq, ["msg2"])
    await s.consume_empty(dlq)
    # what the suite does not check: the headers of both copies
    cc = [dlq] if header == "CC" else []  # BCC is removed when published
    kept: dict[str, FieldValue] = {"CC": [*cc]} if cc else {}
    assert view(copy)["headers"] == kept
    assert view(dead) == {
        "body": "msg2",
        "exchange": dlx,
        "routing_key": q,
        "redelivered": False,
        "headers": s.died("rejected", q, routing_keys=[q, *cc], extra=kept),
        "expiration": None,
    }


@EVERY_KIND
async def test_dead_letter_routing_key_header_CC(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_routing_key_header_CC -- see routed_by_header."""
    await routed_by_header(s, "CC")


@EVERY_KIND
async def test_dead_letter_routing_key_header_BCC(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_routing_key_header_BCC -- see routed_by_header."""
    await routed_by_header(s, "BCC")


# -- cycles -----------------------------------------------------------------------------------


@AT_MOST_ONCE
async def test_dead_letter_routing_key_cycle_max_length(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_routing_key_cycle_max_length -- x-max-length 1,
    dead-lettered to the default exchange with its own key: back to the same queue without a
    rejection in the cycle, so dropped. Not at-least-once (drop-head)."""
    q = s.names.queue
    await s.declare_source(q, {"x-max-length": 1, "x-dead-letter-exchange": ""}, {})
    await s.publish(q, ["msg1", "msg2"])
    await s.wait_for_messages(q, 1)
    [m2] = await s.consume(q, ["msg2"])
    await s.consume_empty(q)
    await s.channel.ack(m2.delivery_tag)
    await s.wait_for_messages(q, 0)
    await s.consume_empty(q)


@EVERY_KIND
async def test_dead_letter_routing_key_cycle_ttl(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_routing_key_cycle_ttl -- x-message-ttl 1 ms,
    dead-lettered back to the same queue: an automatic cycle, both dropped."""
    q = s.names.queue
    await s.declare_source(q, {"x-message-ttl": 1, "x-dead-letter-exchange": ""}, {})
    await s.publish(q, ["msg1", "msg2"])
    await backend.elapse(0.01)
    await s.wait_for_messages(q, 0)
    await backend.elapse(0.1)  # and they do not come back
    await s.consume_empty(q)


@EVERY_KIND
async def test_dead_letter_routing_key_cycle_with_reject(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_routing_key_cycle_with_reject -- a cycle with a
    rejection in it goes on: the message is republished each time it is nacked."""
    q = s.names.queue
    await s.declare_source(q, {"x-dead-letter-exchange": ""}, {})
    await s.publish(q, ["msg1"])
    await s.wait_for_messages(q, 1)
    [first] = await s.consume(q, ["msg1"])
    await s.nack(first, requeue=False)
    await s.wait_for_messages(q, 1)
    [second] = await s.consume(q, ["msg1"])
    await s.nack(second, requeue=False)
    await s.wait_for_messages(q, 1)
    [third] = await s.consume(q, ["msg1"])
    assert view(third)["headers"] == s.died("rejected", q, count=2, extra=s.got_count(q, nacks=2))


# -- headers ----------------------------------------------------------------------------------


@EVERY_KIND
async def test_dead_letter_headers(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_headers -- every x-death field, reason rejected."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues()
    await s.publish(q, ["msg1"])
    await s.wait_for_messages(q, 1)
    [m1] = await s.consume(q, ["msg1"])
    await s.nack(m1, requeue=False)
    await s.wait_for_messages(dlq, 1)
    dead = await s.get(dlq)
    assert view(dead) == {
        "body": "msg1",
        "exchange": s.names.dlx_exchange,
        "routing_key": dlq,
        "redelivered": False,
        "headers": {
            "x-death": [death("rejected", q, exchange="", routing_keys=[q])],
            **first_death("rejected", q, ""),
            **last_death(backend.version, "rejected", q, ""),
        },
        "expiration": None,
    }


@EVERY_KIND
async def test_dead_letter_headers_reason_expired(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_headers_reason_expired -- queue TTL: reason expired,
    no original-expiration."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues({"x-message-ttl": 1})
    await s.publish(q, ["msg1"])
    await backend.elapse(0.01)
    await s.wait_for_messages(dlq, 1)
    dead = await s.get(dlq)
    assert dead.body == b"msg1"
    assert view(dead)["headers"] == s.died("expired", q)


@EVERY_KIND
async def test_dead_letter_headers_reason_expired_per_message(
    backend: Backend, s: Scenario
) -> None:
    """dead_lettering_SUITE:dead_letter_headers_reason_expired_per_message -- per-message
    TTL: reason expired, original-expiration the message's expiration."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues()
    await s.publish(q, ["msg1"], expiration="1")
    await s.publish(q, ["msg2"])  # so that the queue expires messages
    await backend.elapse(0.01)
    await s.wait_for_messages(dlq, 1)
    dead = await s.get(dlq)
    assert view(dead) == {
        "body": "msg1",
        "exchange": s.names.dlx_exchange,
        "routing_key": dlq,
        "redelivered": False,
        "headers": s.died("expired", q, original_expiration="1"),
        "expiration": None,
    }
    await s.wait_for_messages(q, 1)


@AT_MOST_ONCE
async def test_dead_letter_headers_reason_maxlen(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_headers_reason_maxlen -- reason maxlen. Not
    at-least-once (drop-head)."""
    q, dlq = s.names.queue, s.names.dlx_queue
    await s.declare_dead_letter_queues({"x-max-length": 1})
    await s.publish(q, ["msg1", "msg2"])
    await s.wait_for_messages(dlq, 1)
    dead = await s.get(dlq)
    assert dead.body == b"msg1"
    assert view(dead)["headers"] == s.died("maxlen", q)


@EVERY_KIND
async def test_dead_letter_headers_cycle(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_headers_cycle -- the same queue and reason again:
    one x-death entry, its count incremented."""
    q = s.names.queue
    await s.declare_source(q, {"x-dead-letter-exchange": ""}, {})
    await s.publish(q, ["msg1"])
    await s.wait_for_messages(q, 1)
    [m] = await s.consume(q, ["msg1"])
    await s.nack(m, requeue=False)
    await s.wait_for_messages(q, 1)
    once = await s.get(q)
    assert once.body == b"msg1"
    assert view(once)["headers"] == s.died("rejected", q, extra=s.got_count(q, nacks=1))
    await s.nack(once, requeue=False)
    await s.wait_for_messages(q, 1)
    twice = await s.get(q)
    assert twice.body == b"msg1"
    assert view(twice)["headers"] == s.died("rejected", q, count=2, extra=s.got_count(q, nacks=2))


async def copied_by_header(
    s: Scenario, header: str, *, dead_letter_key: bool
) -> tuple[Delivery, Delivery, Delivery]:
    """dead_letter_headers_CC, _CC_with_routing_key and _BCC: msg1 with ``header`` naming the
    DLX queue reaches the queue and the DLX queue; the queue's copy is nacked and
    dead-lettered (with the DLX queue's name as key when ``dead_letter_key``). The queue's
    copy, the DLX queue's, and the dead letter."""
    q, dlq, dlx = s.names.queue, s.names.dlx_queue, s.names.dlx_exchange
    await s.channel.exchange_declare(dlx, durable=False)
    arguments = {"x-dead-letter-exchange": dlx}
    if dead_letter_key:
        arguments = {"x-dead-letter-routing-key": dlq, **arguments}
    await s.declare_source(q, arguments, {})
    await s.declare_queue(dlq, durable=s.kind.durable)
    await s.channel.queue_bind(dlq, dlx, dlq)
    await s.publish(q, ["msg1"], {header: [dlq]})
    await s.wait_for_messages(q, 1)
    original = await s.get(q)
    copy = await s.get(dlq)
    assert (original.body, copy.body) == (b"msg1", b"msg1")
    assert "x-death" not in (original.properties.headers or {})
    assert "x-death" not in (copy.properties.headers or {})
    await s.nack(original, requeue=False)
    await s.wait_for_messages(dlq, 1, unacked=1)
    dead = await s.get(dlq)
    assert dead.body == b"msg1"
    await s.consume_empty(q)
    return original, copy, dead


@EVERY_KIND
async def test_dead_letter_headers_CC(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_headers_CC -- without a dead-letter routing key the
    CC header is kept (and routes the dead letter)."""
    original, copy, dead = await copied_by_header(s, "CC", dead_letter_key=False)
    q, dlq = s.names.queue, s.names.dlx_queue
    assert view(original)["headers"] == {"CC": [dlq], **s.got_count(q)}
    assert view(copy)["headers"] == {"CC": [dlq]}
    assert view(dead) == {
        "body": "msg1",
        "exchange": s.names.dlx_exchange,
        "routing_key": q,
        "redelivered": False,
        "headers": s.died("rejected", q, routing_keys=[q, dlq], extra={"CC": [dlq]}),
        "expiration": None,
    }


@EVERY_KIND
async def test_dead_letter_headers_CC_with_routing_key(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_headers_CC_with_routing_key -- with a dead-letter
    routing key the dead letter goes by that key only.

    Adapted: the suite expects the CC header removed; RabbitMQ 4.0.5 keeps it
    (support.DIFFERENCES "dead-letter-key-removes-cc"), 3.10.8 removes it."""
    original, copy, dead = await copied_by_header(s, "CC", dead_letter_key=True)
    q, dlq = s.names.queue, s.names.dlx_queue
    assert view(original)["headers"] == {"CC": [dlq], **s.got_count(q)}
    assert view(copy)["headers"] == {"CC": [dlq]}
    removed = expected(backend.version, "dead-letter-key-removes-cc")
    kept: dict[str, FieldValue] = {} if removed else {"CC": [dlq]}
    assert view(dead) == {
        "body": "msg1",
        "exchange": s.names.dlx_exchange,
        "routing_key": dlq,
        "redelivered": False,
        "headers": s.died("rejected", q, routing_keys=[q, dlq], extra=kept),
        "expiration": None,
    }


@EVERY_KIND
async def test_dead_letter_headers_BCC(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_headers_BCC -- the BCC header is always removed."""
    original, copy, dead = await copied_by_header(s, "BCC", dead_letter_key=False)
    q = s.names.queue
    assert view(original)["headers"] == s.got_count(q)
    assert view(copy)["headers"] == {}
    assert view(dead) == {
        "body": "msg1",
        "exchange": s.names.dlx_exchange,
        "routing_key": q,
        "redelivered": False,
        "headers": s.died("rejected", q),
        "expiration": None,
    }


@EVERY_KIND
async def test_dead_letter_headers_first_death(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_headers_first_death -- x-first-death-* are written
    at the first death and never changed: queue -> DLX queue -> queue."""
    q, dlq, dlx = s.names.queue, s.names.dlx_queue, s.names.dlx_exchange
    await s.channel.exchange_declare(dlx, durable=False)
    await s.declare_source(q, {"x-dead-letter-routing-key": dlq, "x-dead-letter-exchange": dlx}, {})
    await s.declare_queue(
        dlq,
        {"x-dead-letter-routing-key": q, "x-dead-letter-exchange": ""},
        durable=s.kind.durable,
    )
    await s.channel.queue_bind(dlq, dlx, dlq)
    await s.publish(q, ["msg1"])
    await s.wait_for_messages(q, 1)
    [m1] = await s.consume(q, ["msg1"])
    await s.nack(m1, requeue=False)
    await s.wait_for_messages(dlq, 1)
    once = await s.get(dlq)
    assert once.body == b"msg1"
    assert view(once)["headers"] == s.died("rejected", q)
    await s.nack(once, requeue=False)
    await s.wait_for_messages(q, 1)
    twice = await s.get(q)
    assert twice.body == b"msg1"
    assert view(twice)["headers"] == {
        "x-death": [
            death("rejected", dlq, exchange=dlx, routing_keys=[dlq]),
            death("rejected", q, exchange="", routing_keys=[q]),
        ],
        **first_death("rejected", q, ""),
        **last_death(backend.version, "rejected", dlq, dlx),
        **s.got_count(q, nacks=1),  # its death in q (the queue kind's)
    }


@EVERY_KIND
async def test_dead_letter_headers_first_death_route(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:dead_letter_headers_first_death_route -- a headers exchange
    routes dead letters by x-first-death-reason and -queue (x-match all-with-x, any-with-x).

    Adapted: the suite's ``consistently`` (msg2 never reaches the expired queue) is checked
    once msg2 has left its queue, and its ``timer:sleep(1000)`` is a wait for msg3."""
    q1, dlx = s.names.queue, s.names.dlx_exchange
    q2 = "dead_letter_headers_first_death_route_source_queue_2"
    expired_q, rejected_q = s.names.dlx_queue, s.names.dlx_queue_2
    await s.channel.exchange_declare(dlx, type="headers", durable=False)
    await s.declare_source(q1, {"x-dead-letter-exchange": dlx}, {})
    await s.declare_source(q2, {"x-dead-letter-exchange": dlx}, {})
    await s.declare_queue(expired_q, durable=s.kind.durable)
    await s.declare_queue(rejected_q, durable=s.kind.durable)
    await s.channel.queue_bind(
        expired_q,
        dlx,
        arguments={
            "x-match": "all-with-x",
            "x-first-death-reason": "expired",
            "x-first-death-queue": q1,
        },
    )
    await s.channel.queue_bind(
        rejected_q,
        dlx,
        arguments={"x-match": "any-with-x", "x-first-death-reason": "rejected"},
    )
    await s.publish(q1, ["msg1"], expiration="0")
    await s.wait_for_messages(expired_q, 1)
    await s.consume(expired_q, ["msg1"])
    await s.consume_empty(expired_q)
    await s.wait_for_messages(q1, 0)
    await s.publish(q2, ["msg2"], expiration="0")
    await s.wait_for_messages(q2, 0)
    await backend.elapse(0.2)  # the suite's consistently: it does not come
    await s.consume_empty(expired_q)
    await s.publish(q2, ["msg3"])
    await s.wait_for_messages(q2, 1)
    [m3] = await s.consume(q2, ["msg3"])
    await s.reject(m3, requeue=False)
    await s.wait_for_messages(rejected_q, 1)
    await s.consume(rejected_q, ["msg3"])
    await s.consume_empty(rejected_q)
    await s.channel.queue_delete(q2)


# -- metric cases (groups classic_queue/disabled, quorum_queue/disabled) ----------------------
# The suite asserts only the node's dead-letter counters (not observable over AMQP 0-9-1, see
# the module doc); these check what a client sees of the same scenario: no dead-letter
# exchange, so every message the queue lets go of is gone.


@DISABLED
async def test_metric_maxlen(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:metric_maxlen -- 1000 messages into x-max-length 1, drop-head:
    the last one stays (the suite counts 999 maxlen dead letters)."""
    q = s.names.queue
    await s.declare_source(q, {"x-max-length": 1, "x-overflow": "drop-head"}, {})
    await s.publish(q, [str(n) for n in range(1, 1001)])

    async def last_only() -> bool:
        return (await s.declare_ok(q))[0] == 1

    await backend.until(last_only, "the last message only")
    await s.consume(q, ["1000"])
    await s.consume_empty(q)


@DISABLED
async def test_metric_rejected(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:metric_rejected -- 1000 messages rejected by one consumer: all
    delivered in order, then gone (the suite counts 1000 rejected dead letters)."""
    q = s.names.queue
    await s.declare_source(q, {}, {})
    payloads = [str(n) for n in range(1, 1001)]
    await s.publish(q, payloads)
    await s.wait_for_messages(q, 1000)
    assert [body.decode() for body in await s.reject_all(q, 1000)] == payloads
    await s.wait_for_messages(q, 0)
    await s.consume_empty(q)


@DISABLED
async def test_metric_expired_queue_msg_ttl(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:metric_expired_queue_msg_ttl -- 1000 messages into
    x-message-ttl 0: none stays (the suite counts 1000 expired dead letters)."""
    q = s.names.queue
    await s.declare_source(q, {}, {"x-message-ttl": 0})
    await s.publish(q, [str(n) for n in range(1, 1001)])
    await backend.elapse(0.01)
    await s.wait_for_messages(q, 0)
    await s.consume_empty(q)


@DISABLED
async def test_metric_expired_per_msg_msg_ttl(backend: Backend, s: Scenario) -> None:
    """dead_lettering_SUITE:metric_expired_per_msg_msg_ttl -- 1000 messages with expiration
    0: none stays (the suite counts 1000 expired dead letters)."""
    q = s.names.queue
    await s.declare_source(q, {}, {})
    await s.publish(q, [str(n) for n in range(1, 1001)], expiration="0")
    await backend.elapse(0.01)
    await s.wait_for_messages(q, 0)
    await s.consume_empty(q)


# -- the port is complete ---------------------------------------------------------------------


def test_every_case_is_ported_or_listed() -> None:
    """Every case of the suite's groups() is a test here or in NOT_PORTED, not both; every
    entry this module put in NOT_PORTED and EMULATOR_GAPS names a case or test of it."""
    tests = {name for name in globals() if name.startswith("test_")}
    not_ported = {key.split(":", 1)[1] for key in NOT_PORTED if key.startswith(f"{SUITE}:")}
    groups = {key.split("/", 1)[1] for key in NOT_PORTED if key.startswith(f"{SUITE}/")}
    assert sorted(groups - set(DEAD_LETTERING_GROUPS)) == []
    ported = {case for case in DEAD_LETTERING_CASES if f"test_{case}" in tests}
    assert len(set(DEAD_LETTERING_CASES)) == len(DEAD_LETTERING_CASES)
    assert sorted(set(DEAD_LETTERING_CASES) - ported - not_ported) == []
    assert sorted(ported & not_ported) == []
    assert sorted(not_ported - set(DEAD_LETTERING_CASES)) == []
    named = {f"test_{case}" for case in DEAD_LETTERING_CASES}
    assert sorted(tests - named) == ["test_every_case_is_ported_or_listed"]
    for key in EMULATOR_GAPS:
        if not key.startswith("test_dead_lettering.py::"):
            continue
        name, _, fragment = key.split("::", 1)[1].partition("[")
        assert name in tests, f"EMULATOR_GAPS names no test of this module: {key}"
        ids = emulator_ids(globals()[name])
        assert any(fragment.removesuffix("]") in i for i in ids), f"matches no test id: {key}"


def emulator_ids(test: object) -> list[str]:
    """The ids of a test's emulator parametrizations: backend, then queue kind."""
    kinds = [
        param.id
        for mark in getattr(test, "pytestmark", [])
        if mark.name == "parametrize"
        for param in mark.args[1]
    ]
    return [f"emulator-{version}-{kind}" for version in ("3.10", "4.0") for kind in kinds]
