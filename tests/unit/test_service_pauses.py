"""``rr status --service``: the paused queues read from services' metrics pages
(cli/status_services.py; docs/reference/cli.md, "rr status"), pure: pages and a time in."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rabbitctl_retry.cli.status_render import pause_text, status_outcome
from rabbitctl_retry.cli.status_services import (
    QueuePause,
    check_service_url,
    paused_in,
    paused_queues,
)
from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.runtime.aggregate import merged_page

NOW = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)

PAGE = """\
# HELP rr_paused Consumers of the queue paused now (a handler said a dependency is down).
# TYPE rr_paused gauge
rr_paused{queue="payments"} 1.0
rr_paused{queue="refunds"} 0.0
# HELP rr_pause_resumes_at_seconds While the queue is paused: the Unix time it resumes.
# TYPE rr_pause_resumes_at_seconds gauge
rr_pause_resumes_at_seconds{queue="payments"} %s
rr_pause_resumes_at_seconds{queue="refunds"} 0.0
# HELP rr_consuming 1 while every consumer consumes, else 0.
# TYPE rr_consuming gauge
rr_consuming 1.0
"""


def page(resumes_at_s: float) -> str:
    return PAGE % repr(resumes_at_s)


def test_a_paused_queue_with_its_resume_time_and_the_others_left_out() -> None:
    at = NOW.timestamp() + 42
    assert paused_in(page(at)) == {"payments": at}
    pauses = paused_queues({"http://a:9100/metrics": page(at)}, NOW)
    assert pauses == {
        "payments": QueuePause(
            until=datetime(2026, 12, 6, 12, 0, 42, tzinfo=UTC),
            left_s=42.0,
            by=("http://a:9100/metrics",),
        )
    }
    assert pause_text(pauses["payments"]) == "paused, resumes in 42 s"
    assert pause_text(None) == ""


def test_two_services_that_paused_a_queue_resume_it_at_the_later_time() -> None:
    pauses = paused_queues(
        {
            "http://a/metrics": page(NOW.timestamp() + 10),
            "http://b/metrics": page(NOW.timestamp() + 90),
        },
        NOW,
    )
    assert pauses["payments"].left_s == 90.0
    assert pauses["payments"].by == ("http://a/metrics", "http://b/metrics")


def test_a_pause_past_its_end_is_about_to_resume_and_one_without_a_time_is_just_paused() -> None:
    late = paused_queues({"http://a/metrics": page(NOW.timestamp() - 5)}, NOW)["payments"]
    assert late.left_s == 0.0
    assert pause_text(late) == "paused, resumes in 0 s"
    older = 'rr_paused{queue="payments"} 1.0\n'  # an rr run before the gauge
    (pause,) = paused_queues({"http://a/metrics": older}, NOW).values()
    assert (pause.until, pause.left_s, pause_text(pause)) == (None, None, "paused")


def test_nothing_paused_and_pages_without_rr_metrics() -> None:
    assert paused_queues({"http://a/metrics": page(0.0).replace("} 1.0", "} 0.0")}, NOW) == {}
    assert paused_queues({"http://a/metrics": "process_cpu_seconds_total 3.0\n"}, NOW) == {}
    assert paused_queues({}, NOW) == {}


def test_a_page_that_is_not_prometheus_text_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid"):
        paused_in("<html>not metrics</html>\n")


def test_workers_pages_merged_keep_the_latest_resume_time() -> None:
    """With --workers N the supervisor adds the pages up: the resume time is the latest."""
    merged = merged_page(
        [page(NOW.timestamp() + 10), page(NOW.timestamp() + 30)], everyone=2
    ).decode()
    pause = paused_queues({"http://sup/metrics": merged}, NOW)["payments"]
    assert pause.left_s == 30.0


@pytest.mark.parametrize(
    "url", ["ftp://a/metrics", "file:///etc/passwd", "127.0.0.1:9100", "http://", "http://a:x/"]
)
def test_a_service_url_that_is_not_http_is_a_usage_error(url: str) -> None:
    with pytest.raises(UsageError):
        check_service_url(url)


def test_service_urls_over_http_and_https_are_taken() -> None:
    check_service_url("http://127.0.0.1:9100/metrics")
    check_service_url("https://svc.example:9100/metrics")


def test_a_watch_frame_shows_the_pause_and_a_warning_for_the_service_not_read() -> None:
    """The table's last column, the JSON fields and the warning line, in a --watch frame;
    the service not read leaves the exit code alone."""
    from rabbitctl_retry.cli.status_render import Reading, Services, status_document
    from rabbitctl_retry.cli.status_services import ServicePage
    from rabbitctl_retry.ops.status import QueueStatus
    from rabbitctl_retry.topology.expand import QueueEntity
    from tests.unit.test_status_render import printed

    a, b = "http://a:9100/metrics", "http://b:9100/metrics"
    statuses = [
        QueueStatus(QueueEntity(name="payments"), False, 1, 0, kind="classic"),
        QueueStatus(QueueEntity(name="refunds"), False, 0, 1, kind="classic"),
    ]
    services = Services(
        paused_queues({a: page(NOW.timestamp() + 42)}, NOW),
        (
            ServicePage(a, page=page(NOW.timestamp() + 42)),
            ServicePage(b, error="it answered HTTP 404"),
        ),
        {b: "it answered HTTP 404"},
    )
    reading = Reading(statuses, read_at=NOW, services=services)
    frame = printed(reading, watch_s=5).splitlines()
    assert frame[1].split("┃")[-1].strip() == "service"
    assert frame[3].endswith("│ paused, resumes in 42 s")
    assert frame[4].endswith("│")  # refunds: not paused, an empty cell
    outcome = status_outcome(reading, watch_s=5)
    assert [str(note) for note in outcome.notes] == [
        "rr: warning: service http://b:9100/metrics: it answered HTTP 404; the queues it "
        "paused are not shown"
    ]
    assert status_outcome(reading).code == 0
    document = status_document(reading)
    assert [(q["paused_until"], q["paused_by"]) for q in document["queues"]] == [
        ("2026-12-06T12:00:42.000Z", [a]),
        (None, []),
    ]
    assert document["services"] == [
        {"url": a, "read": True, "error": None},
        {"url": b, "read": False, "error": "it answered HTTP 404"},
    ]
    plain = status_document(Reading(statuses, read_at=NOW))
    assert "services" not in plain
    assert "paused_until" not in plain["queues"][0]
    assert "service" not in printed(Reading(statuses, read_at=NOW)).splitlines()[0]
