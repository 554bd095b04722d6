"""Celery on rr's quorum queue (docs/how-to/other-clients.md, "Celery"): a worker that knows the
queue is a quorum queue (``x-queue-type`` in its ``queue_arguments``; Celery 5.5 and later then
leave global QoS off) and does not declare it (``no_declare``) runs every task; global QoS, which
Celery uses otherwise, is refused on a quorum queue by RabbitMQ 3.10 and 4.0 (540
NOT_IMPLEMENTED) and taken by 4.3. A task Celery rejects lands in rr's dead-letter queue, where
``rr dlq inspect`` shows it with Celery's task id in ``correlation_id``. Every task counted."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any

import pika
import pika.exceptions
from celery import Celery
from celery.contrib.testing.worker import start_worker
from celery.exceptions import Reject
from kombu import Queue

from tests.backends import RabbitBackend
from tests.dlq.support import rr
from tests.interop.conftest import release_of
from tests.observe import depth, peek

TASKS = 3


def _run_tasks(url: str) -> tuple[list[int], list[str]]:
    """A Celery worker on ``payments``; three tasks that run, one that rejects itself. The
    numbers the tasks got, and the ids of those sent."""
    app = Celery("rr-interop", broker=url)
    app.conf.task_queues = [
        Queue("payments", queue_arguments={"x-queue-type": "quorum"}, no_declare=True)
    ]
    app.conf.task_default_queue = "payments"
    app.conf.broker_connection_retry_on_startup = False
    app.conf.worker_hijack_root_logger = False
    ran: list[int] = []
    all_in = threading.Event()

    @app.task(name=f"record-{uuid.uuid4().hex}", acks_late=True)
    def record(number: int) -> None:
        if number < 0:
            raise Reject("refused", requeue=False)
        ran.append(number)
        if len(ran) >= TASKS:
            all_in.set()

    sent = []
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=60):
        for number in (*range(TASKS), -1):
            sent.append(record.apply_async((number,), queue="payments").id)
        all_in.wait(60)
    return ran, sent


async def test_a_celery_worker_on_rrs_quorum_queue(rabbit: RabbitBackend) -> None:
    ran, sent = await asyncio.to_thread(_run_tasks, rabbit.url)
    assert sorted(ran) == list(range(TASKS))
    await rabbit.until(lambda: _holds(rabbit, "payments.dead", 1), "the rejected task's letter")
    assert await depth(rabbit, "payments") == 0
    (letter,) = await peek(rabbit, "payments.dead")
    assert letter.properties.message_id is None
    assert letter.properties.correlation_id == sent[-1]  # the rejected task's id
    shown = await rr(rabbit, "dlq", "inspect", "payments.dead", "--yes", "-o", "json")
    assert shown.exit_code == 0, shown.output
    (message,) = json.loads(shown.stdout)["messages"]
    assert message["message_id"] is None
    assert message["properties"]["correlation_id"] == sent[-1]
    assert message["origin_queue"] == "payments"
    replayed = await rr(rabbit, "dlq", "replay", "payments.dead", "--yes")
    assert replayed.exit_code == 0, replayed.output
    (back,) = await peek(rabbit, "payments")
    assert back.properties.correlation_id == sent[-1]
    assert back.body == letter.body
    # Celery's own topology for delayed tasks, beside rr's (it declared it: a quorum queue)
    channel = await rabbit.channel()
    for exchange in ("celery_delayed_delivery", "celery_delayed_0", "celery_delayed_27"):
        await channel.exchange_declare(exchange, passive=True)


async def _holds(rabbit: RabbitBackend, queue: str, count: int) -> bool:
    return await depth(rabbit, queue) == count


def _consume_with_global_qos(url: str) -> str:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=4, global_qos=True)
        channel.basic_consume("payments", lambda *_: None)
        return "consuming"
    except (
        pika.exceptions.ChannelClosedByBroker,
        pika.exceptions.ConnectionClosedByBroker,
    ) as error:
        return f"{error.reply_code} {error.reply_text}"
    finally:
        if connection.is_open:
            connection.close()


async def test_global_qos_on_a_quorum_queue(rabbit: RabbitBackend) -> None:
    answer: Any = await asyncio.to_thread(_consume_with_global_qos, rabbit.url)
    if release_of(rabbit) >= (4, 3):
        assert answer == "consuming"
    else:
        assert answer.startswith("540 NOT_IMPLEMENTED"), answer
        assert "does not support global qos" in answer
