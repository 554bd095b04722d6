"""decide() as one table: every row of the decision table (``retry/policy.py``'s docstring and
the outcome and delay tables of docs/reference/runtime.md) is one parametrized row with its exact
result.

Each row names the ``retry/policy.py`` table row it exercises (``rule``) and the
docs/reference/runtime.md table rows it illustrates (``docs``); ``test_the_table_covers_every_row``
checks both against the documents, and that the rows reach every outcome kind, action type,
event, copy purpose and delay mode decide() has, so a new kind in the code without a row here
fails.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import cast, get_args

import pytest

from rabbitctl_retry.fields import FieldValue
from rabbitctl_retry.retry import policy as policy_module
from rabbitctl_retry.retry.outcome import (
    Ack,
    AnyOutcome,
    DeadLetter,
    Drop,
    Failure,
    Pause,
    Retry,
    RetryAfter,
)
from rabbitctl_retry.retry.policy import (
    AckAction,
    Action,
    Copy,
    CopyPurpose,
    Decision,
    Event,
    GiveBackAction,
    RejectAction,
    RepublishAction,
    RetryPolicy,
    ScheduleAction,
    decide,
)
from rabbitctl_retry.topology.model import DelayMode, Queue, QueueType

TABLE_PAGES = (
    Path(__file__).parents[2] / "docs" / "reference" / "headers.md",  # the outcome table
    Path(__file__).parents[2] / "docs" / "explanation" / "attempts.md",  # the delay table
)

H = "x-ruststream-retry-count"
"""The default retry header (docs/explanation/attempts.md, "Attempts")."""

NOW = datetime(2026, 11, 30, 14, 0, 0, 123000, tzinfo=timezone(timedelta(hours=2)))
STAMP = "2026-11-30T12:00:00.123Z"
"""``NOW`` as ``rr-failed-at`` writes it: ISO 8601 UTC (docs/explanation/attempts.md,
"Attempts")."""

BOOM = Failure(type="payments.GatewayError", message="gateway said 503")
"""What a handler that raised hands to decide() (docs/reference/runtime.md, "Handlers")."""

# The policies, as topology queues declare them (RetryPolicy.of derives the wait queues and
# the delayed-message exchange from the queue name, as docs/reference/runtime.md "Delays" says).
REFUNDS = RetryPolicy.of(Queue(name="refunds", max_attempts=5, dead_letter="refunds.dead"))
REFUNDS_TTL = RetryPolicy.of(
    Queue(name="refunds", max_attempts=5, dead_letter="refunds.dead", delay=DelayMode.DLX_TTL)
)
REFUNDS_TIERS = RetryPolicy.of(
    Queue(
        name="refunds",
        max_attempts=5,
        dead_letter="refunds.dead",
        delay=DelayMode.DLX_TTL,
        delay_tiers_ms=(1_000, 30_000, 300_000),
    )
)
REFUNDS_DME = RetryPolicy.of(
    Queue(name="refunds", max_attempts=5, dead_letter="refunds.dead", delay=DelayMode.PLUGIN_DME)
)
JOBS = RetryPolicy.of(Queue(name="jobs", max_attempts=3))
"""Classic, capped, no dead-letter queue."""
EVENTS = RetryPolicy.of(Queue(name="events"))
"""Classic, no cap."""
PAYOUTS = RetryPolicy.of(
    Queue(name="payouts", type=QueueType.QUORUM, max_attempts=5, dead_letter="payouts.dead")
)
PAYOUTS_TTL = RetryPolicy.of(
    Queue(
        name="payouts",
        type=QueueType.QUORUM,
        max_attempts=5,
        dead_letter="payouts.dead",
        delay=DelayMode.DLX_TTL,
    )
)
JOBS_CHAIN = RetryPolicy.of(
    Queue(name="jobs", type=QueueType.QUORUM, max_attempts=3, dead_letter="jobs.second"),
    hands_off=True,
)
"""Quorum, dead-lettering into a queue with max_attempts of its own (a chain)."""
SECOND = RetryPolicy.of(
    Queue(name="jobs.second", type=QueueType.QUORUM, max_attempts=3, dead_letter="jobs.dead")
)
CLASSIC_SECOND = RetryPolicy.of(Queue(name="jobs.second", max_attempts=3, dead_letter="jobs.dead"))
JOBS_SERVER = RetryPolicy.of(
    Queue(
        name="jobs",
        type=QueueType.QUORUM,
        max_attempts=10,
        dead_letter="jobs.dead",
        delay=DelayMode.SERVER,
        delay_min_ms=1_000,
        delay_max_ms=5_000,
    )
)
"""Quorum, RabbitMQ 4.3's delayed retries: 1 s x the delivery count, at most 5 s."""
AUDIT = RetryPolicy.of(Queue(name="audit", type=QueueType.QUORUM))
"""Quorum, no cap, no dead-letter queue."""

