"""Pure: the console's access rules (console/security.py) and its escaping
(console/views/base.py; a body: console/views/message.py), docs/reference/console.md, "Security"."""

from __future__ import annotations

import pytest

from rabbitctl_retry.console import security as sec
from rabbitctl_retry.console.views import base as html
from rabbitctl_retry.console.views import message

TOKEN = "t" * 32


def test_the_token_and_the_csrf_value() -> None:
    assert sec.token_matches(TOKEN, TOKEN)
    assert not sec.token_matches(None, TOKEN)
    assert not sec.token_matches(TOKEN[:-1], TOKEN)
    assert sec.bearer(f"Bearer {TOKEN}") == TOKEN
    assert sec.bearer(f"bearer {TOKEN}") == TOKEN
    assert sec.bearer(f"Basic {TOKEN}") is None
    assert sec.csrf_matches(sec.csrf_of(TOKEN), TOKEN)
    assert not sec.csrf_matches(sec.csrf_of("other" * 8), TOKEN)
    assert sec.csrf_of(TOKEN) != TOKEN  # the page never holds the token itself
    assert len(sec.new_token()) >= 32
    assert sec.new_token() != sec.new_token()


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8765", True),
        ("localhost:8765", True),
        ("LOCALHOST:8765", True),
        ("127.0.0.1:8766", False),
        ("rebind.example:8765", False),
        (None, False),
    ],
)
def test_the_host_must_be_the_consoles(host: str | None, allowed: bool) -> None:
    assert sec.host_allowed(host, sec.allowed_hosts("127.0.0.1", 8765)) == allowed


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        (None, True),
        ("http://127.0.0.1:8765", True),
        ("null", False),
        ("http://evil.example", False),
        ("https://127.0.0.1:8765", False),
    ],
)
def test_a_post_must_come_from_the_consoles_own_page(origin: str | None, allowed: bool) -> None:
    assert sec.origin_allowed(origin, sec.allowed_hosts("127.0.0.1", 8765)) == allowed


def test_no_page_may_run_a_script() -> None:
    policy = sec.HEADERS["Content-Security-Policy"]
    assert "default-src 'none'" in policy
    assert "script-src" not in policy
    assert "frame-ancestors 'none'" in policy


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("<script>", "&lt;script&gt;"),
        ("\"quoted\" & 'single'", "&quot;quoted&quot; &amp; &#x27;single&#x27;"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("\u202eevil", "\\u202eevil"),
        ("line\nbreak", "line\nbreak"),
    ],
)
def test_every_value_is_escaped(value: str, shown: str) -> None:
    assert html.e(value) == shown


def test_a_binary_body_is_a_hex_dump() -> None:
    shown = message.body_html(b"\x00\x01<script>")
    assert "<script>" not in shown
    assert "00 01 3c 73" in shown
    text = message.body_html(b"<b>bold</b>")
    assert "&lt;b&gt;bold&lt;/b&gt;" in text
    cut = message.body_html(b"x" * (message.MAX_BODY_BYTES + 10))
    assert "10 more bytes not shown" in cut
