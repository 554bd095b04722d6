"""Pure. What each RabbitMQ release rr supports does where releases differ: one frozen row per
release, the one place a server's version becomes behaviour.

The emulator (``emulator/``), ``server.py``, the pure core (``doctor/``, ``topology/``,
``dlq/``), ``testing.py`` and the contract suite's expectations (``tests/contract/
versions.py``) read a field of :func:`release_of`'s row; no other module compares a version
with a number (``tests/unit/test_releases.py`` scans the source). docs/reference/testing.md's table
of the releases ("What differs between releases") is generated from :data:`RELEASES`
(``scripts/release_table.py``; ``tests/docs/test_release_table.py`` checks it).

The rows are written as one table by field (:data:`RELEASES`: each field's value in each row,
oldest first, as docs/reference/testing.md shows them). Adding a release is a new value at the end
of each field (the row before it copied, each field that differs changed) plus its measurements:
its server in the contract suite, and its line in ``tests/contract/versions.py``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

QuorumPriorities = Literal["none", "two", "strict"]
DeprecatedFeaturesTable = Literal["none", "names", "states"]


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True, slots=True)
class ServerRelease:
    """How one RabbitMQ release line behaves where the lines differ. Each field says what it
    decides (its metadata's ``doc``, the first column of docs/reference/testing.md's table)."""

    line: tuple[int, int]
    """``(4, 3)``: this row holds from this release line up to the next row's."""
    measured_on: str | None
    """The release the row was measured on (``"4.3.6"``: the contract suite's server of the
    line); None for a row taken from the release notes, not run."""

    # -- dead-lettering ------------------------------------------------------------------------
    writes_last_death_headers: bool = field(
        metadata=_doc("Dead letters carry `x-last-death-reason`, `-queue`, `-exchange`")
    )
    broker_keeps_deaths: bool = field(
        metadata=_doc(
            "The broker keeps a message's deaths itself: `x-death` most recent first, a "
            "client's `x-death` ignored"
        )
    )
    """RabbitMQ 4.0 (measured on 4.0.5; 4.0.1 release notes, "AMQP 0.9.1 x-death header"): the
    broker keeps a message's deaths itself and ignores an x-death a client published; x-death
    is most recent first, without 3.10's regrouping (emulator/deadletter.py)."""
    dead_letter_key_drops_cc: bool = field(
        metadata=_doc("A dead letter routed by `x-dead-letter-routing-key` loses its `CC`")
    )
    """A dead letter routed by x-dead-letter-routing-key goes to that key only; RabbitMQ 3.10
    also removes its CC header (rabbit_dead_letter), 4.0 keeps it (measured on 4.0.5)."""
    # -- counting ------------------------------------------------------------------------------
    nack_requeue_counts_delivery: bool = field(
        metadata=_doc(
            "A quorum queue counts a `basic.nack(requeue=true)` in `x-delivery-count` and "
            "the delivery limit"
        )
    )
    """RabbitMQ 4.3 (measured on 4.3.6): a basic.nack no longer counts as a delivery (only
    basic.reject and a closing channel do); 4.0.5 counts it, 3.10.8 counts it and puts it at
    the back. rr hands back what it read with a nack where it is not counted
    (``dlq/read_cost.py``)."""
    counts_travel_from_any_queue: bool = field(
        metadata=_doc(
            "Every `basic.reject` and closing-channel return counts, in queues of either "
            "type, and the dead letter carries the count (`x-acquired-count` shown)"
        )
    )
    """RabbitMQ 4.3 (measured on 4.3.6): every message carries its delivery count in queues of
    either type, a basic.reject without requeue adds one, and the dead letter takes it along:
    a queue it reaches marks it redelivered, a quorum queue counts on from it (its delivery
    limit too) and shows it as x-delivery-count and as the start of x-acquired-count (every
    return raises that one)."""
    quorum_rejections_travel: bool = field(
        metadata=_doc(
            "A quorum queue's rejections and closing-channel returns travel with its dead letters"
        )
    )
    """RabbitMQ 4.0 (measured on 4.0.5, message containers): a quorum queue's rejection without
    requeue, and its return of a closing channel's delivery, add one to the message's
    delivery count, which travels with the dead letter: a quorum queue it reaches shows it as
    x-delivery-count (Entry.failed_deliveries); a requeue does not."""
    quorum_get_shows_zero_count: bool = field(
        metadata=_doc("A first `basic.get` from a quorum queue shows `x-delivery-count = 0`")
    )
    # -- delivery limits -----------------------------------------------------------------------
    default_quorum_delivery_limit: int | None = field(
        metadata=_doc("The delivery limit of a quorum queue declared without one")
    )
    takes_unlimited_delivery_limit: bool = field(
        metadata=_doc(
            "A negative `x-delivery-limit` (argument or policy) means no limit (else: "
            "dead-lettered at the first return)"
        )
    )
    delivery_limit_integers_only: bool = field(
        metadata=_doc(
            "An `x-delivery-limit` that is not an integer is ignored (else: compared as it is)"
        )
    )
    limit_drop_leaks_credit: bool = field(
        metadata=_doc(
            "A return the delivery limit drops gives its consumer one more message of credit"
        )
    )
    """RabbitMQ 3.10 (measured on 3.10.8): a return the delivery limit dead-letters gives the
    consumer one more message of credit, for good (emulator/settle.py); 4.0.5 does not."""
    # -- length limits -------------------------------------------------------------------------
    quorum_bytes_count_properties: bool = field(
        metadata=_doc(
            "A quorum queue's `x-max-length-bytes` counts a message's basic properties as its "
            "publisher encoded them, beside the body (else: the body only)"
        )
    )
    """RabbitMQ 4.3 (measured on 4.3.6, ``scripts/measure_quorum_bytes.py``; issue #49): a
    quorum queue counts toward ``x-max-length-bytes`` the body plus the message's property
    bytes as they came in its content header (rabbit_fifo adds mc:size's metadata size: 2
    flag bytes and each property present), whatever happened to it since (dead-lettered,
    given back: deaths and counts are annotations, not counted); 3.10.8 and 4.0.5 count the
    body, and a classic queue counts the body on every line (:meth:`quorum_message_bytes`,
    emulator/message_size.py)."""
    # -- returns and order ---------------------------------------------------------------------
    quorum_requeue_to_front: bool = field(
        metadata=_doc(
            "A quorum queue serves a message rejected or nacked with requeue before the others"
        )
    )
    """RabbitMQ 4.0 (measured on 4.0.5): a quorum queue serves every message returned to it
    (basic.reject / basic.nack with requeue, or a closing channel) before all the others, in
    the order they came back; 3.10 appended a rejected or nacked one at the back."""
    quorum_returns_in_map_order: bool = field(
        metadata=_doc(
            "A quorum queue with a delivery limit takes back more than 32 messages of one "
            "settle in Erlang map order"
        )
    )
    """RabbitMQ 3.10 (measured on 3.10.8): a quorum queue with a delivery limit takes back a
    consumer's messages of one basic.reject / nack with requeue in the order of an Erlang map
    of their message ids (emulator/settle.py, emulator/settle.py, _commands); 4.0 in delivery
    order."""
    closing_channel_returns_gets_first: bool = field(
        metadata=_doc("A closing channel gives back what `basic.get` took before its consumers'")
    )
    """A closing channel gives back what basic.get took before what consumers took on 3.10,
    after it on 4.0 (emulator/settle.py, emulator/settle.py, _return_order)."""
    quorum_evictions_newest_first: bool = field(
        metadata=_doc("A quorum queue's `drop-head` dead-letters several at once newest first")
    )
    """A quorum queue's drop-head evictions of one command are dead-lettered newest first before
    4.3 (measured on 3.10.8 and 4.0.5), oldest first on 4.3.6 (emulator/queues.py, trim)."""
    quorum_expires_at_each_head: bool = field(
        metadata=_doc(
            "A quorum queue expires at the head of what was given back and of each priority "
            "(else: only what it would serve next)"
        )
    )
    """RabbitMQ 4.3 (measured on 4.3.6, seeds 118 and 174): a quorum queue expires messages at
    the head of those given back and at the head of the others (of each priority) alike; 3.10
    and 4.0 only what they would serve next (emulator/queues.py, expire_head)."""
    reused_consumer_tag_crashes: bool = field(
        metadata=_doc(
            "A quorum consumer re-created with the tag of a cancelled one still holding "
            "deliveries crashes its channel (rabbitmq-server #5927)"
        )
    )
    """RabbitMQ 3.10.8 predates the fix of rabbitmq-server #5927
    (emulator's Consumer.crashes_its_channel)."""
    # -- single active consumer ----------------------------------------------------------------
    quorum_single_active_priorities: bool = field(
        metadata=_doc(
            "A quorum queue's single active consumer goes by `x-priority`: a higher one "
            "takes over once the active one holds nothing (else: first come)"
        )
    )
    """RabbitMQ 4.0 (measured on 4.0.5 and 4.3.6): a quorum queue with
    ``x-single-active-consumer`` hands over to a consumer of higher ``x-priority`` arriving
    later, at once when the active one holds nothing, else once it holds nothing (it gets no
    more meanwhile), and picks the waiting consumer of highest priority when the active one
    goes; 3.10.8 ignores priorities there: first come (emulator/single_active.py)."""
    single_active_return_hands_over: bool = field(
        metadata=_doc(
            "A quorum queue hands over to a higher-priority single active consumer when the "
            "active one gives its last delivery back with requeue"
        )
    )
    """RabbitMQ 4.3 (measured on 4.3.6): any settle that leaves the active consumer holding
    nothing hands over; on 4.0.5 a basic.reject / nack with requeue does not, and the queue
    delivers to nobody until the old consumer goes."""
    classic_single_active_cancel_stalls: bool = field(
        metadata=_doc(
            "A classic queue whose single active consumer is cancelled while holding "
            "deliveries delivers to no consumer (the server's queue crashes at the next publish)"
        )
    )
    """RabbitMQ 3.10 (measured on 3.10.8): the next consumer is marked active but gets
    nothing, and the next publish crashes the queue process (``badmatch`` in
    ``rabbit_amqqueue_process:attempt_delivery``); 4.0.5 hands over at once."""
    single_active_get_type_as_binary: bool = field(
        metadata=_doc(
            "The refusal of a `basic.get` from a quorum queue with a single active consumer "
            'names the type as an Erlang binary (`<<"quorum">> queues`)'
        )
    )
    """``RESOURCE_LOCKED - ... basic.get operations are not supported by quorum queues with
    single active consumer`` (3.10.8, 4.0.5); 4.3.6 writes ``<<"quorum">> queues``."""
    # -- priorities ----------------------------------------------------------------------------
    quorum_priorities: QuorumPriorities = field(
        metadata=_doc("Quorum queue priorities: none, two (2:1), or 32 strict")
    )
    classic_max_priority_0_as_1: bool = field(
        metadata=_doc("A classic queue with `x-max-priority = 0` serves it as 1")
    )
    # -- headers -------------------------------------------------------------------------------
    sorts_headers_on_arrival: bool = field(
        metadata=_doc("Every header table is written again, its names sorted, `L` as `l`")
    )
    """How the server keeps a message's headers (measured on 3.10.8, 4.0.5 and 4.3.6;
    docs/reference/testing.md, "Headers"): 4.0 and 4.3 write every table they take again, names
    sorted and an unsigned 64-bit L as a signed l; 3.10 keeps the bytes it got in a classic queue,
    and writes them again (L as l, names in their order) in a quorum queue
    (:attr:`quorum_writes_headers_again`); every server sorts the names when it adds a header
    (dead-lettering, a quorum queue's counts)."""
    quorum_writes_headers_again: bool = field(
        metadata=_doc("A quorum queue writes a table again (`L` as `l`), names in their order")
    )
    headers_exchange_strict_numbers: bool = field(
        metadata=_doc(
            "The headers exchange matches an integer only with an integer, a timestamp in ms"
        )
    )
    """RabbitMQ 4.0 (measured on 4.0.5; message containers): the headers exchange compares a
    header with =:= on its converted value: an integer no longer matches a float (3.10: 1
    matches 1.0), and a message's timestamp counts in milliseconds (emulator/routing.py)."""
    # -- declarations and refused arguments ------------------------------------------------------
    queue_type_always_set: bool = field(
        metadata=_doc("A queue declared without `x-queue-type` gets `classic` written")
    )
    """RabbitMQ 4.0 (measured on 4.0.5; rabbitmq-server #11541 and #12109, also backported to
    late 3.13.x): a queue declared without x-queue-type has the default type written into its
    arguments, and a redeclaration without one means that default; so redeclaring a classic
    queue as quorum says "received 'quorum' but current is 'classic'", not 3.10's "received
    the value 'quorum' of type 'longstr' but current is none"."""
    quorum_takes_consumer_timeout: bool = field(
        metadata=_doc(
            "`x-consumer-timeout` is a quorum queue's checked argument (a classic queue refuses it)"
        )
    )
    # -- consumer timeouts ---------------------------------------------------------------------
    default_consumer_timeout_ms: int = field(
        metadata=_doc("The node's `consumer_timeout` (ms) where the queue sets none")
    )
    """The server-wide consumer timeout every release ships (``consumer_timeout`` of the
    ``rabbit`` application, 30 minutes; read on 3.10.8, 4.0.5 and 4.3.6): it applies where a
    queue sets none (emulator/consumer_timeout.py)."""
    queue_consumer_timeout: bool = field(
        metadata=_doc(
            "A queue's `x-consumer-timeout` sets its consumer timeout (else: the node's only)"
        )
    )
    """RabbitMQ 3.12 (its release notes; measured on 4.0.5 and 4.3.6): the queue argument
    ``x-consumer-timeout`` (and a ``consumer-timeout`` policy) sets the timeout of the
    queue's deliveries; 3.10.8 takes the argument and ignores it (a delivery of a queue
    with 2000 ms held 75 s, past the channel's minute tick: nothing)."""
    quorum_times_out_deliveries: bool = field(
        metadata=_doc(
            "A quorum queue times out a held delivery itself (back uncounted, its consumer "
            "cancelled), a classic queue none (else: the channel closes, 406)"
        )
    )
    """RabbitMQ 4.3 (measured on 4.3.6, ``scripts/measure_consumer_timeout.py``): a quorum
    queue gives a delivery held past its timeout back uncounted (redelivered, only
    ``x-acquired-count`` grows) and sends its consumer ``basic.cancel`` (the channel stays
    open; the queue keeps the consumer, serving it nothing); a ``basic.get``'s goes back
    the same way and the channel closes (406, ``Timeout value used: -1 ms``). A classic
    queue times out no delivery at all. Before 4.3 the channel closes (406 ``delivery
    acknowledgement on channel N timed out``), giving back all it held as a closing channel
    does (counted on a quorum queue): emulator/consumer_timeout.py."""
    delayed_retries: bool = field(
        metadata=_doc(
            "Quorum queues hold returns back by `x-delayed-retry-*` (a classic queue refuses them)"
        )
    )
    """RabbitMQ 4.3: delayed retries of quorum queues (emulator/delayed_retry.py; rr's
    ``delay = "server"``); older servers accept the ``x-delayed-retry-*`` arguments on any
    queue and ignore them."""
    # -- policies ------------------------------------------------------------------------------
    policy_apply_to_queue_types: bool = field(
        metadata=_doc("A policy's `apply-to` takes `classic_queues`, `quorum_queues`, `streams`")
    )
    quorum_expires_from_policy: bool = field(
        metadata=_doc(
            "A quorum queue takes its policies' `expires` over its argument (else: the smallest)"
        )
    )
    policy_keys: frozenset[str] = field(metadata=_doc("The keys a policy takes"))
    operator_policy_keys: frozenset[str] = field(metadata=_doc("The keys an operator policy takes"))
    # -- what rr doctor and rr declare say -------------------------------------------------------
    transient_queues_deprecated: bool = field(
        metadata=_doc(
            "Transient non-exclusive queues are a deprecated feature (`transient_nonexcl_queues`)"
        )
    )
    mirrors_classic_queues: bool = field(metadata=_doc("`ha-mode` policies mirror classic queues"))
    # -- the management API --------------------------------------------------------------------
    deprecated_features_table: DeprecatedFeaturesTable = field(
        metadata=_doc(
            "`/api/deprecated-features`: none, the names, or the names with their state "
            "(the emulator's twin)"
        )
    )
    vhost_default_queue_type: str | None = field(
        metadata=_doc("The default queue type the API states of a vhost made without one")
    )

    @property
    def name(self) -> str:
        """``"4.3"``."""
        return f"{self.line[0]}.{self.line[1]}"

    def quorum_message_bytes(self, body_bytes: int, property_bytes: int) -> int:
        """What a quorum queue counts toward ``x-max-length-bytes`` for a message of
        ``body_bytes`` whose publisher encoded its basic properties in ``property_bytes``
        (flags included; emulator/message_size.py): the body, plus those on 4.3
        (:attr:`quorum_bytes_count_properties`). A 2-byte body with ``message_id = "m1"``:
        2 before 4.3, 7 on 4.3."""
        return body_bytes + (property_bytes if self.quorum_bytes_count_properties else 0)