# The first cells of docs/reference/runtime.md's two tables.
ACK_ROW = "`Outcome.ack()` / `None`"
RETRY_ROW = "`Outcome.retry()`"
DROP_ROW = "`Outcome.drop()`"
RETRY_AFTER_ROW = "`Outcome.retry_after(d)`"
MEMORY_ROW = "`memory` (default)"
DLX_TTL_ROW = "`dlx-ttl`"
TIERS_ROW = "`delay_tiers`"
DME_ROW = "`plugin-dme`"
SERVER_ROW = "`server`"

DEATH = [{"queue": "refunds", "reason": "rejected", "count": 1, "exchange": ""}]


def dead_letter_copy(queue: str, dead_letter: str, **headers: FieldValue) -> Copy:
    """The copy a spent classic delivery becomes: ``headers`` plus origin and time."""
    return Copy(
        exchange="",
        routing_key=dead_letter,
        headers={**headers, "rr-origin-queue": queue, "rr-failed-at": STAMP},
        purpose=CopyPurpose.DEAD_LETTER,
    )


# fmt: off
TABLE = [
    # ---- ack -------------------------------------------------------------------------------
    # runtime.md outcome table, `Outcome.ack()` / `None`: basic.ack, removed.
    pytest.param(
        ("ack", "any"), {ACK_ROW}, REFUNDS, {H: "2"}, Ack(),
        Decision(action=AckAction(), event=Event.ACKED, attempt=3),
        id="ack-classic",
    ),
    # runtime.md outcome table, `Outcome.ack()` / `None`: basic.ack, even at the cap.
    pytest.param(
        ("ack", "any"), {ACK_ROW}, PAYOUTS, {"x-delivery-count": 4}, Ack(),
        Decision(action=AckAction(), event=Event.ACKED, attempt=5),
        id="ack-quorum-at-cap",
    ),
    # ---- drop ------------------------------------------------------------------------------
    # runtime.md outcome table, `Outcome.drop()`: basic.reject(requeue=false); classic: gone.
    pytest.param(
        ("drop", "any"), {DROP_ROW}, REFUNDS, None, Drop(),
        Decision(action=RejectAction(requeue=False), event=Event.DROPPED, attempt=1),
        id="drop-classic",
    ),
    # runtime.md outcome table, `Outcome.drop()`: quorum with `dead_letter`: to it (rejected).
    pytest.param(
        ("drop", "any"), {DROP_ROW}, PAYOUTS, {"x-delivery-count": 1}, Drop(),
        Decision(
            action=RejectAction(requeue=False), event=Event.DROPPED, attempt=2,
            destination="payouts.dead",
        ),
        id="drop-quorum-dead-letter",
    ),
    # runtime.md outcome table, `Outcome.drop()`: a quorum queue without `dead_letter`: gone.
    pytest.param(
        ("drop", "any"), {DROP_ROW}, AUDIT, None, Drop(),
        Decision(action=RejectAction(requeue=False), event=Event.DROPPED, attempt=1),
        id="drop-quorum-no-dead-letter",
    ),
    # ---- retry, no max_attempts ------------------------------------------------------------
    # runtime.md outcome table, `Outcome.retry()`: no cap: basic.reject(requeue=true).
    pytest.param(
        ("retry", "no N"), {RETRY_ROW}, EVENTS, {H: "7"}, Retry(),
        Decision(action=RejectAction(requeue=True), event=Event.REQUEUED, attempt=8),
        id="retry-classic-no-cap",
    ),
    # runtime.md outcome table, `Outcome.retry()`: no cap, raised ("Handlers": raising retries).
    pytest.param(
        ("retry", "no N"), {RETRY_ROW}, EVENTS, None, Retry(BOOM),
        Decision(
            action=RejectAction(requeue=True), event=Event.REQUEUED, attempt=1, failure=BOOM,
        ),
        id="exception-classic-no-cap",
    ),
    # runtime.md outcome table, `Outcome.retry()`: quorum, no cap: basic.reject(requeue=true).
    pytest.param(
        ("retry", "no N"), {RETRY_ROW}, AUDIT, {"x-delivery-count": 12}, Retry(),
        Decision(action=RejectAction(requeue=True), event=Event.REQUEUED, attempt=13),
        id="retry-quorum-no-cap",
    ),
    # ---- retry, classic, attempt < N -------------------------------------------------------
    # runtime.md outcome table, `Outcome.retry()`: classic: copy + basic.ack (header = attempt).
    pytest.param(
        ("retry", "classic, attempt < N"), {RETRY_ROW}, REFUNDS, None, Retry(),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="refunds", headers={H: "1"},
                    purpose=CopyPurpose.RETRY,
                )
            ),
            event=Event.RETRIED, attempt=1, destination="refunds",
        ),
        id="retry-classic-first-delivery",
    ),
    # runtime.md outcome table, `Outcome.retry()`: classic copy; keeps application headers,
    # drops x-death and CC ("What a copy keeps").
    pytest.param(
        ("retry", "classic, attempt < N"), {RETRY_ROW}, REFUNDS,
        {H: "3", "x-tenant": "acme", "x-death": DEATH, "CC": ["audit"]}, Retry(),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="refunds", headers={H: "4", "x-tenant": "acme"},
                    purpose=CopyPurpose.RETRY,
                )
            ),
            event=Event.RETRIED, attempt=4, destination="refunds",
        ),
        id="retry-classic-last-but-one",
    ),
    # runtime.md outcome table, `Outcome.retry()`: classic copy; a malformed header counts 0
    # ("Attempts").
    pytest.param(
        ("retry", "classic, attempt < N"), {RETRY_ROW}, REFUNDS, {H: "\u00b2"}, Retry(),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="refunds", headers={H: "1"},
                    purpose=CopyPurpose.RETRY,
                )
            ),
            event=Event.RETRIED, attempt=1, destination="refunds",
        ),
        id="retry-classic-malformed-header",
    ),
    # runtime.md outcome table, `Outcome.retry()`: classic copy; the exception travels in the
    # dead-letter copy only ("Handlers").
    pytest.param(
        ("retry", "classic, attempt < N"), {RETRY_ROW}, REFUNDS, {H: "1"}, Retry(BOOM),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="refunds", headers={H: "2"},
                    purpose=CopyPurpose.RETRY,
                )
            ),
            event=Event.RETRIED, attempt=2, destination="refunds", failure=BOOM,
        ),
        id="exception-classic-below-cap",
    ),
    # ---- retry, classic, attempt >= N, dead_letter -----------------------------------------
    # runtime.md outcome table, `Outcome.retry()` ("Classic queue": at the cap, the copy goes
    # to dead_letter, header = N, rr-origin-queue, rr-failed-at).
    pytest.param(
        ("retry", "classic, attempt >= N, D"), {RETRY_ROW}, REFUNDS,
        {H: "4", "x-tenant": "acme"}, Retry(),
        Decision(
            action=RepublishAction(
                dead_letter_copy("refunds", "refunds.dead", **{"x-tenant": "acme", H: "5"})
            ),
            event=Event.DEAD_LETTERED, attempt=5, destination="refunds.dead",
        ),
        id="retry-classic-at-cap-dead-letter",
    ),
    # runtime.md outcome table, `Outcome.retry()` ("Classic queue": header set to N, also
    # when the delivery is past the cap).
    pytest.param(
        ("retry", "classic, attempt >= N, D"), {RETRY_ROW}, REFUNDS, {H: "9"}, Retry(),
        Decision(
            action=RepublishAction(dead_letter_copy("refunds", "refunds.dead", **{H: "5"})),
            event=Event.DEAD_LETTERED, attempt=10, destination="refunds.dead",
        ),
        id="retry-classic-past-cap-dead-letter",
    ),
    # runtime.md outcome table, `Outcome.retry()` + "Handlers": rr-error-type and
    # rr-error-message in the dead-letter copy.
    pytest.param(
        ("retry", "classic, attempt >= N, D"), {RETRY_ROW}, REFUNDS, {H: "4"}, Retry(BOOM),
        Decision(
            action=RepublishAction(
                dead_letter_copy(
                    "refunds", "refunds.dead",
                    **{
                        H: "5",
                        "rr-error-type": "payments.GatewayError",
                        "rr-error-message": "gateway said 503",
                    },
                )
            ),
            event=Event.DEAD_LETTERED, attempt=5, destination="refunds.dead", failure=BOOM,
        ),
        id="exception-classic-at-cap-dead-letter",
    ),
    # runtime.md outcome table, `Outcome.retry()`: a last attempt that raised nothing carries
    # no rr-error-* (stale ones from a replayed message are removed).
    pytest.param(
        ("retry", "classic, attempt >= N, D"), {RETRY_ROW}, REFUNDS,
        {H: "4", "rr-error-type": "builtins.KeyError", "rr-error-message": "'card'"}, Retry(),
        Decision(
            action=RepublishAction(dead_letter_copy("refunds", "refunds.dead", **{H: "5"})),
            event=Event.DEAD_LETTERED, attempt=5, destination="refunds.dead",
        ),
        id="retry-classic-at-cap-stale-error-headers",
    ),
    # ---- retry, classic, attempt >= N, no dead_letter --------------------------------------
    # runtime.md outcome table, `Outcome.retry()`: the table does not name this case (its
    # frame says copy + basic.ack); policy.py: basic.reject(requeue=false), spent.
    pytest.param(
        ("retry", "classic, attempt >= N, -"), {RETRY_ROW}, JOBS, {H: "2"}, Retry(),
        Decision(action=RejectAction(requeue=False), event=Event.SPENT, attempt=3),
        id="retry-classic-at-cap-no-dead-letter",
    ),
    # runtime.md outcome table, `Outcome.retry()`: as above, the handler raised.
    pytest.param(
        ("retry", "classic, attempt >= N, -"), {RETRY_ROW}, JOBS, {H: "2"}, Retry(BOOM),
        Decision(
            action=RejectAction(requeue=False), event=Event.SPENT, attempt=3, failure=BOOM,
        ),
        id="exception-classic-at-cap-no-dead-letter",
    ),
    # ---- retry, quorum, copies = 0 ---------------------------------------------------------
    # runtime.md outcome table, `Outcome.retry()`: quorum: basic.reject(requeue=true).
    pytest.param(
        ("retry", "quorum, copies = 0"), {RETRY_ROW}, PAYOUTS, None, Retry(),
        Decision(
            action=RejectAction(requeue=True), event=Event.RETRIED, attempt=1,
            destination="payouts",
        ),
        id="retry-quorum-first-delivery",
    ),
    # runtime.md outcome table, `Outcome.retry()` ("Quorum queue": x-delivery-limit = N - 1
    # moves it to dead_letter after the Nth delivery, reason delivery_limit).
    pytest.param(
        ("retry", "quorum, copies = 0"), {RETRY_ROW}, PAYOUTS, {"x-delivery-count": 4},
        Retry(),
        Decision(
            action=RejectAction(requeue=True), event=Event.DEAD_LETTERED, attempt=5,
            destination="payouts.dead",
        ),
        id="retry-quorum-at-cap-server-dead-letters",
    ),
    # runtime.md outcome table, `Outcome.retry()`: as above, the handler raised.
    pytest.param(
        ("retry", "quorum, copies = 0"), {RETRY_ROW}, PAYOUTS, {"x-delivery-count": 4},
        Retry(BOOM),
        Decision(
            action=RejectAction(requeue=True), event=Event.DEAD_LETTERED, attempt=5,
            destination="payouts.dead", failure=BOOM,
        ),
        id="exception-quorum-at-cap-server-dead-letters",
    ),
    # ---- retry, quorum, copies > 0, attempt >= N -------------------------------------------
    # runtime.md outcome table, `Outcome.retry()` ("Quorum queue": with delayed copies rr
    # ends the loop at attempt N with basic.reject(requeue=false), reason rejected).
    pytest.param(
        ("retry", "quorum, copies > 0, attempt >= N"), {RETRY_ROW}, PAYOUTS,
        {H: "2", "x-delivery-count": 2}, Retry(),
        Decision(
            action=RejectAction(requeue=False), event=Event.DEAD_LETTERED, attempt=5,
            destination="payouts.dead",
        ),
        id="retry-quorum-copies-at-cap",
    ),
    # runtime.md outcome table, `Outcome.retry()` ("Quorum queue"), past the cap.
    pytest.param(
        ("retry", "quorum, copies > 0, attempt >= N"), {RETRY_ROW}, PAYOUTS,
        {H: "4", "x-delivery-count": 3}, Retry(),
        Decision(
            action=RejectAction(requeue=False), event=Event.DEAD_LETTERED, attempt=8,
            destination="payouts.dead",
        ),
        id="retry-quorum-copies-past-cap",
    ),
    # ---- retry, quorum, attempt >= N, D retries (a chain) ----------------------------------
    # runtime.md "Attempts": into a queue with max_attempts of its own rr dead-letters by copy,
    # also from a quorum queue (a server dead letter carries its count on RabbitMQ 4.3).
    pytest.param(
        ("retry", "quorum, attempt >= N, D retries (a chain)"), {RETRY_ROW}, JOBS_CHAIN,
        {"x-delivery-count": 2, "x-tenant": "acme"}, Retry(BOOM),
        Decision(
            action=RepublishAction(
                dead_letter_copy(
                    "jobs",
                    "jobs.second",
                    **{
                        "x-tenant": "acme",
                        H: "3",
                        "rr-error-type": BOOM.type,
                        "rr-error-message": BOOM.message,
                    },
                )
            ),
            event=Event.DEAD_LETTERED, attempt=3, destination="jobs.second", failure=BOOM,
        ),
        id="retry-quorum-at-cap-into-a-chain",
    ),
    # The next queue of the chain: the retry header of jobs' dead letter counts 0 there.
    pytest.param(
        ("retry", "quorum, otherwise"), {RETRY_ROW}, SECOND,
        {H: "3", "rr-origin-queue": "jobs", "rr-failed-at": STAMP}, Retry(),
        Decision(
            action=RejectAction(requeue=True), event=Event.RETRIED, attempt=1,
            destination="jobs.second",
        ),
        id="retry-quorum-first-delivery-of-another-queues-dead-letter",
    ),
    pytest.param(
        ("retry", "classic, attempt < N"), {RETRY_ROW}, CLASSIC_SECOND,
        {H: "3", "rr-origin-queue": "jobs", "rr-failed-at": STAMP, "x-tenant": "acme"}, Retry(),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="jobs.second", headers={H: "1", "x-tenant": "acme"},
                    purpose=CopyPurpose.RETRY,
                )
            ),
            event=Event.RETRIED, attempt=1, destination="jobs.second",
        ),
        id="retry-classic-another-queues-dead-letter-starts-afresh",
    ),
    # ---- retry, quorum, otherwise ----------------------------------------------------------
    # runtime.md outcome table, `Outcome.retry()`: quorum: basic.reject(requeue=true).
    pytest.param(
        ("retry", "quorum, otherwise"), {RETRY_ROW}, PAYOUTS, {H: "2", "x-delivery-count": 1},
        Retry(),
        Decision(
            action=RejectAction(requeue=True), event=Event.RETRIED, attempt=4,
            destination="payouts",
        ),
        id="retry-quorum-copies-below-cap",
    ),
    # ---- retry_after(d), at the cap --------------------------------------------------------
    # runtime.md outcome table, `Outcome.retry_after(d)`: at the cap it is dead-lettered at
    # once (classic: the dead-letter copy, no rr-error-*).
    pytest.param(
        ("retry_after(d)", "at the cap (as retry)"), {RETRY_AFTER_ROW}, REFUNDS_TTL,
        {H: "4"}, RetryAfter(30_000),
        Decision(
            action=RepublishAction(dead_letter_copy("refunds", "refunds.dead", **{H: "5"})),
            event=Event.DEAD_LETTERED, attempt=5, destination="refunds.dead",
        ),
        id="retry-after-classic-at-cap-dead-letter",
    ),
    # runtime.md outcome table, `Outcome.retry_after(d)`: at the cap without dead_letter:
    # spent, basic.reject(requeue=false) (the table's "dead-lettered at once" does not fit).
    pytest.param(
        ("retry_after(d)", "at the cap (as retry)"), {RETRY_AFTER_ROW}, JOBS, {H: "2"},
        RetryAfter(1_000),
        Decision(action=RejectAction(requeue=False), event=Event.SPENT, attempt=3),
        id="retry-after-classic-at-cap-no-dead-letter",
    ),
    # runtime.md outcome table, `Outcome.retry_after(d)`: at the cap, quorum without copies:
    # the server dead-letters the requeue (reason delivery_limit).
    pytest.param(
        ("retry_after(d)", "at the cap (as retry)"), {RETRY_AFTER_ROW}, PAYOUTS,
        {"x-delivery-count": 4}, RetryAfter(5_000),
        Decision(
            action=RejectAction(requeue=True), event=Event.DEAD_LETTERED, attempt=5,
            destination="payouts.dead",
        ),
        id="retry-after-quorum-at-cap-server-dead-letters",
    ),
    # runtime.md outcome table, `Outcome.retry_after(d)`: at the cap, quorum after copies:
    # basic.reject(requeue=false), reason rejected.
    pytest.param(
        ("retry_after(d)", "at the cap (as retry)"), {RETRY_AFTER_ROW}, PAYOUTS,
        {H: "3", "x-delivery-count": 1}, RetryAfter(5_000),
        Decision(
            action=RejectAction(requeue=False), event=Event.DEAD_LETTERED, attempt=5,
            destination="payouts.dead",
        ),
        id="retry-after-quorum-copies-at-cap",
    ),
    # ---- retry_after(0) --------------------------------------------------------------------
    # runtime.md outcome table, `Outcome.retry_after(d)` with d = 0: a copy to the queue now.
    pytest.param(
        ("retry_after(d)", "d = 0"), {RETRY_AFTER_ROW}, REFUNDS_TTL, {H: "1"}, RetryAfter(0),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="refunds", headers={H: "2"},
                    purpose=CopyPurpose.RETRY,
                )
            ),
            event=Event.RETRIED, attempt=2, destination="refunds", delay_ms=0,
        ),
        id="retry-after-zero-classic",
    ),
    # runtime.md outcome table, `Outcome.retry_after(d)` with d = 0 on a quorum queue: the
    # copy's header is the attempt, x-delivery-count is dropped ("What a copy keeps").
    pytest.param(
        ("retry_after(d)", "d = 0"), {RETRY_AFTER_ROW}, PAYOUTS, {"x-delivery-count": 2},
        RetryAfter(0),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="payouts", headers={H: "3"},
                    purpose=CopyPurpose.RETRY,
                )
            ),
            event=Event.RETRIED, attempt=3, destination="payouts", delay_ms=0,
        ),
        id="retry-after-zero-quorum",
    ),
    # ---- retry_after(d), delay = memory ----------------------------------------------------
    # runtime.md delay table, `memory` (default): in the service, published after d.
    pytest.param(
        ("retry_after(d)", "delay = memory"), {RETRY_AFTER_ROW, MEMORY_ROW}, REFUNDS,
        {H: "1", "x-tenant": "acme"}, RetryAfter(30_000),
        Decision(
            action=ScheduleAction(
                Copy(
                    exchange="", routing_key="refunds", headers={H: "2", "x-tenant": "acme"},
                    purpose=CopyPurpose.DELAY,
                ),
                30_000,
            ),
            event=Event.DELAYED, attempt=2, destination="refunds", delay_ms=30_000,
        ),
        id="retry-after-memory-classic",
    ),
    # runtime.md delay table, `memory` (default), on a quorum queue.
    pytest.param(
        ("retry_after(d)", "delay = memory"), {RETRY_AFTER_ROW, MEMORY_ROW}, PAYOUTS,
        {H: "1", "x-delivery-count": 1}, RetryAfter(2_500),
        Decision(
            action=ScheduleAction(
                Copy(
                    exchange="", routing_key="payouts", headers={H: "3"},
                    purpose=CopyPurpose.DELAY,
                ),
                2_500,
            ),
            event=Event.DELAYED, attempt=3, destination="payouts", delay_ms=2_500,
        ),
        id="retry-after-memory-quorum",
    ),
    # runtime.md delay table, `memory` (default), no cap: the header still grows.
    pytest.param(
        ("retry_after(d)", "delay = memory"), {RETRY_AFTER_ROW, MEMORY_ROW}, EVENTS, {H: "41"},
        RetryAfter(1),
        Decision(
            action=ScheduleAction(
                Copy(
                    exchange="", routing_key="events", headers={H: "42"},
                    purpose=CopyPurpose.DELAY,
                ),
                1,
            ),
            event=Event.DELAYED, attempt=42, destination="events", delay_ms=1,
        ),
        id="retry-after-memory-no-cap",
    ),
    # ---- retry_after(d), delay = dlx-ttl ---------------------------------------------------
    # runtime.md delay table, `dlx-ttl`: the wait queue `<queue>.retry` with expiration = d.
    pytest.param(
        ("retry_after(d)", "delay = dlx-ttl"), {RETRY_AFTER_ROW, DLX_TTL_ROW}, REFUNDS_TTL,
        None, RetryAfter(30_000),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="refunds.retry", headers={H: "1"},
                    purpose=CopyPurpose.DELAY, expiration_ms=30_000,
                )
            ),
            event=Event.DELAYED, attempt=1, destination="refunds.retry", delay_ms=30_000,
        ),
        id="retry-after-dlx-ttl-classic",
    ),
    # runtime.md delay table, `dlx-ttl`, on a quorum queue.
    pytest.param(
        ("retry_after(d)", "delay = dlx-ttl"), {RETRY_AFTER_ROW, DLX_TTL_ROW}, PAYOUTS_TTL,
        {"x-delivery-count": 3}, RetryAfter(2_500),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="payouts.retry", headers={H: "4"},
                    purpose=CopyPurpose.DELAY, expiration_ms=2_500,
                )
            ),
            event=Event.DELAYED, attempt=4, destination="payouts.retry", delay_ms=2_500,
        ),
        id="retry-after-dlx-ttl-quorum",
    ),
    # ---- retry_after(d), delay_tiers -------------------------------------------------------
    # runtime.md delay table, `delay_tiers`: the smallest tier at least d long (d = a tier).
    pytest.param(
        ("retry_after(d)", "delay_tiers"), {RETRY_AFTER_ROW, TIERS_ROW}, REFUNDS_TIERS, None,
        RetryAfter(1_000),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="refunds.retry.1s", headers={H: "1"},
                    purpose=CopyPurpose.DELAY, expiration_ms=1_000,
                )
            ),
            event=Event.DELAYED, attempt=1, destination="refunds.retry.1s", delay_ms=1_000,
        ),
        id="retry-after-tier-exact",
    ),
    # runtime.md delay table, `delay_tiers`: shorter than every tier: the shortest.
    pytest.param(
        ("retry_after(d)", "delay_tiers"), {RETRY_AFTER_ROW, TIERS_ROW}, REFUNDS_TIERS, None,
        RetryAfter(1),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="refunds.retry.1s", headers={H: "1"},
                    purpose=CopyPurpose.DELAY, expiration_ms=1,
                )
            ),
            event=Event.DELAYED, attempt=1, destination="refunds.retry.1s", delay_ms=1,
        ),
        id="retry-after-tier-shorter-than-all",
    ),
    # runtime.md delay table, `delay_tiers`: 1 ms past a tier: the next one.
    pytest.param(
        ("retry_after(d)", "delay_tiers"), {RETRY_AFTER_ROW, TIERS_ROW}, REFUNDS_TIERS,
        {H: "2"}, RetryAfter(1_001),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="refunds.retry.30s", headers={H: "3"},
                    purpose=CopyPurpose.DELAY, expiration_ms=1_001,
                )
            ),
            event=Event.DELAYED, attempt=3, destination="refunds.retry.30s", delay_ms=1_001,
        ),
        id="retry-after-tier-between",
    ),
    # runtime.md delay table, `delay_tiers`: longer than every tier: the longest tier.
    pytest.param(
        ("retry_after(d)", "delay_tiers"), {RETRY_AFTER_ROW, TIERS_ROW}, REFUNDS_TIERS,
        {H: "3"}, RetryAfter(3_600_000),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="", routing_key="refunds.retry.5m", headers={H: "4"},
                    purpose=CopyPurpose.DELAY, expiration_ms=3_600_000,
                )
            ),
            event=Event.DELAYED, attempt=4, destination="refunds.retry.5m",
            delay_ms=3_600_000,
        ),
        id="retry-after-tier-longer-than-all",
    ),
    # ---- retry_after(d), delay = plugin-dme ------------------------------------------------
    # runtime.md delay table, `plugin-dme`: the exchange `<queue>.delay` with x-delay = d,
    # not mandatory ("What is guaranteed"); the delivered x-delay is replaced.
    pytest.param(
        ("retry_after(d)", "delay = plugin-dme"), {RETRY_AFTER_ROW, DME_ROW}, REFUNDS_DME,
        {H: "3", "x-delay": -45_000}, RetryAfter(45_000),
        Decision(
            action=RepublishAction(
                Copy(
                    exchange="refunds.delay", routing_key="refunds",
                    headers={H: "4", "x-delay": 45_000}, purpose=CopyPurpose.DELAY,
                    mandatory=False,
                )
            ),
            event=Event.DELAYED, attempt=4, destination="refunds.delay", delay_ms=45_000,
        ),
        id="retry-after-plugin-dme",
    ),
    # ---- delay = server (RabbitMQ 4.3's delayed retries) -----------------------------------
    # runtime.md delay table, `server`: a counted requeue; the server waits 1 s x 3 (the
    # count after this return), not a copy.
    pytest.param(
        ("retry", "quorum, delay = server, below the cap (or no N)"), {RETRY_ROW, SERVER_ROW},
        JOBS_SERVER, {"x-delivery-count": 2}, Retry(BOOM),
        Decision(
            action=RejectAction(requeue=True), event=Event.DELAYED, attempt=3,
            destination="jobs", delay_ms=3_000, failure=BOOM,
        ),
        id="retry-server-delay",
    ),
    # runtime.md delay table, `server`: d is not used; the wait is capped at delay_max.
    pytest.param(
        ("retry_after(d)", "delay = server"), {RETRY_AFTER_ROW, SERVER_ROW}, JOBS_SERVER,
        {"x-delivery-count": 7, H: "0"}, RetryAfter(30_000),
        Decision(
            action=RejectAction(requeue=True), event=Event.DELAYED, attempt=8,
            destination="jobs", delay_ms=5_000,
        ),
        id="retry-after-server-delay-capped",
    ),
    # runtime.md delay table, `server`: retry_after(0) is no copy either: the first return
    # waits delay_min.
    pytest.param(
        ("retry_after(d)", "delay = server"), {RETRY_AFTER_ROW, SERVER_ROW}, JOBS_SERVER,
        None, RetryAfter(0),
        Decision(
            action=RejectAction(requeue=True), event=Event.DELAYED, attempt=1,
            destination="jobs", delay_ms=1_000,
        ),
        id="retry-after-zero-server-delay",
    ),
    # runtime.md outcome table, `Outcome.retry_after(d)`: at the cap as retry(): the server's
    # own limit dead-letters this return (reason delivery_limit), without waiting.
    pytest.param(
        ("retry_after(d)", "delay = server"), {RETRY_AFTER_ROW}, JOBS_SERVER,
        {"x-delivery-count": 9}, RetryAfter(2_000),
        Decision(
            action=RejectAction(requeue=True), event=Event.DEAD_LETTERED, attempt=10,
            destination="jobs.dead",
        ),
        id="retry-after-server-delay-at-cap",
    ),
    # dead_letter: rr's dead-letter copy on either queue type, whatever the attempt; the
    # reason in rr-error-*.
    pytest.param(
        ("dead_letter", "any"), {"`Outcome.dead_letter(reason)`"}, PAYOUTS, {}, DeadLetter(BOOM),
        Decision(
            action=RepublishAction(Copy(
                exchange="", routing_key="payouts.dead",
                headers={H: "5", "rr-origin-queue": "payouts", "rr-failed-at": STAMP,
                         "rr-error-type": BOOM.type, "rr-error-message": BOOM.message},
                purpose=CopyPurpose.DEAD_LETTER,
            )),
            event=Event.DEAD_LETTERED, attempt=1, destination="payouts.dead", failure=BOOM,
        ),
        id="dead-letter-quorum-first-attempt",
    ),
    pytest.param(
        ("dead_letter", "any"), {"`Outcome.dead_letter(reason)`"}, JOBS, {}, DeadLetter(BOOM),
        Decision(
            action=RejectAction(requeue=False), event=Event.SPENT, attempt=1, failure=BOOM,
        ),
        id="dead-letter-without-dead-letter-queue",
    ),
    # drop of a mapped exception on a quorum queue with D: rr's copy, so the letter says why
    pytest.param(
        ("drop", "quorum, D, a mapped exception"), {"`Outcome.drop()`"}, PAYOUTS,
        {"x-delivery-count": 1}, Drop(BOOM),
        Decision(
            action=RepublishAction(Copy(
                exchange="", routing_key="payouts.dead",
                headers={H: "5", "rr-origin-queue": "payouts", "rr-failed-at": STAMP,
                         "rr-error-type": BOOM.type, "rr-error-message": BOOM.message},
                purpose=CopyPurpose.DEAD_LETTER,
            )),
            event=Event.DROPPED, attempt=2, destination="payouts.dead", failure=BOOM,
        ),
        id="mapped-drop-quorum-copies-to-dead-letter",
    ),
    # pause: given back by basic.nack (uncounted where the server allows), whatever the cap.
    pytest.param(
        ("pause(d)", "any"), {"`Outcome.pause(d)`"}, PAYOUTS, {"x-delivery-count": 4},
        Pause(30_000, BOOM),
        Decision(
            action=GiveBackAction(), event=Event.PAUSED, attempt=5, destination="payouts",
            delay_ms=30_000, failure=BOOM,
        ),
        id="pause-at-the-cap-gives-back",
    ),
]
# fmt: on


