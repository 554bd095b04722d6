"""Pure tables for inequivalence.py: RabbitMQ's PRECONDITION_FAILED texts, read and adopted."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.topology.inequivalence import (
    BrokerValue,
    Declaration,
    Inequivalence,
    adopt_current,
    desired_display,
    display_value,
    parse_inequivalence,
)

# The broker's own words, measured on a real RabbitMQ.
DELIVERY_LIMIT = (
    "PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'exp.q' in vhost '/': "
    "received '5' but current is '4'"
)
ROUTING_KEY = (
    "PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-routing-key' for queue 'exp.q' in "
    "vhost '/': received none but current is the value 'd' of type 'longstr'"
)
MAX_LENGTH = (
    "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'exp.q' in vhost '/': "
    "received the value '10' of type 'byte' but current is none"
)
DURABLE = (
    "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'exp.q' in vhost '/': "
    "received 'false' but current is 'true'"
)
QUEUE_TYPE = (
    "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'exp.c' in vhost '/': "
    "received the value 'quorum' of type 'longstr' but current is none"
)
EXCHANGE_TYPE = (
    "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'exp.x' in vhost '/': "
    "received 'fanout' but current is 'direct'"
)
AUTO_DELETE = (
    "PRECONDITION_FAILED - inequivalent arg 'auto_delete' for exchange 'exp.x' in vhost '/': "
    "received 'true' but current is 'false'"
)

ABSENT = BrokerValue(present=False)


def present(value: FieldValue) -> BrokerValue:
    return BrokerValue(present=True, value=value)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            DELIVERY_LIMIT,
            Inequivalence("x-delivery-limit", "queue", "exp.q", present(5), present(4)),
        ),
        (
            ROUTING_KEY,
            Inequivalence("x-dead-letter-routing-key", "queue", "exp.q", ABSENT, present("d")),
        ),
        (MAX_LENGTH, Inequivalence("x-max-length", "queue", "exp.q", present(10), ABSENT)),
        (DURABLE, Inequivalence("durable", "queue", "exp.q", present(False), present(True))),
        (QUEUE_TYPE, Inequivalence("x-queue-type", "queue", "exp.c", present("quorum"), ABSENT)),
        (
            EXCHANGE_TYPE,
            Inequivalence("type", "exchange", "exp.x", present("fanout"), present("direct")),
        ),
        (
            AUTO_DELETE,
            Inequivalence("auto_delete", "exchange", "exp.x", present(True), present(False)),
        ),
        # more shapes of the same sentence
        (
            "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'a.b' in vhost "
            "'prod': received the value '1000' of type 'signedint' but current is the value "
            "'2000' of type 'long'",
            Inequivalence("x-message-ttl", "queue", "a.b", present(1000), present(2000)),
        ),
        (
            "PRECONDITION_FAILED - inequivalent arg 'x-single-active-consumer' for queue 'q' in "
            "vhost '/': received the value 'true' of type 'bool' but current is none",
            Inequivalence("x-single-active-consumer", "queue", "q", present(True), ABSENT),
        ),
        (
            "PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-routing-key' for queue 'q' in "
            "vhost '/': received the value '5' of type 'longstr' but current is the value '6' of "
            "type 'shortstr'",
            Inequivalence("x-dead-letter-routing-key", "queue", "q", present("5"), present("6")),
        ),
        (
            "PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-exchange' for queue 'q' in "
            "vhost '/': received the value '' of type 'longstr' but current is none",
            Inequivalence("x-dead-letter-exchange", "queue", "q", present(""), ABSENT),
        ),
        (
            "PRECONDITION_FAILED - inequivalent arg 'x-expires' for queue 'q' in vhost '/': "
            "received the value '-1' of type 'long' but current is none",
            Inequivalence("x-expires", "queue", "q", present(-1), ABSENT),
        ),
        (
            "inequivalent arg 'internal' for exchange 'e' in vhost '/': received 'false' but "
            "current is 'true'",
            Inequivalence("internal", "exchange", "e", present(False), present(True)),
        ),
    ],
)
def test_parse_inequivalence(message: str, expected: Inequivalence) -> None:
    found = parse_inequivalence(message)
    assert found == expected
    assert found is not None
    for side, wanted in ((found.received, expected.received), (found.current, expected.current)):
        assert type(side.value) is type(wanted.value)


@pytest.mark.parametrize(
    "message",
    [
        "",
        "PRECONDITION_FAILED - something else entirely",
        "NOT_FOUND - no queue 'exp.q' in vhost '/'",
        "PRECONDITION_FAILED - invalid arg 'x-message-ttl' for queue 'q' in vhost '/': "
        "{unacceptable_type,longstr}",
        # a value type rr cannot read back
        "PRECONDITION_FAILED - inequivalent arg 'x-x' for queue 'q' in vhost '/': received the "
        "value '1.5' of type 'double' but current is none",
        # an integer type that does not hold an integer
        "PRECONDITION_FAILED - inequivalent arg 'x-max-priority' for queue 'q' in vhost '/': "
        "received the value '3' of type 'signedint' but current is the value 'x' of type "
        "'signedint'",
        # neither none, nor quoted, nor typed
        "PRECONDITION_FAILED - inequivalent arg 'x-x' for queue 'q' in vhost '/': received 5 "
        "but current is 4",
    ],
)
def test_parse_inequivalence_refuses_other_texts(message: str) -> None:
    assert parse_inequivalence(message) is None


def test_a_bare_value_reads_as_int_or_string() -> None:
    found = parse_inequivalence(
        "inequivalent arg 'x-overflow' for queue 'q' in vhost '/': received 'drop-head' but "
        "current is 'reject-publish'"
    )
    assert found == Inequivalence(
        "x-overflow", "queue", "q", present("drop-head"), present("reject-publish")
    )


# --------------------------------------------------------------------------- adopt_current

_QUORUM = Declaration(
    durable=True,
    arguments={
        "x-queue-type": "quorum",
        "x-delivery-limit": 5,
        "x-dead-letter-exchange": "",
        "x-max-length": 10,
    },
)


@pytest.mark.parametrize(
    ("declaration", "message", "adopted"),
    [
        (
            _QUORUM,
            DELIVERY_LIMIT,
            Declaration(
                durable=True,
                arguments={
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 4,
                    "x-dead-letter-exchange": "",
                    "x-max-length": 10,
                },
            ),
        ),
        (
            _QUORUM,
            ROUTING_KEY,
            Declaration(
                durable=True,
                arguments={
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 5,
                    "x-dead-letter-exchange": "",
                    "x-max-length": 10,
                    "x-dead-letter-routing-key": "d",
                },
            ),
        ),
        (
            _QUORUM,
            MAX_LENGTH,
            Declaration(
                durable=True,
                arguments={
                    "x-queue-type": "quorum",
                    "x-delivery-limit": 5,
                    "x-dead-letter-exchange": "",
                },
            ),
        ),
        (
            Declaration(durable=False, arguments={"x-max-length": 10}),
            DURABLE,
            Declaration(durable=True, arguments={"x-max-length": 10}),
        ),
        (
            Declaration(durable=True, arguments={"x-queue-type": "quorum"}),
            QUEUE_TYPE,
            Declaration(durable=True, arguments={}),
        ),
        (
            Declaration(durable=True, arguments={}, exchange_type="fanout"),
            EXCHANGE_TYPE,
            Declaration(durable=True, arguments={}, exchange_type="direct"),
        ),
        (
            Declaration(durable=True, arguments={}, auto_delete=True, exchange_type="direct"),
            AUTO_DELETE,
            Declaration(durable=True, arguments={}, auto_delete=False, exchange_type="direct"),
        ),
        (
            Declaration(durable=True, arguments={}, exchange_type="topic"),
            "inequivalent arg 'internal' for exchange 'e' in vhost '/': received 'false' but "
            "current is 'true'",
            Declaration(durable=True, arguments={}, internal=True, exchange_type="topic"),
        ),
    ],
)
def test_adopt_current(declaration: Declaration, message: str, adopted: Declaration) -> None:
    found = parse_inequivalence(message)
    assert found is not None
    result = adopt_current(declaration, found)
    assert result == adopted
    assert result is not None
    for key, value in adopted.arguments.items():
        assert type(result.arguments[key]) is type(value)


def test_adopt_current_leaves_the_original_alone() -> None:
    declaration = Declaration(durable=True, arguments={"x-delivery-limit": 5})
    found = parse_inequivalence(DELIVERY_LIMIT)
    assert found is not None
    adopted = adopt_current(declaration, found)
    assert adopted is not None
    assert declaration.arguments == {"x-delivery-limit": 5}
    assert adopted.arguments == {"x-delivery-limit": 4}
    assert adopted.arguments is not declaration.arguments


@pytest.mark.parametrize(
    "found",
    [
        # RabbitMQ's 'exclusive' cannot be adopted: rr never declares exclusive queues
        Inequivalence("exclusive", "queue", "q", present(False), present(True)),
        # a flag whose current value is not a boolean
        Inequivalence("durable", "queue", "q", present(False), present("maybe")),
        Inequivalence("durable", "queue", "q", present(False), ABSENT),
        # an exchange type that is not a string
        Inequivalence("type", "exchange", "e", present("fanout"), ABSENT),
    ],
)
def test_adopt_current_gives_up(found: Inequivalence) -> None:
    declaration = Declaration(durable=True, arguments={}, exchange_type="fanout")
    assert adopt_current(declaration, found) is None


def test_type_of_a_queue_is_an_argument_not_an_exchange_type() -> None:
    found = Inequivalence("type", "queue", "q", present("a"), present("b"))
    adopted = adopt_current(Declaration(durable=True, arguments={}), found)
    assert adopted == Declaration(durable=True, arguments={"type": "b"})


# --------------------------------------------------------------------------- the probe loop


def _fake_broker(
    name: str, declared: Declaration, current: dict[str, FieldValue], durable: bool
) -> str | None:
    """A broker that holds ``current`` and names the first difference, as RabbitMQ does."""

    def shown(value: FieldValue | None, present_: bool) -> str:
        if not present_:
            return "none"
        if isinstance(value, bool):
            kind = "bool"
        elif isinstance(value, int):
            kind = "long"
        else:
            kind = "longstr"
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return f"the value '{text}' of type '{kind}'"

    if declared.durable != durable:
        received = "true" if declared.durable else "false"
        held = "true" if durable else "false"
        return (
            f"PRECONDITION_FAILED - inequivalent arg 'durable' for queue '{name}' in vhost '/': "
            f"received '{received}' but current is '{held}'"
        )
    for key in sorted(set(declared.arguments) | set(current)):
        mine, theirs = declared.arguments.get(key), current.get(key)
        if (
            (key in declared.arguments) != (key in current)
            or type(mine) is not type(theirs)
            or mine != theirs
        ):
            return (
                f"PRECONDITION_FAILED - inequivalent arg '{key}' for queue '{name}' in vhost "
                f"'/': received {shown(mine, key in declared.arguments)} but current is "
                f"{shown(theirs, key in current)}"
            )
    return None


_VALUES = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.booleans(),
    st.text(alphabet="abcxyz.-_0123456789", max_size=8),
)
_ARGUMENTS = st.dictionaries(
    st.sampled_from(
        ["x-message-ttl", "x-max-length", "x-dead-letter-routing-key", "x-overflow", "x-sac"]
    ),
    _VALUES,
    max_size=5,
)


@settings(database=None, max_examples=200)
@given(desired=_ARGUMENTS, current=_ARGUMENTS, desired_durable=st.booleans(), durable=st.booleans())
def test_adopting_each_refusal_converges_on_the_brokers_declaration(
    desired: dict[str, Any], current: dict[str, Any], desired_durable: bool, durable: bool
) -> None:
    declaration: Declaration | None = Declaration(durable=desired_durable, arguments=desired)
    learnt: list[str] = []
    for _ in range(16):
        assert declaration is not None
        message = _fake_broker("q", declaration, current, durable)
        if message is None:
            break
        found = parse_inequivalence(message)
        assert found is not None, message
        learnt.append(found.key)
        declaration = adopt_current(declaration, found)
    else:
        pytest.fail(f"did not converge: {learnt}")
    assert declaration is not None
    assert declaration.durable is durable
    assert declaration.arguments == current
    for key, value in current.items():
        assert type(declaration.arguments[key]) is type(value)
    assert len(learnt) == len(set(learnt))


# --------------------------------------------------------------------------- display


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "(none)"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (4, "4"),
        (-1, "-1"),
        ("", "''"),
        ("payouts.dead", "'payouts.dead'"),
        ("4", "'4'"),
        (1.5, "1.5"),
    ],
)
def test_display_value(value: FieldValue, text: str) -> None:
    assert display_value(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (ABSENT, "(none)"),
        (present("d"), "'d'"),
        (present(4), "4"),
        (present(False), "false"),
    ],
)
def test_broker_value_display(value: BrokerValue, text: str) -> None:
    assert value.display() == text


_DISPLAYED = Declaration(
    durable=True,
    arguments={"x-delivery-limit": 4, "x-dead-letter-exchange": "", "x-sac": False},
    auto_delete=False,
    internal=True,
    exchange_type="topic",
)


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("durable", "true"),
        ("auto_delete", "false"),
        ("internal", "true"),
        ("type", "'topic'"),
        ("x-delivery-limit", "4"),
        ("x-dead-letter-exchange", "''"),
        ("x-sac", "false"),
        ("x-max-length", "(none)"),
    ],
)
def test_desired_display(key: str, text: str) -> None:
    assert desired_display(_DISPLAYED, key) == text


def test_desired_display_of_a_queue_type_key() -> None:
    assert desired_display(Declaration(durable=False, arguments={}), "type") == "(none)"
    assert desired_display(Declaration(durable=False, arguments={}), "durable") == "false"
