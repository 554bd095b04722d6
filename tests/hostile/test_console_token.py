"""The console's token and the addresses it answers on (docs/reference/console.md, "Security"): a
token read from ``--token-file`` is never printed (stderr lands in a service manager's logs); a
token of any printable ASCII character (``+ # & % ; "``, a space) opens the console from the
address with the token URL-encoded, by cookie and by bearer; and a console on every address
(``--bind 0.0.0.0``) answers on the machine's own addresses and name, and still refuses
another site's name (DNS rebinding)."""

from __future__ import annotations

import http.client
import socket
from pathlib import Path
from urllib.parse import quote, urlencode

from tests.hostile.console_process import WAIT_S, console_process

ODD_TOKEN = 'to+ken#with&odd%chars; "quoted" = 0123456789'
CSS = "/static/console.css"
"""A page that reads nothing of the broker."""


def _get(
    host: str, port: int, path: str, headers: dict[str, str]
) -> tuple[int, dict[str, str], str]:
    connection = http.client.HTTPConnection(host, port, timeout=WAIT_S)
    try:
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read().decode()
    finally:
        connection.close()


def test_a_token_from_a_file_is_never_printed(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("never-printed-token-0123456789\n")
    with console_process(token_file=token_file) as console:
        status, _, _ = _get("127.0.0.1", console.port, CSS, {"Host": f"127.0.0.1:{console.port}"})
        assert status == 401
        printed = console.printed
        stderr = console.stderr()
    assert "never-printed-token" not in stderr
    assert "?token=never" not in printed
    assert str(token_file) in printed  # where the token is


def test_a_token_with_url_characters_opens_the_console(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(ODD_TOKEN + "\n")
    with console_process(token_file=token_file) as console:
        port = console.port
        host = {"Host": f"127.0.0.1:{port}"}
        # the printed address, opened: a form that asks for the token
        printed = console.printed.split(console.base, 1)[1].split()[0]
        status, _, page = _get("127.0.0.1", port, printed, host)
        assert status == 401
        assert 'name="token"' in page
        # ... sent as a browser sends a form (a space as +, the rest %-encoded)
        status, headers, _ = _get("127.0.0.1", port, f"/?{urlencode({'token': ODD_TOKEN})}", host)
        assert status == 303, headers
        assert headers["Location"] == "/"
        status, headers, _ = _get("127.0.0.1", port, f"/?token={quote(ODD_TOKEN, safe='')}", host)
        assert status == 303, headers
        cookie = headers["Set-Cookie"].split(";", 1)[0]
        assert ODD_TOKEN not in headers["Set-Cookie"]
        opened = {**host, "Cookie": cookie, "Sec-Fetch-Site": "none"}
        status, _, _ = _get("127.0.0.1", port, CSS, opened)
        assert status == 200
        status, _, _ = _get(
            "127.0.0.1", port, CSS, {**host, "Authorization": f"Bearer {ODD_TOKEN}"}
        )
        assert status == 200
        status, _, _ = _get("127.0.0.1", port, f"/?token={quote(ODD_TOKEN[:-1])}", host)
        assert status == 401


def test_the_printed_address_of_a_random_token_opens_the_console() -> None:
    with console_process() as console:
        path = console.printed.split(console.base, 1)[1].split()[0]
        status, headers, _ = _get(
            "127.0.0.1", console.port, path, {"Host": f"127.0.0.1:{console.port}"}
        )
    assert status == 303, (console.printed, headers)


def test_a_console_on_every_address_answers_on_this_machines_own(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("wildcard-console-token-0123456789\n")
    bearer = {"Authorization": "Bearer wildcard-console-token-0123456789"}
    with console_process("--bind", "0.0.0.0", token_file=token_file) as console:
        port = console.port
        # an address of this machine other than the printed one, as its own literal
        for address in ("127.0.0.1", "127.0.0.2"):
            status, _, _ = _get(address, port, CSS, {**bearer, "Host": f"{address}:{port}"})
            assert status == 200, address
        name = socket.gethostname()
        status, _, _ = _get("127.0.0.1", port, CSS, {**bearer, "Host": f"{name}:{port}"})
        assert status == 200
        # another site's name for this machine (DNS rebinding), or another address literal
        for foreign in ("rebind.example", "127.0.0.3"):
            status, _, _ = _get("127.0.0.2", port, CSS, {**bearer, "Host": f"{foreign}:{port}"})
            assert status == 421, foreign