@pytest.mark.parametrize(("rule", "docs", "policy", "headers", "outcome", "expected"), TABLE)
def test_decision_table(
    rule: tuple[str, str],
    docs: set[str],
    policy: RetryPolicy,
    headers: Mapping[str, FieldValue] | None,
    outcome: AnyOutcome,
    expected: Decision,
) -> None:
    assert decide(policy, headers, outcome, now=NOW) == expected


def _policy_table_rows() -> set[tuple[str, str]]:
    """The (outcome, queue / state) rows of the table in ``retry/policy.py``'s docstring."""
    lines = (policy_module.__doc__ or "").splitlines()
    borders = [index for index, line in enumerate(lines) if line.startswith("====")]
    starts = [match.start() for match in re.finditer("=+", lines[borders[0]])]
    rows: list[list[str]] = []
    for line in lines[borders[1] + 1 : borders[2]]:
        outcome = line[starts[0] : starts[1]].strip()
        state = line[starts[1] : starts[2]].strip()
        if outcome:
            rows.append([outcome, state])
        elif state:
            rows[-1][1] += " " + state
    return {(outcome, state) for outcome, state in rows}


def _runtime_table_rows(header: str) -> set[str]:
    """The first cells of the docs/reference/runtime.md table whose header line is ``header``."""
    lines = "\n".join(page.read_text(encoding="utf-8") for page in TABLE_PAGES).splitlines()
    start = lines.index(header) + 2
    cells = set()
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells.add(line.split("|")[1].strip())
    return cells