DEFAULT_CONSUMER_TIMEOUT_MS = 1_800_000
"""RabbitMQ's ``consumer_timeout`` default, 30 minutes (read on 3.10.8, 4.0.5 and 4.3.6)."""

QUORUM_DEFAULT_DELIVERY_LIMIT = 20
"""RabbitMQ 4.0 and later give a quorum queue declared without ``x-delivery-limit`` this limit
(4.0.0 release notes; measured on 4.0.5 and 4.3.6); ``server.py`` names it too."""


# --- the keys each line's policies take -----------------------------------------------------

_NUMERIC = ("message-ttl", "max-length", "max-length-bytes", "expires", "delivery-limit")
_DELAYED = ("delayed-retry-type", "delayed-retry-min", "delayed-retry-max")

_POLICY_KEYS_3 = frozenset(
    {
        *_NUMERIC,
        "overflow",
        "dead-letter-exchange",
        "dead-letter-routing-key",
        "dead-letter-strategy",
        "alternate-exchange",
        "max-in-memory-length",
        "max-in-memory-bytes",
        "queue-mode",
        "queue-version",
        "queue-master-locator",
        "queue-leader-locator",
        "initial-cluster-size",
        "max-age",
        "stream-max-segment-size-bytes",
        "ha-mode",
        "ha-params",
        "ha-sync-mode",
        "ha-sync-batch-size",
        "ha-promote-on-shutdown",
        "ha-promote-on-failure",
    }
)
"""The keys RabbitMQ 3.10.8's policies take (measured: its registry of policy validators)."""
_POLICY_KEYS_4_0 = (_POLICY_KEYS_3 - {key for key in _POLICY_KEYS_3 if key.startswith("ha-")}) | {
    "consumer-timeout",
    "stream-filter-size-bytes",
    "target-group-size",
}
_POLICY_KEYS_4_3 = _POLICY_KEYS_4_0 | {"consumer-disconnected-timeout", *_DELAYED}

