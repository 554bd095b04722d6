"""Hostile broker URLs and connection options (docs/reference/cli.md, "Connecting", "Malformed
input").

A URL rr cannot parse is refused before anything connects, with one ``rr: error:`` line
that never repeats it (exit 2 from ``--url`` / ``$RR_URL``, 78 from ``[broker] url``); a
password never reaches stdout or stderr; query options aiormq would read as "off" (TLS
verification, heartbeats) are refused unless written as documented.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.errors import BrokerUnreachable, UsageError, censor_url, censor_urls
from rabbitctl_retry.transport.amqp import TLS_NOT_VERIFIED, connect
from rabbitctl_retry.transport.url import BrokerUrl, parse_broker_url
from tests.shared_node import ctl_command
from tests.target_line import after_target

runner = CliRunner(env={"COLUMNS": "200"})

SECRET = "Zq7s3cr3tPw"
"""The password of every hostile URL: it must never appear in any output."""

HINT = "percent-encode / ? # @ in the user name and password as %2F %3F %23 %40"

HOSTILE = [
    pytest.param(
        f"amqp://guest:{SECRET}/pw@127.0.0.1:5672/vh",
        f"broker URL holds an '@' after the host (a '/' or '?' in the password? {HINT})",
        id="slash-in-password",
    ),
    pytest.param(
        f"amqp://guest:{SECRET}?pw@127.0.0.1:5672/",
        f"broker URL holds an '@' after the host (a '/' or '?' in the password? {HINT})",
        id="question-mark-in-password",
    ),
    pytest.param(
        f"amqp://guest:{SECRET}#pw@127.0.0.1:5672/",
        f"broker URL holds a '#' (a broker URL has no #fragment: a '#' in the password? {HINT})",
        id="hash-in-password",
    ),
    pytest.param(
        f"amqp://guest:{SECRET}@pw@127.0.0.1:5672/",
        f"broker URL holds more than one '@' (an '@' in the password? {HINT})",
        id="at-in-password",
    ),
    pytest.param(
        f"guest:{SECRET}@127.0.0.1:5672/",
        "broker URL must start with amqp:// or amqps:// (AMQP URLs: rr docs cli 'Connecting')",
        id="no-scheme",
    ),
    pytest.param(
        f"amqp://guest:{SECRET}",
        "broker URL has a port that is not a number 1..65535",
        id="no-host-part",
    ),
    pytest.param(
        f"amqp://guest:{SECRET}@[::1/",
        "broker URL has an IPv6 address without its closing ']'",
        id="broken-ipv6-bracket",
    ),
    pytest.param(
        f"amqp://guest:{SECRET}@127.0.0.1:5672/vh\x1b[31m",
        "broker URL holds a space or a control character (percent-encode it)",
        id="control-character",
    ),
]


# --- parse_broker_url: what is refused, with which message -------------------------------


@pytest.mark.parametrize(("url", "message"), HOSTILE)
def test_hostile_url_is_refused_without_repeating_it(url: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_broker_url(url)
    assert str(caught.value) == message
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("no_verify_ssl=false", "has no_verify_ssl=false: its only value is"),
        ("no_verify_ssl=no", "has no_verify_ssl=no: its only value is"),
        ("no_verify_ssl=", "has no_verify_ssl='': its only value is"),
        ("no_verify_ssl", "has no_verify_ssl='': its only value is"),
        ("no_verify_ssl=0", "has no_verify_ssl=0: its only value is"),
        ("no_verify_ssl=true", "has no_verify_ssl=true: its only value is"),
    ],
)
def test_no_verify_ssl_takes_only_1(query: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_broker_url(f"amqps://guest:guest@localhost:5671/?{query}")
    assert str(caught.value) == (
        f"broker URL {message} no_verify_ssl=1 (turn TLS certificate verification off); "
        "leave it out to verify"
    )


def test_no_verify_ssl_1_turns_verification_off_and_only_it() -> None:
    assert not parse_broker_url("amqps://u:p@localhost/?no_verify_ssl=1").verify_tls
    assert parse_broker_url("amqps://u:p@localhost/?cafile=%2Fetc%2Fca.pem").verify_tls
    assert parse_broker_url("amqps://u:p@localhost/").verify_tls


@pytest.mark.parametrize(
    "value", ["abc", "-5", "99999", "65536", "", "1.5", "+5", "%205", "%2B5", "٣"]
)
def test_heartbeat_outside_0_to_65535_is_refused(value: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_broker_url(f"amqp://guest:guest@localhost/?heartbeat={value}")
    assert str(caught.value).startswith("broker URL has heartbeat=")
    assert str(caught.value).endswith(
        ": heartbeat is a whole number of seconds 0..65535 (0 turns heartbeats off)"
    )


@pytest.mark.parametrize(("value", "seconds"), [("0", 0), ("1", 1), ("60", 60), ("65535", 65535)])
def test_heartbeat_in_range_is_kept(value: str, seconds: int) -> None:
    checked = parse_broker_url(f"amqp://guest:guest@localhost/?heartbeat={value}")
    assert checked.heartbeat_s == seconds
    assert checked.url == f"amqp://guest:guest@localhost/?heartbeat={value}"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "amqp://g:g@h/?heartbeet=5",
            "broker URL has an unknown query option 'heartbeet' (rr knows auth, cadata, cafile, "
            "capath, certfile, heartbeat, keyfile, name, no_verify_ssl; rr docs cli)",
        ),
        (
            "amqp://g:g@h/?timeout=5",
            "broker URL has an unknown query option 'timeout' (rr knows auth, cadata, cafile, "
            "capath, certfile, heartbeat, keyfile, name, no_verify_ssl; rr docs cli)",
        ),
        (
            "amqp://g:g@h/?heartbeat=5&heartbeat=0",
            "broker URL gives the query option heartbeat twice",
        ),
        (
            "amqp://g:g@h/?cafile=%2Fca.pem",
            "broker URL has the TLS option cafile, which needs amqps://",
        ),
        (
            "amqp://g:g@h/?no_verify_ssl=1",
            "broker URL has the TLS option no_verify_ssl, which needs amqps://",
        ),
        (
            "amqps://g:g@h/?keyfile=%2Fk.pem",
            "broker URL has keyfile without certfile (the client certificate it is the key of)",
        ),
        ("amqps://g:g@h/?cafile=", "broker URL has an empty cafile"),
        ("amqp://g:g@h/?name=", "broker URL has an empty name"),
        (
            "amqps://g:g@h/?cadata=not+base64",
            "broker URL has a cadata that is not base64 (percent-encode '+' as %2B)",
        ),
        ("amqp://g:g@h/?auth=kerberos", "broker URL has auth=kerberos: auth is plain or external"),
        ("amqp://g:g@h:0/", "broker URL has a port that is not a number 1..65535"),
        ("amqp://g:g@h:99999/", "broker URL has a port that is not a number 1..65535"),
        ("amqp://g:g@h:/", "broker URL has a port that is not a number 1..65535"),
        ("amqp://g:g@/vh", "broker URL names no host (amqp://USER:PASSWORD@HOST:PORT/VHOST)"),
        (
            "amqp://g:g@[::1]x/",
            "broker URL has text after the IPv6 address's ']' (expected ':PORT')",
        ),
        ("amqp://g:g@[nope]/", "broker URL has no valid IPv6 address between '[' and ']'"),
        (
            "http://g:g@h/",
            "broker URL must start with amqp:// or amqps:// (AMQP URLs: rr docs cli 'Connecting')",
        ),
        ("", "broker URL is empty"),
    ],
)
def test_refused_options_and_parts(url: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_broker_url(url)
    assert str(caught.value) == message


def test_accepted_urls() -> None:
    assert parse_broker_url("amqp://guest:s3cr3t%2Fpw@127.0.0.1/vh") == BrokerUrl(
        url="amqp://guest:s3cr3t%2Fpw@127.0.0.1/vh?heartbeat=10",
        shown="amqp://guest:******@127.0.0.1/vh",
        tls=False,
        host="127.0.0.1",
        port=5672,
        heartbeat_s=10,
        verify_tls=True,
        connection_name=None,
    )
    tls = parse_broker_url(
        "AMQPS://svc:pw@[::1]:5999/shop?cafile=%2Fca.pem&certfile=%2Fc.pem&keyfile=%2Fk.pem"
        "&auth=EXTERNAL&name=orders&cadata=QUJD"
    )
    assert (tls.tls, tls.host, tls.port, tls.connection_name, tls.heartbeat_s) == (
        True,
        "::1",
        5999,
        "orders",
        10,
    )
    assert tls.url.endswith("&cadata=QUJD&heartbeat=10")
    assert parse_broker_url("amqps://h").port == 5671
    assert parse_broker_url("amqp://h?").url == "amqp://h?heartbeat=10"


def _shown_or_refusal(url: str) -> str:
    """What rr may print of ``url``: its censored form, or the message refusing it."""
    try:
        return parse_broker_url(url).shown
    except UsageError as error:
        return str(error)


PASSWORDS = st.text(alphabet="/?#@:%&=+[]abc019 \x1b\u202e", min_size=0, max_size=12)


@settings(max_examples=300, deadline=None)
@given(before=PASSWORDS, after=PASSWORDS)
def test_no_password_survives_parsing_or_censoring(before: str, after: str) -> None:
    password = f"{before}{SECRET}{after}"
    url = f"amqp://guest:{password}@127.0.0.1:5672/vh?heartbeat=5"
    assert SECRET not in _shown_or_refusal(url)
    assert SECRET not in censor_url(url)
    if " " not in url:  # words are cut at spaces; rr refuses a URL with one, unrepeated
        assert SECRET not in censor_urls(f"cannot reach {url} now")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("amqp://guest:guest@localhost:5672/", "amqp://guest:******@localhost:5672/"),
        ("amqp://guest:s3/cr@127.0.0.1/vh", "amqp://guest:******@127.0.0.1/vh"),
        ("amqp://guest:s3?cr@127.0.0.1/", "amqp://guest:******@127.0.0.1/"),
        ("amqp://guest:s3#cr@127.0.0.1/", "amqp://guest:******@127.0.0.1/"),
        ("amqp://guest:s3@cr@127.0.0.1/", "amqp://guest:******@127.0.0.1/"),
        ("guest:s3cr3t@host", "guest:******@host"),
        ("amqp://lonely@host/", "amqp://******@host/"),
        ("amqp://:pw@host/", "amqp://******@host/"),
        ("amqp://we/ird:pw@host/", "amqp://******@host/"),
        ("amqp://host/vh", "amqp://host/vh"),
        ("amqp://user:pw@[::1/", "amqp://user:******@[::1/"),
        ("", ""),
    ],
)
def test_censor_url_masks_up_to_the_last_at(url: str, shown: str) -> None:
    assert censor_url(url) == shown


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_censor_url_never_raises_and_masks_whatever_precedes_the_last_at(text: str) -> None:
    shown = censor_url(text)
    if "@" in text:
        assert shown.endswith(text[text.rfind("@") :])
        assert "******" in shown
    else:
        assert shown == text


def test_censoring_only_touches_url_looking_words() -> None:
    message = (
        "amqp://guest:wrong@h/ refused the login (wrong user name or password?): "
        "ACCESS_REFUSED - Login was refused; mail ops@example.com"
    )
    assert censor_urls(message) == (
        "amqp://guest:******@h/ refused the login (wrong user name or password?): "
        "ACCESS_REFUSED - Login was refused; mail ops@example.com"
    )
    assert censor_urls("at\tguest:pw@h\nnext") == "at\tguest:******@h\nnext"


# --- every command path that takes a URL, from every source --------------------------------

HANDLER = "from rabbitctl_retry import subscriber\n@subscriber('rr-hostile-url')\ndef h(m): pass\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "handler_rr_hostile.py").write_text(HANDLER, encoding="utf-8")
    (tmp_path / "plain.toml").write_text("[queues.rr-hostile-url]\n", encoding="utf-8")
    return tmp_path


def _topology_with_url(folder: Path, url: str) -> Path:
    path = folder / "with_url.toml"
    path.write_text(
        f"[broker]\nurl = {json.dumps(url)}\n\n[queues.rr-hostile-url]\n", encoding="utf-8"
    )
    return path


def _command(command: str, folder: Path, topology: Path) -> list[str]:
    match command:
        case "declare":
            return ["declare", str(topology)]
        case "dlq-inspect":
            return ["dlq", "inspect", "rr-hostile-url", "--topology", str(topology)]
        case "run-no-declare":
            return [
                "run",
                str(folder / "handler_rr_hostile.py"),
                "--no-declare",
                "--topology",
                str(topology),
            ]
    raise AssertionError(command)


COMMANDS = ["declare", "dlq-inspect", "run-no-declare"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("source", ["--url", "RR_URL", "[broker] url"])
@pytest.mark.parametrize(("url", "message"), HOSTILE)
def test_every_url_path_refuses_without_printing_the_password(
    files: Path, command: str, source: str, url: str, message: str
) -> None:
    env: dict[str, str | None] = {"RR_URL": None}
    topology = files / "plain.toml"
    if source == "[broker] url":
        topology = _topology_with_url(files, url)
        args = _command(command, files, topology)
    else:
        args = _command(command, files, topology)
        if source == "--url":
            args += ["--url", url]
        else:
            env["RR_URL"] = url
    result = runner.invoke(app, args, env=env)
    shown = result.stdout + result.stderr
    assert SECRET not in shown
    assert result.stdout == ""
    if source == "[broker] url" and (url.startswith("guest:") or not url.isprintable()):
        # the topology file's own checks refuse these as the file is read: its file and line
        assert result.exit_code == 78
        assert result.stderr.startswith(f"rr: error: {topology}:2: broker.url: ")
        assert result.stderr.count("\n") == 1
        assert result.stderr.endswith("\n")
    elif source == "[broker] url":
        assert result.exit_code == 78
        assert result.stderr == f"rr: error: broker.url: {message}\n"
    else:
        which = "--url" if source == "--url" else "$RR_URL"
        assert result.exit_code == 2
        assert result.stderr == f"rr: error: {message} (given by {which})\n"


RECORD = '{"body": "aGk=", "body_size": 2, "exchange": "", "routing_key": "q", "properties": {}}'


@pytest.mark.parametrize(
    "args",
    [
        ["dlq", "replay", "rr-hostile-url", "--yes"],
        ["dlq", "replay", "rr-hostile-url", "--dry-run"],
        ["dlq", "export", "rr-hostile-url", "{dir}/out.jsonl"],
        ["dlq", "import", "{dir}/in.jsonl", "--to", "rr-hostile-url"],
        ["dlq", "purge", "rr-hostile-url", "--yes"],
    ],
    ids=lambda args: " ".join(args[:3]),
)
@pytest.mark.parametrize(("url", "message"), HOSTILE[:2])
def test_the_other_dlq_commands_refuse_the_same_way(
    tmp_path: Path, args: list[str], url: str, message: str
) -> None:
    (tmp_path / "in.jsonl").write_text(RECORD + "\n", encoding="utf-8")
    filled = [arg.format(dir=tmp_path) for arg in args]
    result = runner.invoke(app, [*filled, "--url", url], env={"RR_URL": None})
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"rr: error: {message} (given by --url)\n"
    assert not (tmp_path / "out.jsonl").exists()


@pytest.fixture
def broker(amqp_url: str) -> tuple[str, str, str]:
    """(user, password, host:port/vhost) of the test broker: ``host`` ends with the path of
    its URL (``/`` for the default vhost), so ``amqp://USER:PASSWORD@HOST`` reaches the vhost
    ``RR_TEST_URL`` names."""
    parts = urlsplit(amqp_url)
    if parts.scheme != "amqp":
        pytest.skip("builds amqp:// URLs to the test broker")
    host = f"{parts.hostname or '127.0.0.1'}:{parts.port or 5672}{parts.path or '/'}"
    return parts.username or "guest", parts.password or "guest", host


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("source", ["--url", "RR_URL", "[broker] url"])
def test_wrong_password_is_77_and_the_message_keeps_its_words(
    files: Path, broker: tuple[str, str, str], command: str, source: str
) -> None:
    user, _, host = broker
    url = f"amqp://{user}:wrong{SECRET}@{host}"
    env: dict[str, str | None] = {"RR_URL": None}
    if source == "[broker] url":
        args = _command(command, files, _topology_with_url(files, url))
    else:
        args = _command(command, files, files / "plain.toml")
        if source == "--url":
            args += ["--url", url]
        else:
            env["RR_URL"] = url
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 77
    assert SECRET not in result.stdout + result.stderr
    # rr declare names its broker first (docs/reference/cli.md, "Where the broker is")
    stderr = after_target(result.stderr) if command == "declare" else result.stderr
    assert stderr == (
        f"rr: error: amqp://{user}:******@{host} refused the login (wrong user name or "
        "password?): ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
        "For details see the broker logfile.\n"
    )


def test_password_ending_in_a_word_of_the_message_does_not_eat_it(
    broker: tuple[str, str, str],
) -> None:
    user, _, host = broker
    result = runner.invoke(
        app, ["dlq", "inspect", "rr-hostile-url", "--url", f"amqp://{user}:wrong@{host}"]
    )
    assert result.exit_code == 77
    assert "(wrong user name or password?)" in result.stderr
    assert "******" not in result.stderr.split(" refused ", 1)[1]


# --- query options on a real connection -----------------------------------------------------


def _connection_timeouts(name: str) -> list[int]:
    """The heartbeat timeout RabbitMQ negotiated on each connection named ``name``."""
    listed = subprocess.run(
        ctl_command(
            "-q", "list_connections", "client_properties", "timeout", "--formatter", "json"
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    timeouts = []
    for row in json.loads(listed or "[]"):
        listed_properties = row.get("client_properties")
        if not isinstance(listed_properties, list):
            continue  # a connection still opening (other tests' ones run beside this one)
        properties = {
            entry[0]: entry[2]
            for entry in listed_properties
            if isinstance(entry, list) and len(entry) >= 3
        }
        if properties.get("connection_name") == name:
            timeouts.append(row["timeout"])
    return timeouts


@pytest.mark.parametrize(
    ("query", "seconds"), [("heartbeat=65535", 65535), ("heartbeat=0", 0), ("", 10)]
)
async def test_the_broker_gets_the_heartbeat_the_url_names(
    broker: tuple[str, str, str], query: str, seconds: int
) -> None:
    user, password, host = broker
    name = f"rr-heartbeat-{uuid.uuid4().hex[:8]}"
    url = f"amqp://{user}:{password}@{host}?name={name}" + (f"&{query}" if query else "")
    connection = await connect(url)
    try:
        timeouts = await asyncio.to_thread(_connection_timeouts, name)
    finally:
        await connection.close()
    assert timeouts == [seconds]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_no_verify_ssl_1_logs_one_warning_per_connection(
    broker: tuple[str, str, str],
) -> None:
    user, _, host = broker
    records = _Records()
    transport_log = logging.getLogger("rr.transport")
    transport_log.addHandler(records)
    try:
        for _ in range(2):  # amqps:// to the plain port: the TLS handshake fails
            with pytest.raises(BrokerUnreachable) as caught:
                await connect(f"amqps://{user}:{SECRET}@{host}?no_verify_ssl=1", timeout_s=5)
            shown = f"amqps://{user}:******@{host}?no_verify_ssl=1"
            assert str(caught.value).startswith(f"cannot connect to {shown}: TLS handshake failed")
        with pytest.raises(BrokerUnreachable):
            await connect(f"amqps://{user}:{SECRET}@{host}", timeout_s=5)
    finally:
        transport_log.removeHandler(records)
    warnings = [r for r in records.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [TLS_NOT_VERIFIED, TLS_NOT_VERIFIED]
    assert TLS_NOT_VERIFIED == "TLS certificate verification is off (no_verify_ssl=1)"
    assert all(SECRET not in str(r.__dict__) for r in records.records)
