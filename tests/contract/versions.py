"""Where RabbitMQ 3.10 and 4.0 differ: what the contract scenarios expect, in one table.

Each entry names a behaviour, gives its value per release line (``backend.version``: "3.10" or
"4.0"), and cites the release and the change. A scenario reads it with
``expected(backend.version, NAME)``; the emulator models the same differences behind its
version switches (docs/testing.md, "RabbitMQ 3.10 and 4.0").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rabbitctl_retry.fields import FieldValue


@dataclass(frozen=True)
class Difference:
    values: dict[str, Any]
    """The expected value per release line."""
    why: str
    """The release and the change, as measured or documented."""


TABLE: dict[str, Difference] = {}


def expected(version: str, name: str) -> Any:
    """What a scenario expects of ``name`` on the release line ``version``."""
    return TABLE[name].values[version]


# -- dead-lettering ---------------------------------------------------------------------------

TABLE["last-death-headers"] = Difference(
    {"3.10": False, "4.0": True},
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
    },
    "RabbitMQ 4.0 renders every x-death entry in one key order (mc_amqpl death_table, "
    "original-expiration first); 3.10 keeps the very first entry as written and sorts the keys "
    "of every entry it rebuilt. Measured on 3.10.8 and 4.0.5.",
)
TABLE["client-x-death"] = Difference(
    {"3.10": "continued", "4.0": "ignored"},
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


# -- quorum queues: requeues, delivery counts, delivery limits --------------------------------
# (body, redelivered, x-delivery-count or "absent") of each delivery, as test_requeue.py sees it

TABLE["quorum-after-consumer-close"] = Difference(
    # m1..m4; a consumer with prefetch 2 holds m1, m2; its channel closes; basic.get them all
    {
        "3.10": [("m1", True, 1), ("m2", True, 1), ("m3", False, 0), ("m4", False, 0)],
        "4.0": [("m1", True, 1), ("m2", True, 1), ("m3", False, "absent"), ("m4", False, "absent")],
    },
    "RabbitMQ 4.0: basic.get no longer shows x-delivery-count = 0 on a message never returned "
    "(3.x adds it to every basic.get of a quorum queue). Measured on 3.10.8 and 4.0.5.",
)
TABLE["quorum-got-by-basic-get"] = Difference(
    # m1..m4; basic.get takes m1, m2, m3
    {
        "3.10": [("m1", False, 0), ("m2", False, 0), ("m3", False, 0)],
        "4.0": [("m1", False, "absent"), ("m2", False, "absent"), ("m3", False, "absent")],
    },
    "RabbitMQ 4.0: no x-delivery-count on a first basic.get (3.x: 0). Measured on both.",
)
TABLE["quorum-after-get-and-close"] = Difference(
    # ... then acks m2 and closes the channel; basic.get them all
    {
        "3.10": [("m1", True, 1), ("m3", True, 1), ("m4", False, 0)],
        "4.0": [("m1", True, 1), ("m3", True, 1), ("m4", False, "absent")],
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
    },
    "RabbitMQ 4.0: a quorum queue puts a message rejected or nacked with requeue at the front "
    "(served before every message never delivered, as one a closing channel returns); 3.10 "
    "appends it at the back. Measured on 3.10.8 and 4.0.5.",
)
TABLE["quorum-got-after-reject"] = Difference(
    # m1..m5; basic.get takes m1, m2, m3; m2 is rejected with requeue; one more basic.get
    {"3.10": [("m4", False, 0)], "4.0": [("m2", True, 1)]},
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
    },
    "RabbitMQ 4.0: nacked messages go back to the front of a quorum queue (3.10: the back). "
    "Measured on 3.10.8 and 4.0.5.",
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
    },
    "RabbitMQ 4.0: rejected messages go back to the front of a quorum queue in the order they "
    "came back, not to their old places (3.10: to the back). Measured on 3.10.8 and 4.0.5.",
)
TABLE["quorum-default-delivery-limit"] = Difference(
    {"3.10": None, "4.0": 20},
    "RabbitMQ 4.0: a quorum queue declared without x-delivery-limit gets 20 (4.0.0 release "
    "notes, 'Quorum queues now have a default redelivery limit'); 3.10 has none. Measured: 21 "
    "deliveries on 4.0.5, then dead-lettered (delivery_limit).",
)
TABLE["quorum-negative-delivery-limit"] = Difference(
    {"3.10": "dead-letters at the first return", "4.0": "no limit"},
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
    },
    "RabbitMQ 4.0 (message containers): the headers exchange compares a header's converted "
    "value with =:=, so an integer never matches a float (3.10 compares with ==: 1 matches "
    "1.0), and a message's timestamp counts in milliseconds while a binding's stays in seconds "
    "(3.10: a timestamp is its seconds on both sides). Measured on 3.10.8 and 4.0.5.",
)

# -- outside the contract scenarios: rr's own broker tests ------------------------------------

TABLE["classic-queue-type-argument"] = Difference(
    # x-queue-type in `rabbitmqctl list_queues arguments` of a classic queue declared without it
    {"3.10": None, "4.0": "classic"},
    "RabbitMQ 4.0 (rabbitmq-server #11541, #12109): the default type is written into the "
    "queue's arguments, so list_queues shows x-queue-type = classic, and rr's conflict report "
    "names it ('broker 'classic'' instead of 'broker (none)'). Measured on 3.10.8 and 4.0.5.",
)
TABLE["access-refused-publish"] = Difference(
    # how the reply text of a publish refused for lack of write permission starts
    {
        "3.10": "ACCESS_REFUSED - access to exchange",
        "4.0": "ACCESS_REFUSED - write access to exchange",
    },
    "RabbitMQ 4.0 names the permission that is missing in a 403 on publish ('write access to "
    "exchange ...'); 3.10 says 'access to exchange ...'. Measured on 3.10.8 and 4.0.5.",
)