_OPERATOR_KEYS_3 = frozenset({*_NUMERIC, "max-in-memory-length", "max-in-memory-bytes"})
"""The keys RabbitMQ 3.10.8's operator policies take: the numeric limits only."""
_OPERATOR_KEYS_4_0 = _OPERATOR_KEYS_3 | {
    "overflow",
    "queue-master-locator",
    "queue-version",
    "target-group-size",
}
_OPERATOR_KEYS_4_3 = _OPERATOR_KEYS_4_0 | set(_DELAYED)


def _rows(**columns: tuple[Any, ...]) -> tuple[ServerRelease, ...]:
    """The rows of a table given by field: each field's value in each row, oldest first (a
    field missing or unknown fails here, at import)."""
    count = len(columns["line"])
    if any(len(values) != count for values in columns.values()):
        raise ValueError("every field of the release table takes one value a row")
    return tuple(
        ServerRelease(**{name: values[index] for name, values in columns.items()})
        for index in range(count)
    )


# --- the rows ---------------------------------------------------------------------------------

RELEASES: tuple[ServerRelease, ...] = _rows(
    # 3.10: measured on 3.10.8 (and what rr assumes of an older server). 3.13: from its
    # release notes, not run (3.10's row with the ``x-last-death-*`` headers). 4.0: measured
    # on 4.0.5. 4.3: measured on 4.3.6.
    line=((3, 10), (3, 13), (4, 0), (4, 3)),
    measured_on=("3.10.8", None, "4.0.5", "4.3.6"),
    writes_last_death_headers=(False, True, True, True),
    broker_keeps_deaths=(False, False, True, True),
    dead_letter_key_drops_cc=(True, True, False, False),
    nack_requeue_counts_delivery=(True, True, True, False),
    counts_travel_from_any_queue=(False, False, False, True),
    quorum_rejections_travel=(False, False, True, True),
    quorum_get_shows_zero_count=(True, True, False, False),
    default_quorum_delivery_limit=(
        None,
        None,
        QUORUM_DEFAULT_DELIVERY_LIMIT,
        QUORUM_DEFAULT_DELIVERY_LIMIT,
    ),
    takes_unlimited_delivery_limit=(False, False, True, True),
    delivery_limit_integers_only=(False, False, False, True),
    limit_drop_leaks_credit=(True, True, False, False),
    quorum_bytes_count_properties=(False, False, False, True),
    quorum_requeue_to_front=(False, False, True, True),
    quorum_returns_in_map_order=(True, True, False, False),
    closing_channel_returns_gets_first=(True, True, False, False),
    quorum_evictions_newest_first=(True, True, True, False),
    quorum_expires_at_each_head=(False, False, False, True),
    reused_consumer_tag_crashes=(True, True, False, False),
    quorum_single_active_priorities=(False, False, True, True),
    single_active_return_hands_over=(False, False, False, True),
    classic_single_active_cancel_stalls=(True, True, False, False),
    single_active_get_type_as_binary=(False, False, False, True),
    quorum_priorities=("none", "none", "two", "strict"),
    classic_max_priority_0_as_1=(False, False, True, True),
    sorts_headers_on_arrival=(False, False, True, True),
    quorum_writes_headers_again=(True, True, False, False),
    headers_exchange_strict_numbers=(False, False, True, True),
    queue_type_always_set=(False, False, True, True),
    quorum_takes_consumer_timeout=(False, False, False, True),
    default_consumer_timeout_ms=(DEFAULT_CONSUMER_TIMEOUT_MS,) * 4,
    queue_consumer_timeout=(False, True, True, True),
    quorum_times_out_deliveries=(False, False, False, True),
    delayed_retries=(False, False, False, True),
    policy_apply_to_queue_types=(False, False, True, True),
    quorum_expires_from_policy=(True, True, False, False),
    policy_keys=(_POLICY_KEYS_3, _POLICY_KEYS_3, _POLICY_KEYS_4_0, _POLICY_KEYS_4_3),
    operator_policy_keys=(
        _OPERATOR_KEYS_3,
        _OPERATOR_KEYS_3,
        _OPERATOR_KEYS_4_0,
        _OPERATOR_KEYS_4_3,
    ),
    transient_queues_deprecated=(False, False, True, True),
    mirrors_classic_queues=(True, True, False, False),
    deprecated_features_table=("none", "none", "names", "states"),
    vhost_default_queue_type=(None, None, "classic", "classic"),
)
"""Every row, oldest first."""

