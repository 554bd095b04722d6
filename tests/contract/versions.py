"""Where RabbitMQ 3.10, 4.0 and 4.3 differ: what the contract scenarios expect, in one table.

Each entry names a behaviour, gives its value per release line (``backend.version``: "3.10", "4.0"
or "4.3"), and cites the release and the change. A scenario reads it with
``expected(backend.version, NAME)``; the emulator models the same differences, each a field of
``rabbitctl_retry/releases.py``'s rows (docs/reference/testing.md, "What differs between releases").
An entry that restates a field reads it (:func:`by_line`): run on the real servers, the
scenarios that read it are what proves the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.releases import RELEASES, ServerRelease, release_of
from rabbitctl_retry.server import ServerVersion


@dataclass(frozen=True)
class Difference:
    values: dict[str, Any]
    """The expected value per release line."""
    why: str
    """The release and the change, as measured or documented."""


TABLE: dict[str, Difference] = {}

LINES = tuple(row.name for row in RELEASES if row.measured_on is not None)
"""The release lines the suite measures (``("3.10", "4.0", "4.3")``): the measured rows of
``rabbitctl_retry/releases.py``."""


def by_line(read: Callable[[ServerRelease], Any]) -> dict[str, Any]:
    """The expected value per release line, read from the line's row of
    ``rabbitctl_retry/releases.py``: where an entry restates a field of the table, it reads
    it, and the scenarios on the real servers prove the table."""
    return {line: read(release_of(ServerVersion.parse(line).release)) for line in LINES}


def expected(version: str, name: str) -> Any:
    """What a scenario expects of ``name`` on the release line ``version``."""
    return TABLE[name].values[version]


# -- dead-lettering ---------------------------------------------------------------------------

TABLE["last-death-headers"] = Difference(
    by_line(lambda row: row.writes_last_death_headers),
    "RabbitMQ 3.13+: every dead letter also carries x-last-death-reason/-queue/-exchange: this "
    "death's reason and queue, and the exchange the message died from (not the exchange of a "
    "merged x-death entry). Measured on 4.0.5.",
)
TABLE["x-death-order-three-queues"] = Difference(
    # (queue, count) of x-death as the message arrives in qb, then in qc again, after
    # rejections in qa -> qb -> qc -> qb
    {
        "3.10": ([("qc", 1), ("qa", 1), ("qb", 1)], [("qb", 2), ("qa", 1), ("qc", 1)]),
        "4.0": ([("qc", 1), ("qb", 1), ("qa", 1)], [("qb", 2), ("qc", 1), ("qa", 1)]),
        "4.3": ([("qc", 1), ("qb", 1), ("qa", 1)], [("qb", 2), ("qc", 1), ("qa", 1)]),
    },
    "RabbitMQ 4.0 (message containers, deaths v2): x-death is strictly most recent first, a "
    "repeated (queue, reason) moves to the front; 3.10 regroups the list before each death, "
    "which reverses the older entries. Measured on 3.10.8 and 4.0.5.",
)
TABLE["x-death-entry-keys"] = Difference(
    # key order of the three entries above, on the last arrival: (qb, qa or qc, qa or qc);
    # qa's death carried original-expiration
    {
        "3.10": [
            ["count", "exchange", "queue", "reason", "routing-keys", "time"],
            ["count", "reason", "queue", "time", "exchange", "routing-keys", "original-expiration"],
            ["count", "exchange", "queue", "reason", "routing-keys", "time"],
        ],
        "4.0": [
            ["count", "reason", "queue", "time", "exchange", "routing-keys"],
            ["count", "reason", "queue", "time", "exchange", "routing-keys"],
            ["original-expiration", "count", "reason", "queue", "time", "exchange", "routing-keys"],
        ],
        "4.3": [
            ["count", "reason", "queue", "time", "exchange", "routing-keys"],
            ["count", "reason", "queue", "time", "exchange", "routing-keys"],
            ["original-expiration", "count", "reason", "queue", "time", "exchange", "routing-keys"],
        ],
    },
    "RabbitMQ 4.0 renders every x-death entry in one key order (mc_amqpl death_table, "
    "original-expiration first); 3.10 keeps the very first entry as written and sorts the keys "
    "of every entry it rebuilt. Measured on 3.10.8 and 4.0.5.",
)
TABLE["client-x-death"] = Difference(
    by_line(lambda row: "ignored" if row.broker_keeps_deaths else "continued"),
    "RabbitMQ 4.0: an x-death header a client (re)publishes is no longer interpreted (4.0.1 "
    "release notes, 'AMQP 0.9.1 x-death header'): the first death the broker records replaces "
    "it with a fresh one-entry list and writes x-first-death-*, and it takes no part in cycle "
    "detection. 3.10 continues it (counts go on, x-first-death-* kept). Measured on both.",
)


def last_death(version: str, reason: str, queue: str, exchange: str) -> dict[str, FieldValue]:
    """The ``x-last-death-*`` headers a dead letter carries on ``version`` (none on 3.10)."""
    if not expected(version, "last-death-headers"):
        return {}
    return {
        "x-last-death-exchange": exchange,
        "x-last-death-queue": queue,
        "x-last-death-reason": reason,
    }


TABLE["dead-letter-carried-count"] = Difference(
    by_line(
        lambda row: (
            "basic.reject in any queue"
            if row.counts_travel_from_any_queue
            else "quorum rejections"
            if row.quorum_rejections_travel
            else "none"
        )
    ),
    "What a dead letter's delivery count carries. RabbitMQ 4.0 (message containers): one per "
    "rejection without requeue (basic.reject or basic.nack) and per return of a closing "
    "channel in a quorum queue; returns by basic.reject / nack with requeue, a classic "
    "queue's rejection, expiry and delivery_limit deaths add nothing. RabbitMQ 4.3: one per "
    "basic.reject (with or without requeue) and per return of a closing channel, in queues "
    "of either type; basic.nack never counts. A queue the dead letter reaches marks it "
    "redelivered on 4.3 (4.0: a quorum queue only). Measured on 3.10.8, 4.0.5 and 4.3.6.",
)


def carried_count(version: str, *, nacks: int = 0, rejects: int = 0, quorum: bool) -> int:
    """The delivery count a dead letter carries after ``nacks`` basic.nack and ``rejects``
    basic.reject without requeue of it in one queue (a ``quorum`` one or not):
    "dead-letter-carried-count"."""
    rule = expected(version, "dead-letter-carried-count")
    if rule == "none":
        return 0
    if rule == "quorum rejections":
        return nacks + rejects if quorum else 0
    assert rule == "basic.reject in any queue"
    return rejects


def dead_letter_redelivered(version: str, carried: int, *, quorum: bool) -> bool:
    """The redelivered flag of a dead letter's first delivery from the queue it reached,
    given the count it carries ("dead-letter-carried-count")."""
    if expected(version, "dead-letter-carried-count") == "basic.reject in any queue":
        return carried > 0
    return quorum and carried > 0


# -- quorum queues: requeues, delivery counts, delivery limits --------------------------------
# (body, redelivered, x-delivery-count or "absent") of each delivery, as test_requeue.py sees it

TABLE["quorum-after-consumer-close"] = Difference(
    # m1..m4; a consumer with prefetch 2 holds m1, m2; its channel closes; basic.get them all
    {
        "3.10": [("m1", True, 1), ("m2", True, 1), ("m3", False, 0), ("m4", False, 0)],
        "4.0": [("m1", True, 1), ("m2", True, 1), ("m3", False, "absent"), ("m4", False, "absent")],
        "4.3": [("m1", True, 1), ("m2", True, 1), ("m3", False, "absent"), ("m4", False, "absent")],
    },
    "RabbitMQ 4.0: basic.get no longer shows x-delivery-count = 0 on a message never returned "
    "(3.x adds it to every basic.get of a quorum queue). Measured on 3.10.8 and 4.0.5.",
)
TABLE["quorum-got-by-basic-get"] = Difference(
    # m1..m4; basic.get takes m1, m2, m3
    {
        "3.10": [("m1", False, 0), ("m2", False, 0), ("m3", False, 0)],
        "4.0": [("m1", False, "absent"), ("m2", False, "absent"), ("m3", False, "absent")],
        "4.3": [("m1", False, "absent"), ("m2", False, "absent"), ("m3", False, "absent")],
    },
    "RabbitMQ 4.0: no x-delivery-count on a first basic.get (3.x: 0). Measured on both.",
)
TABLE["quorum-after-get-and-close"] = Difference(
    # ... then acks m2 and closes the channel; basic.get them all
    {
        "3.10": [("m1", True, 1), ("m3", True, 1), ("m4", False, 0)],
        "4.0": [("m1", True, 1), ("m3", True, 1), ("m4", False, "absent")],
        "4.3": [("m1", True, 1), ("m3", True, 1), ("m4", False, "absent")],
    },
    "RabbitMQ 4.0: no x-delivery-count on a first basic.get (3.x: 0). Measured on both.",
)
TABLE["quorum-after-rejects"] = Difference(
    # m1..m4; a consumer with prefetch 1 rejects m1 with requeue twice, acks everything else
    {
        "3.10": [
            ("m1", False, "absent"),
            ("m2", False, "absent"),
            ("m3", False, "absent"),
            ("m4", False, "absent"),
            ("m1", True, 1),
            ("m1", True, 2),
        ],
        "4.0": [
            ("m1", False, "absent"),
            ("m1", True, 1),
            ("m1", True, 2),
            ("m2", False, "absent"),
            ("m3", False, "absent"),
            ("m4", False, "absent"),
        ],
        "4.3": [
            ("m1", False, "absent"),
            ("m1", True, 1),
            ("m1", True, 2),
            ("m2", False, "absent"),
            ("m3", False, "absent"),
            ("m4", False, "absent"),
        ],
    },
    "RabbitMQ 4.0: a quorum queue puts a message rejected or nacked with requeue at the front "
    "(served before every message never delivered, as one a closing channel returns); 3.10 "
    "appends it at the back. Measured on 3.10.8 and 4.0.5.",
)
TABLE["quorum-got-after-reject"] = Difference(
    # m1..m5; basic.get takes m1, m2, m3; m2 is rejected with requeue; one more basic.get
    {"3.10": [("m4", False, 0)], "4.0": [("m2", True, 1)], "4.3": [("m2", True, 1)]},
    "RabbitMQ 4.0: a rejected message goes back to the front of a quorum queue (3.10: the "
    "back); no x-delivery-count on a first basic.get (3.10: 0). Measured on both.",
)
TABLE["quorum-after-reject-and-close"] = Difference(
    # ... then the channel closes (holding m1, m3, m2 in delivery order); basic.get them all
    {
        "3.10": [
            ("m1", True, 1),
            ("m3", True, 1),
            ("m4", True, 1),
            ("m5", False, 0),
            ("m2", True, 1),
        ],
        "4.0": [
            ("m1", True, 1),
            ("m3", True, 1),
            ("m2", True, 2),
            ("m4", False, "absent"),
            ("m5", False, "absent"),
        ],
        "4.3": [
            ("m1", True, 1),
            ("m3", True, 1),
            ("m2", True, 2),
            ("m4", False, "absent"),
            ("m5", False, "absent"),
        ],
    },
    "RabbitMQ 4.0: every returned message is served first, in the order it came back; 3.10 "
    "does so only for those a closing channel returns and appends a rejected one. Measured "
    "on 3.10.8 and 4.0.5.",
)
TABLE["quorum-after-nack-multiple"] = Difference(
    # m1..m5; basic.get takes m1, m2, m3; basic.nack(multiple, requeue) of all three
    {
        "3.10": [
            ("m4", False, 0),
            ("m5", False, 0),
            ("m1", True, 1),
            ("m2", True, 1),
            ("m3", True, 1),
        ],
        "4.0": [
            ("m1", True, 1),
            ("m2", True, 1),
            ("m3", True, 1),
            ("m4", False, "absent"),
            ("m5", False, "absent"),
        ],
        "4.3": [
            ("m1", True, "absent"),
            ("m2", True, "absent"),
            ("m3", True, "absent"),
            ("m4", False, "absent"),
            ("m5", False, "absent"),
        ],
    },
    "RabbitMQ 4.0: nacked messages go back to the front of a quorum queue (3.10: the back). "
    "RabbitMQ 4.3 does not count a basic.nack: no x-delivery-count (x-acquired-count 1). "
    "Measured on 3.10.8, 4.0.5 and 4.3.6.",
)
TABLE["quorum-after-rejects-out-of-order"] = Difference(
    # m1..m4; basic.get takes m1, m2; m2 is rejected with requeue, then m1
    {
        "3.10": [
            ("m3", False, 0),
            ("m4", False, 0),
            ("m2", True, 1),
            ("m1", True, 1),
        ],
        "4.0": [
            ("m2", True, 1),
            ("m1", True, 1),
            ("m3", False, "absent"),
            ("m4", False, "absent"),
        ],
        "4.3": [
            ("m2", True, 1),
            ("m1", True, 1),
            ("m3", False, "absent"),
            ("m4", False, "absent"),
        ],
    },
    "RabbitMQ 4.0: rejected messages go back to the front of a quorum queue in the order they "
    "came back, not to their old places (3.10: to the back). Measured on 3.10.8 and 4.0.5.",
)
TABLE["counted-return"] = Difference(
    # how the delivery-limit cases return a delivery so that the queue counts it
    by_line(lambda row: "nack" if row.nack_requeue_counts_delivery else "reject"),
    "RabbitMQ 4.3 no longer counts a basic.nack toward x-delivery-count and the delivery "
    "limit (only basic.reject and a closing channel; every return raises x-acquired-count): "
    "a message nacked with requeue forever never reaches its limit. The suite's cases nack; "
    "on 4.3 they reject, or they would test nothing. Measured on 4.3.6.",
)
TABLE["quorum-count-after-a-carried-one"] = Difference(
    # x-delivery-count of a dead letter carrying 1, as a quorum queue shows it on its first
    # delivery and after one and two returns of a closing channel
    {"3.10": ["absent", 1, 2], "4.0": [1, 1, 2], "4.3": [1, 2, 3]},
    "RabbitMQ 4.0 shows the count a dead letter carries until the queue counted a return of "
    "its own, then its own; 4.3 counts on from the carried count (its delivery limit too); "
    "3.10 carries nothing. Measured on 3.10.8, 4.0.5 and 4.3.6 (seed 279).",
)
TABLE["quorum-acquired-after-a-carried-one"] = Difference(
    # x-acquired-count of the same deliveries
    {"3.10": ["absent"] * 3, "4.0": ["absent"] * 3, "4.3": [1, 1, 2]},
    "RabbitMQ 4.3 quorum queues show x-acquired-count: the returns the queue counted itself "
    "(the carried count is not one of them), and until there is one, the x-delivery-count "
    "the message came with. Measured on 4.3.6 (seed 290 of the randomized test).",
)
TABLE["quorum-evictions"] = Difference(
    # the order a quorum queue dead-letters what one publish pushed out with drop-head
    by_line(lambda row: "newest first" if row.quorum_evictions_newest_first else "oldest first"),
    "RabbitMQ 3.10 and 4.0 quorum queues (rabbit_fifo) gather the evictions of one command and "
    "hand them on in reverse; 4.3 oldest first, as a classic queue. Measured on 3.10.8, 4.0.5 "
    "and 4.3.6 (seed 14).",
)
TABLE["quorum-bytes-count-properties"] = Difference(
    # whether a quorum queue counts a message's basic properties toward x-max-length-bytes
    by_line(lambda row: row.quorum_bytes_count_properties),
    "RabbitMQ 4.3 quorum queues count the body plus the properties as the publisher encoded "
    "them (2 flag bytes and each property present; rabbit_fifo adds mc:size's metadata size), "
    "whatever happened to the message since; 3.10.8 and 4.0.5 count the body. Measured by "
    "scripts/measure_quorum_bytes.py on 3.10.8, 4.0.5 and 4.3.6 (issue #49).",
)
TABLE["quorum-default-delivery-limit"] = Difference(
    by_line(lambda row: row.default_quorum_delivery_limit),
    "RabbitMQ 4.0: a quorum queue declared without x-delivery-limit gets 20 (4.0.0 release "
    "notes, 'Quorum queues now have a default redelivery limit'); 3.10 has none. Measured: 21 "
    "deliveries on 4.0.5, then dead-lettered (delivery_limit).",
)
TABLE["non-integer-delivery-limit"] = Difference(
    by_line(lambda row: "ignored" if row.delivery_limit_integers_only else "compared as it is"),
    "RabbitMQ 4.3 takes only an integer x-delivery-limit: a float (2.5, 0.5) or a string "
    "('3') is ignored and the queue gets the default limit (20). 3.10 and 4.0 compare the "
    "count with a float as a number and never reach a string (every number sorts below a "
    "binary in Erlang term order). Measured on 3.10.8, 4.0.5 and 4.3.6.",
)
TABLE["quorum-negative-delivery-limit"] = Difference(
    by_line(
        lambda row: (
            "no limit" if row.takes_unlimited_delivery_limit else "dead-letters at the first return"
        )
    ),
    "RabbitMQ 4.0: a negative x-delivery-limit (-1, -5, -0.5) means no limit; 3.10 compares "
    "the count with it and dead-letters at the first return. Measured on 3.10.8 and 4.0.5.",
)


# -- queue declarations -----------------------------------------------------------------------

TABLE["x-queue-type-redeclare"] = Difference(
    # the reason (after "for queue 'NAME' in vhost 'VHOST': ") when a classic queue declared
    # without x-queue-type is redeclared as quorum, and a quorum queue without x-queue-type
    {
        "3.10": {
            "quorum over classic": "received the value 'quorum' of type 'longstr' but current is "
            "none",
            "classic over quorum": "received none but current is the value 'quorum' of type "
            "'longstr'",
        },
        "4.0": {
            "quorum over classic": "received 'quorum' but current is 'classic'",
            "classic over quorum": "received 'classic' but current is 'quorum'",
        },
        "4.3": {
            "quorum over classic": "received 'quorum' but current is 'classic'",
            "classic over quorum": "received 'classic' but current is 'quorum'",
        },
    },
    "RabbitMQ 4.0 (rabbitmq-server #11541, #12109; also late 3.13.x): a queue declared without "
    "x-queue-type gets the default type ('classic') written into its arguments, and a "
    "redeclaration without one means that default, so both sides of the comparison have a "
    "type. 3.10 compares against a missing argument. Measured on 3.10.8 and 4.0.5.",
)

# -- headers exchange -------------------------------------------------------------------------

TABLE["headers-numbers"] = Difference(
    # binding -> the messages it takes, in tests/contract/test_routing.py's headers scenario
    {
        "3.10": {
            "int": ["n-int", "n-float"],
            "float": ["n-int", "n-float"],
            "stamp": ["at-stamp", "at-seconds"],
            "millis": ["at-millis"],
        },
        "4.0": {
            "int": ["n-int"],
            "float": ["n-float"],
            "stamp": ["at-seconds"],
            "millis": ["at-stamp", "at-millis"],
        },
        "4.3": {
            "int": ["n-int"],
            "float": ["n-float"],
            "stamp": ["at-seconds"],
            "millis": ["at-stamp", "at-millis"],
        },
    },
    "RabbitMQ 4.0 (message containers): the headers exchange compares a header's converted "
    "value with =:=, so an integer never matches a float (3.10 compares with ==: 1 matches "
    "1.0), and a message's timestamp counts in milliseconds while a binding's stays in seconds "
    "(3.10: a timestamp is its seconds on both sides). Measured on 3.10.8 and 4.0.5.",
)

# -- outside the contract scenarios: rr's own broker tests ------------------------------------

TABLE["classic-queue-type-argument"] = Difference(
    # x-queue-type in `rabbitmqctl list_queues arguments` of a classic queue declared without it
    by_line(lambda row: "classic" if row.queue_type_always_set else None),
    "RabbitMQ 4.0 (rabbitmq-server #11541, #12109): the default type is written into the "
    "queue's arguments, so list_queues shows x-queue-type = classic, and rr's conflict report "
    "names it ('broker 'classic'' instead of 'broker (none)'). Measured on 3.10.8 and 4.0.5.",
)
TABLE["access-refused-publish"] = Difference(
    # how the reply text of a publish refused for lack of write permission starts
    {
        "3.10": "ACCESS_REFUSED - access to exchange",
        "4.0": "ACCESS_REFUSED - write access to exchange",
        "4.3": "ACCESS_REFUSED - write access to exchange",
    },
    "RabbitMQ 4.0 names the permission that is missing in a 403 on publish ('write access to "
    "exchange ...'); 3.10 says 'access to exchange ...'. Measured on 3.10.8 and 4.0.5.",
)

# -- priorities -------------------------------------------------------------------------------
# test_priorities.py: n1 (none), p4, n2 (none), p3, p5, p0, p9, p200 published in that order

TABLE["quorum-priorities"] = Difference(
    {
        "3.10": ["n1", "p4", "n2", "p3", "p5", "p0", "p9", "p200"],
        "4.0": ["p5", "p9", "n1", "p200", "p4", "n2", "p3", "p0"],
        "4.3": ["p200", "p9", "p5", "n1", "p4", "n2", "p3", "p0"],
    },
    "RabbitMQ 4.0 quorum queues have two priorities (above 4: high) and serve two high for "
    "one low (4.0.0 release notes, 'message priorities'); 3.10 ignores priorities. RabbitMQ "
    "4.3 serves 32 priorities strictly: highest first, above 31 as 31, a message without one "
    "as 4. Measured on 3.10.8, 4.0.5 and 4.3.6.",
)
TABLE["quorum-priority-levels"] = Difference(
    by_line(lambda row: row.quorum_priorities),
    "Quorum queue priorities: none (3.10), two served 2:1 (4.0), 32 strict (4.3); "
    "releases.py's quorum_priorities.",
)
TABLE["quorum-priorities-after-returns"] = Difference(
    # the first three taken by basic.get and rejected with requeue, the last first
    {
        "3.10": ["p3", "p5", "p0", "p9", "p200", "n2", "p4", "n1"],
        "4.0": ["n1", "p9", "p5", "p200", "p4", "n2", "p3", "p0"],
        "4.3": ["p5", "p9", "p200", "n1", "p4", "n2", "p3", "p0"],
    },
    "A quorum queue serves what came back before everything else, in the order it came back "
    "(4.0 and 4.3), whatever its priority; 3.10 appends it at the back. Measured on 3.10.8, "
    "4.0.5 and 4.3.6.",
)
TABLE["quorum-expiry-heads"] = Difference(
    by_line(lambda row: "each" if row.quorum_expires_at_each_head else "what it serves next"),
    "RabbitMQ 4.3 quorum queues expire messages at the head of what was given back and at "
    "the head of the other messages (of each priority) alike; 3.10 and 4.0 only what they "
    "would serve next, so a message given back holds up the expiry of those behind it. "
    "Measured on 3.10.8, 4.0.5 and 4.3.6 (seeds 118 and 174 of the randomized test).",
)
TABLE["classic-max-priority-0"] = Difference(
    by_line(lambda row: "as 1" if row.classic_max_priority_0_as_1 else "no priorities"),
    "A classic queue declared with x-max-priority = 0: RabbitMQ 3.10 has no priorities then "
    "(first in, first out); 4.0 and 4.3 serve it as x-max-priority = 1 (priority 1 and above "
    "before 0 and none). Measured on 3.10.8, 4.0.5 and 4.3.6.",
)


# -- RabbitMQ 4.3's delayed retries -----------------------------------------------------------

TABLE["delayed-retries"] = Difference(
    by_line(lambda row: row.delayed_retries),
    "RabbitMQ 4.3.0: a quorum queue with x-delayed-retry-type / -min / -max holds a return "
    "back min(min x max(count, 1), max) ms before it is ready again (emulator/"
    "delayed_retry.py); 3.10 and 4.0 take the arguments on any queue and ignore them. "
    "Measured on 3.10.8, 4.0.5 and 4.3.6.",
)
TABLE["delayed-retries-close-count"] = Difference(
    {"3.10": 3, "4.0": 3, "4.3": 2},
    "The x-delivery-count of a message nacked, rejected and then given back by a closing "
    "channel, all with requeue: RabbitMQ 4.3 does not count the nack. Measured on 3.10.8, "
    "4.0.5 and 4.3.6.",
)


# -- the management API (tests/contract/test_management_api.py) -------------------------------

TABLE["deprecated-features"] = Difference(
    {
        "3.10": None,
        "4.0": (
            "unstated",
            [
                "amqp_address_v1",
                "classic_queue_mirroring",
                "global_qos",
                "management_metrics_collection",
                "queue_master_locator",
                "ram_node_type",
                "transient_nonexcl_queues",
            ],
        ),
        "4.3": [
            ("amqp_address_v1", False, "denied_by_default"),
            ("amqp_filter_set_bug", False, "denied_by_default"),
            ("classic_queue_mirroring", False, "removed"),
            ("global_qos", False, "denied_by_default"),
            ("management_metrics_collection", True, "permitted_by_default"),
            ("queue_master_locator", False, "denied_by_default"),
            ("ram_node_type", False, "removed"),
            ("transient_nonexcl_queues", True, "permitted_by_default"),
        ],
    },
    "GET /api/deprecated-features, each server in its default configuration: RabbitMQ 3.10.8 "
    "has no such path (406 to a request for JSON: no table); 4.0.5 lists each feature's name "
    "and phase, never its state: the features its rabbitmqctl list_deprecated_features lists "
    "(measured) and management_metrics_collection, which its management agent declares "
    "(measured on the shared 4.0.5's API); 4.3.6 lists each one's state (measured). "
    "3.10.8's answer is measured on a cluster node's API (tests/cluster/).",
)


# -- policies (docs/reference/topology.md, "Policies and arguments")
# ------------------------------------

TABLE["policy-apply-to-queue-type"] = Difference(
    by_line(lambda row: row.policy_apply_to_queue_types),
    "RabbitMQ 4.0: a policy's apply-to takes classic_queues and quorum_queues (a policy for "
    "one queue type); 3.10 refuses them (queues, exchanges or all). Measured on 3.10.8, 4.0.5 "
    "and 4.3.6.",
)
TABLE["operator-policy-refuses"] = Difference(
    by_line(
        lambda row: [
            key
            for key in ("overflow", "dead-letter-exchange", "delayed-retry-min")
            if key not in row.operator_policy_keys
        ]
    ),
    "Operator policies take the numeric limits on every line, overflow from 4.0 and the "
    "delayed-retry keys from 4.3 (new in 4.3), never a dead-letter key. Measured on 3.10.8, "
    "4.0.5 and 4.3.6 (their registries of operator policy validators).",
)
TABLE["policy-quorum-expires"] = Difference(
    by_line(lambda row: "policy" if row.quorum_expires_from_policy else "smallest"),
    "A quorum queue's expires: on 3.10 the policies' value (the smaller of policy and "
    "operator policy) replaces the argument's; 4.0 and 4.3 take the smallest of the three, as "
    "a classic queue. Measured on 3.10.8, 4.0.5 and 4.3.6 (a quorum queue checks its expiry "
    "on a tick: gone 8 to 12 s after; not in the contract scenarios for that reason, "
    "tests/unit/test_emulator_policies.py states it).",
)


# -- headers as bytes (docs/reference/testing.md, "Headers")
# --------------------------------------------

_HEADER_PATHS = (
    "classic get",
    "classic consume",
    "quorum consume",
    "quorum get",
    "quorum requeued",
    "dead-lettered",
    "BCC removed",
)
TABLE["headers-as-served"] = Difference(
    # path -> (the table written again: L as l; its top-level names sorted)
    {
        "3.10": {
            "classic get": (False, False),
            "classic consume": (False, False),
            "quorum consume": (True, False),
            "quorum get": (True, True),
            "quorum requeued": (True, True),
            "dead-lettered": (True, True),
            "BCC removed": (True, False),
        },
        "4.0": dict.fromkeys(_HEADER_PATHS, (True, True)),
        "4.3": dict.fromkeys(_HEADER_PATHS, (True, True)),
    },
    "How the server hands out a table a client wrote: 3.10 keeps a classic queue's bytes, "
    "writes them again in a quorum queue (an unsigned 64-bit L as a signed l, same bytes; "
    "names in their order) and when it removes BCC, and sorts the top-level names when it "
    "adds a header (basic.get's x-delivery-count 0 on a quorum queue, x-delivery-count, "
    "x-death); 4.0 and 4.3 write every table again, L as l and the top-level names sorted. "
    "Nested tables keep their order everywhere; every other type tag and its bytes are kept. "
    "Measured on 3.10.8, 4.0.5 and 4.3.6.",
)

# -- single active consumer -----------------------------------------------------------------

TABLE["single-active-priorities"] = Difference(
    by_line(lambda row: row.quorum_single_active_priorities),
    "RabbitMQ 4.0: a quorum queue's single active consumer goes by x-priority: a higher one "
    "arriving takes over at once when the active one holds nothing, else once it holds "
    "nothing, and the highest waiting one takes over when the active one goes; 3.10 goes by "
    "arrival. Measured on 3.10.8, 4.0.5 and 4.3.6 (a classic queue never hands over to a "
    "later higher one, and picks the highest waiting one when the active one goes, on all).",
)
TABLE["single-active-return-hands-over"] = Difference(
    by_line(lambda row: row.single_active_return_hands_over),
    "RabbitMQ 4.3: an active quorum consumer that gives its last delivery back with requeue "
    "hands over to the waiting consumer of higher priority; 4.0.5 stays on it, delivering to "
    "nobody, until it goes. Measured on 4.0.5 and 4.3.6.",
)
TABLE["single-active-cancel-stalls"] = Difference(
    by_line(lambda row: row.classic_single_active_cancel_stalls),
    "RabbitMQ 3.10: a classic queue whose active consumer is cancelled while holding "
    "deliveries delivers to nobody (and crashes at the next publish); 4.0 hands over at once. "
    "Measured on 3.10.8, 4.0.5 and 4.3.6.",
)
TABLE["single-active-get-type"] = Difference(
    by_line(lambda row: '<<"quorum">>' if row.single_active_get_type_as_binary else "quorum"),
    "How the RESOURCE_LOCKED refusal of basic.get from a quorum queue with a single active "
    "consumer names the type: 'quorum', on 4.3.6 '<<\"quorum\">>'. Measured on 3.10.8, 4.0.5 "
    "and 4.3.6.",
)
