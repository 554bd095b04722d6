"""What rr relies on to tell its holding queues from another's (docs/how-to/migrate-to-quorum.md,
"Holding queues"; ``topology/migration.py`` ``is_rr_holding``), on RabbitMQ 3.10, 4.0 and 4.3 and
the emulator: a re-declare does not compare an argument RabbitMQ does not know (``x-rr-holding-for``
keeps its value, unseen by AMQP), but compares ``x-max-length`` and ``x-overflow``, and its
refusal states the queue's value, which AMQP reads (``ops/probe.py`` ``queue_arguments``). The
management API states every argument, the marker included (RabbitMQ 4.3.6 and the twin)."""

from __future__ import annotations

import pytest

from rabbitctl_retry.errors import PreconditionFailed
from rabbitctl_retry.ops.probe import queue_arguments
from rabbitctl_retry.topology.migration import HOLDING_MAX_LENGTH, holding_marks
from tests.backends import Backend
from tests.contract.test_management_api import management_api

NAME = "jobs.rr-migrating"


async def test_a_re_declare_compares_the_length_mark_but_not_the_marker(backend: Backend) -> None:
    channel = await backend.channel()
    await channel.queue_declare(NAME, durable=True, arguments=holding_marks("jobs"))
    # the marker is not compared: another value, or none, is accepted
    await channel.queue_declare(NAME, durable=True, arguments=holding_marks("other"))
    without_marker = {k: v for k, v in holding_marks("jobs").items() if k != "x-rr-holding-for"}
    await channel.queue_declare(NAME, durable=True, arguments=without_marker)
    # the length is: a queue without rr's marks is refused, the refusal states the value
    with pytest.raises(PreconditionFailed) as refused:
        await channel.queue_declare(NAME, durable=True, arguments={"x-rr-holding-for": "jobs"})
    assert "inequivalent arg 'x-max-length'" in str(refused.value)
    assert str(HOLDING_MAX_LENGTH) in str(refused.value)
    # what AMQP reads of the queue: the compared marks, not the marker
    connection = await backend.connect()
    read = await queue_arguments(connection, NAME)
    assert read is not None
    assert read.get("x-max-length") == HOLDING_MAX_LENGTH
    assert read.get("x-overflow") == "reject-publish"
    assert "x-rr-holding-for" not in read


async def test_the_management_api_states_the_marker(backend: Backend) -> None:
    api = management_api(backend)
    channel = await backend.channel()
    await channel.queue_declare(NAME, durable=True, arguments=holding_marks("jobs"))
    state = await api.queue_state(NAME)
    assert state is not None
    stated = {k: v for k, v in state.arguments.items() if k != "x-queue-type"}  # 4.3 adds it
    assert stated == {
        "x-rr-holding-for": "jobs",
        "x-max-length": HOLDING_MAX_LENGTH,
        "x-overflow": "reject-publish",
    }