RABBITMQ_3_10, RABBITMQ_3_13, RABBITMQ_4_0, RABBITMQ_4_3 = RELEASES
"""The rows by release line."""

MEASURED_RELEASES: tuple[str, ...] = tuple(
    row.measured_on for row in RELEASES if row.measured_on is not None
)
"""The releases the emulator is proven against, one per measured line (docs/reference/testing.md):
``("3.10.8", "4.0.5", "4.3.6")``."""

DEFAULT_SERVER_VERSION = "4.0.5"
"""The one release the emulator (``Emulator``), ``TestBroker`` and the pytest fixture play
unless told otherwise: the line most users run today (docs/reference/testing.md)."""


def release_of(version: Sequence[int]) -> ServerRelease:
    """The row of the server of ``version`` (``(4, 3, 6)``, or ``(major, minor)``): the row
    of the newest release line not newer than it. A server older than the oldest row gets
    the oldest row (3.10's: rr assumes it behaves as 3.10), a newer one the newest row (4.3's
    for 4.4 or 5.0, until measured); a release between two rows (4.1, 4.2) the older one's."""
    major, minor = version[0], (version[1] if len(version) > 1 else 0)
    found = RELEASES[0]
    for row in RELEASES:
        if (major, minor) >= row.line:  # the one comparison of a version with a release
            found = row
    return found


