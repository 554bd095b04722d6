"""runtime/http_head.py: what the bytes a metrics client sent make, as a table (issue #42;
docs/reference/metrics.md, "Metrics and health")."""

from __future__ import annotations

import pytest

from rabbitctl_retry.runtime.http_head import (
    MAX_HEAD_BYTES,
    Refusal,
    Request,
    answer,
    read_head,
)

MALFORMED = Refusal(400, "malformed request")


@pytest.mark.parametrize(
    ("received", "made"),
    [
        (b"", None),
        (b"GET /metr", None),
        (b"GET /metrics HTTP/1.1\r\nHost: rr\r\n", None),
        (b"GET /metrics HTTP/1.1\r\nHost: rr\r\n\r\n", Request("GET", "/metrics")),
        (b"GET /healthz?probe=1 HTTP/1.0\n\n", Request("GET", "/healthz")),
        (b"HEAD /metrics HTTP/1.1\r\n\r\nbody ignored", Request("HEAD", "/metrics")),
        (b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", Request("POST", "/")),
        (b"GET http://rr:9100/metrics?x HTTP/1.1\r\n\r\n", Request("GET", "/metrics")),
        (b"GET http://rr:9100 HTTP/1.1\r\n\r\n", Request("GET", "/")),
        (b"GET /metrics\r\n\r\n", MALFORMED),  # HTTP/0.9
        (b"GET  /metrics HTTP/1.1\r\n\r\n", MALFORMED),
        (b"GET /metrics HTTP/2.0\r\n\r\n", MALFORMED),
        (b"GET metrics HTTP/1.1\r\n\r\n", MALFORMED),
        (b"G\xc3\x89T /metrics HTTP/1.1\r\n\r\n", MALFORMED),
        (b"GET /m\x1b[2J HTTP/1.1\r\n\r\n", MALFORMED),
        (b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n", MALFORMED),
        (bytes(range(256)) + b"\r\n\r\n", MALFORMED),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n", MALFORMED),  # a TLS hello
        (b"GET /" + b"a" * MAX_HEAD_BYTES, Refusal(414, "request line too long")),
        (b"GET /" + b"a" * (MAX_HEAD_BYTES - 20), None),
        (
            b"GET / HTTP/1.1\r\nX: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n",
            Refusal(431, "request head too large"),
        ),
        (
            b"GET / HTTP/1.1\r\n" + b"X: a\r\n" * (MAX_HEAD_BYTES // 6),
            Refusal(431, "request head too large"),
        ),
    ],
)
def test_what_the_bytes_make(received: bytes, made: Request | Refusal | None) -> None:
    assert read_head(received) == made


def test_a_head_of_exactly_the_limit_is_read() -> None:
    head = b"GET /metrics HTTP/1.1\r\nX: "
    head += b"a" * (MAX_HEAD_BYTES - len(head) - 4) + b"\r\n\r\n"
    assert len(head) == MAX_HEAD_BYTES
    assert read_head(head) == Request("GET", "/metrics")
    assert read_head(head[:-1] + b"a\r\n\r\n") == Refusal(431, "request head too large")


def test_the_answer_closes_and_says_its_length() -> None:
    assert answer(200, b"consuming\n", "text/plain") == (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n"
        b"Connection: close\r\n\r\nconsuming\n"
    )
    assert answer(405, b"no\n", "text/plain", head_only=True).endswith(b"Allow: GET, HEAD\r\n\r\n")
