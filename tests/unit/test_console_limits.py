"""Pure: what ``rr console --bind`` means and what a failed listen says
(console/address.py), the Host rules of a console on every address (console/security.py),
the web server's limits (console/limits.py) and who uses a queue while a run moves it
(console/queue_use.py); docs/reference/console.md, "Security", "Limits", "While a run moves a
queue's letters"."""

from __future__ import annotations

import errno
import socket

import pytest

from rabbitctl_retry.console import address
from rabbitctl_retry.console import security as sec
from rabbitctl_retry.console.limits import MAX_CONNECTIONS, connection_limit, to_close
from rabbitctl_retry.console.queue_use import QueueUse
from rabbitctl_retry.dlq.edit import MAX_BOX_BYTES, box_problem, box_size_problem
from rabbitctl_retry.errors import ExitCode, exit_code_for


@pytest.mark.parametrize(
    ("bind", "refused"),
    [("", True), ("  ", True), (" 127.0.0.1", True), ("a\nb", True), ("127.0.0.1", False)],
)
def test_an_empty_or_blank_bind_is_refused(bind: str, refused: bool) -> None:
    assert (address.bind_problem(bind) is not None) == refused


@pytest.mark.parametrize(
    ("bind", "loopback", "wildcard", "host"),
    [
        ("127.0.0.1", True, False, "127.0.0.1"),
        ("localhost", True, False, "localhost"),
        ("::1", True, False, "[::1]"),
        ("0.0.0.0", False, True, "127.0.0.1"),
        ("::", False, True, "[::1]"),
        ("10.0.0.5", False, False, "10.0.0.5"),
        ("console.example", False, False, "console.example"),
    ],
)
def test_what_a_bind_address_is(bind: str, loopback: bool, wildcard: bool, host: str) -> None:
    assert address.is_loopback(bind) == loopback
    assert address.is_wildcard(bind) == wildcard
    assert address.url_host(bind) == host


def test_the_printed_address_encodes_the_token_and_a_files_is_not_printed() -> None:
    base = address.base_address("127.0.0.1", 8765)
    assert address.address_with_token(base, "a+b#c&d%e f") == (
        "http://127.0.0.1:8765/?token=a%2Bb%23c%26d%25e%20f"
    )
    line = address.address_for_token_file(base, "/etc/rr/token")
    assert line.startswith("http://127.0.0.1:8765/ ")
    assert "/etc/rr/token" in line


@pytest.mark.parametrize(
    ("error", "code", "says"),
    [
        (socket.gaierror(-2, "Name or service not known"), ExitCode.USAGE, "no such host"),
        (OSError(errno.EADDRNOTAVAIL, "x"), ExitCode.USAGE, "not an address of this machine"),
        (OSError(errno.EADDRINUSE, "x"), ExitCode.FAILURE, "the port is in use"),
        (OSError(errno.EACCES, "x"), ExitCode.FAILURE, "permission denied"),
        (OSError(errno.EMFILE, "Too many open files"), ExitCode.FAILURE, "Too many open files"),
    ],
)
def test_a_failed_listen_is_an_rr_error_naming_the_address(
    error: OSError, code: ExitCode, says: str
) -> None:
    failure = address.listen_error("192.0.2.99", 8765, error)
    assert exit_code_for(failure) == code
    assert "192.0.2.99" in str(failure)
    assert says in str(failure)


@pytest.mark.parametrize(
    ("host", "reached", "allowed"),
    [
        ("127.0.0.1:8765", None, True),
        ("myhost:8765", None, True),
        ("MYHOST:8765", None, True),
        ("10.0.0.5:8765", "10.0.0.5:8765", True),
        ("10.0.0.5:8765", "10.0.0.6:8765", False),
        ("10.0.0.5:8765", None, False),
        ("rebind.example:8765", "10.0.0.5:8765", False),
    ],
)
def test_a_console_on_every_address_takes_the_machines_own_names(
    host: str, reached: str | None, allowed: bool
) -> None:
    hosts = sec.allowed_hosts("0.0.0.0", 8765, ("myhost",))
    assert sec.host_allowed(host, hosts, reached) == allowed


def test_a_console_on_one_address_takes_no_host_name() -> None:
    assert not sec.host_allowed("myhost:8765", sec.allowed_hosts("10.0.0.5", 8765, ("myhost",)))


@pytest.mark.parametrize(
    ("sockname", "host"),
    [
        (("10.0.0.5", 8765), "10.0.0.5:8765"),
        (("::ffff:10.0.0.5", 8765, 0, 0), "10.0.0.5:8765"),
        (("fe80::1%eth0", 8765, 0, 2), "[fe80::1]:8765"),
        (("2001:db8::1", 8765, 0, 0), "[2001:db8::1]:8765"),
        ("/a/socket", None),
        (None, None),
    ],
)
def test_the_address_a_request_reached(sockname: object, host: str | None) -> None:
    assert sec.reached_host(sockname) == host


def test_the_cookie_holds_no_token() -> None:
    token = 'a "token"; with=odd chars'
    assert token not in sec.cookie_of(token)
    assert sec.cookie_of(token).isalnum()
    assert sec.cookie_matches(sec.cookie_of(token), token)
    assert not sec.cookie_matches(token, token)


@pytest.mark.parametrize(
    ("open_files", "limit"),
    [(None, MAX_CONNECTIONS), (1024, 480), (128, 32), (64, 8), (10, 8), (1_000_000, 512)],
)
def test_the_connections_held_at_once(open_files: int | None, limit: int) -> None:
    assert connection_limit(open_files) == limit


def test_the_oldest_idle_connection_makes_room() -> None:
    assert to_close(["a", "b"], set(), 3) is None
    assert to_close(["a", "b", "c"], set(), 3) == "a"
    assert to_close(["a", "b", "c"], {"a"}, 3) == "b"
    assert to_close(["a", "b", "c"], {"a", "b", "c"}, 3) is None


def test_a_run_has_its_queue_to_itself() -> None:
    use = QueueUse()
    assert use.start_read("dead") is None
    assert use.reading("dead") == 1
    assert use.start_move("dead", "job-1") is None  # it waits for the read to end
    assert use.start_read("dead") == "job-1"  # no read starts meanwhile
    assert use.start_read("other") is None
    assert use.start_move("dead", "job-2") == "job-1"
    use.end_read("dead")
    assert use.reading("dead") == 0
    use.end_move("dead", "job-2")  # not its run: nothing changes
    assert use.start_read("dead") == "job-1"
    use.end_move("dead", "job-1")
    assert use.start_read("dead") is None


def test_the_edit_box_holds_64_kib() -> None:
    assert box_size_problem(b"x" * MAX_BOX_BYTES) is None
    assert box_problem(b"x" * MAX_BOX_BYTES) is None
    too_large = b"x" * (MAX_BOX_BYTES + 1)
    assert box_problem(too_large) == "it is 65,537 bytes, more than the 64 KiB the box holds"
    assert "the edited body" in (box_size_problem(too_large, edited=True) or "")