def first_release(behaviour: str) -> ServerRelease:
    """The oldest row whose field ``behaviour`` is true (``"delayed_retries"``: 4.3's)."""
    return next(row for row in RELEASES if getattr(row, behaviour))


# --- the table of docs/reference/testing.md
# -------------------------------------------------------------


def _cell(value: object, before: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "—"
    if isinstance(value, frozenset):
        assert isinstance(before, frozenset | type(None))
        if before is None:
            return f"{len(value)} keys"
        added = sorted(value - before)
        removed = sorted(before - value)
        parts = [f"+ `{key}`" for key in added] + [f"- `{key}`" for key in removed]
        return ", ".join(parts) if parts else "the same"
    return str(value)


def markdown_table() -> str:
    """docs/reference/testing.md's table of the releases: one line per field, one column per row."""
    header = "| Behaviour | " + " | ".join(
        row.name + ("" if row.measured_on else " (release notes)") for row in RELEASES
    )
    lines = [
        header + " |",
        "|---|" + "---|" * len(RELEASES),
        "| Measured on | " + " | ".join(row.measured_on or "not run" for row in RELEASES) + " |",
    ]
    for item in dataclasses.fields(ServerRelease):
        if "doc" not in item.metadata:
            continue
        cells = []
        for index, row in enumerate(RELEASES):
            before = getattr(RELEASES[index - 1], item.name) if index else None
            cells.append(_cell(getattr(row, item.name), before))
        lines.append(f"| {item.metadata['doc']} (`{item.name}`) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_VERSION_TEXT = re.compile(r"(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?")


def emulated_release(text: str) -> tuple[int, int, int]:
    """The release ``text`` names (``"4.0.5"``, ``"3.10"``) as ``(major, minor, patch)``, for
    the emulator to play; a :class:`ValueError` naming :data:`MEASURED_RELEASES` for anything
    else (``"banana"``, ``"4"``) or a line before the first of them (docs/reference/testing.md)."""
    found = _VERSION_TEXT.fullmatch(text.strip())
    known = ", ".join(MEASURED_RELEASES)
    if found is None:
        raise ValueError(f"server_version {text!r} is not a RabbitMQ version: give one of {known}")
    major, minor, patch = (int(part) if part else 0 for part in found.groups())
    first = _VERSION_TEXT.fullmatch(MEASURED_RELEASES[0])
    assert first is not None
    first_line = (int(first.group(1)), int(first.group(2)))
    if (major, minor) < first_line:
        raise ValueError(
            f"server_version {text!r}: the emulator models RabbitMQ from "
            f"{first_line[0]}.{first_line[1]} on; give one of {known}"
        )
    return major, minor, patch