def test_the_table_covers_every_row() -> None:
    rows = [param.values for param in TABLE]
    rules = {cast(tuple[str, str], row[0]) for row in rows}
    docs = set().union(*(cast(set[str], row[1]) for row in rows))
    policies = [cast(RetryPolicy, row[2]) for row in rows]
    outcomes = [cast(AnyOutcome, row[4]) for row in rows]
    decisions = [cast(Decision, row[5]) for row in rows]

    assert len({param.id for param in TABLE}) == len(TABLE)
    # Every row of the policy.py table, and only those.
    assert rules == _policy_table_rows()
    assert len(rules) == 21
    # Every row of docs/reference/runtime.md's outcome and delay tables, and only those.
    assert docs == _runtime_table_rows("| outcome | frame | effect |") | _runtime_table_rows(
        "| `delay` | where the copy waits | guarantees |"
    )
    assert len(docs) == 11
    # Every outcome kind, a handler exception (Retry with a failure) included.
    assert {type(outcome) for outcome in outcomes} == set(get_args(AnyOutcome))
    assert {Ack, Drop, Retry, RetryAfter, DeadLetter, Pause} == set(get_args(AnyOutcome))
    assert any(isinstance(outcome, Retry) and outcome.failure for outcome in outcomes)
    assert any(isinstance(outcome, Retry) and not outcome.failure for outcome in outcomes)
    # Every action type, both requeue flags, every event and copy purpose decide() has.
    actions = [decision.action for decision in decisions]
    assert {type(action) for action in actions} == set(get_args(Action))
    assert {action.requeue for action in actions if isinstance(action, RejectAction)} == {
        True,
        False,
    }
    assert {decision.event for decision in decisions} == set(Event)
    copies = [action.copy for action in actions if isinstance(action, RepublishAction)]
    copies += [action.copy for action in actions if isinstance(action, ScheduleAction)]
    assert {copy.purpose for copy in copies} == set(CopyPurpose)
    # Every delay mode delays something, on both queue types.
    delayed = [
        policy
        for policy, decision in zip(policies, decisions, strict=True)
        if decision.event is Event.DELAYED
    ]
    assert {policy.delay for policy in delayed} == set(DelayMode)
    assert {policy.quorum for policy in delayed} == {False, True}
    assert {policy.quorum for policy in policies} == {False, True}
