"""Hostile management URLs (docs/reference/cli.md, "Malformed input";
docs/how-to/run-on-a-cluster.md, "Replicas").

The management API's URL follows the rules of broker URLs, with the same messages: a URL rr
refuses is one ``rr: error: management URL ...`` line that never repeats the URL nor any
part of its password, exit 2 from ``--management-url`` / ``$RR_MANAGEMENT_URL``, 78 from
``[broker] management_url`` (``rr topology validate`` refuses it too), and never 70.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.errors import UsageError, censor_urls
from rabbitctl_retry.transport.management import check_management_url
from tests.hostile.fake_management import SECRET

runner = CliRunner(env={"COLUMNS": "200"})

HINT = "percent-encode / ? # @ in the user name and password as %2F %3F %23 %40"
PASSWORD_PART = SECRET[:7]
"""What a parser that reads the password as a host and a port shows of it (up to a '/')."""

HOSTILE = [
    pytest.param(
        f"http://mgr:{SECRET}/pw@127.0.0.1:1/",
        f"management URL holds an '@' after the host (a '/' or '?' in the password? {HINT})",
        id="slash-in-password",
    ),
    pytest.param(
        f"http://mgr:{SECRET}?pw@127.0.0.1:1/",
        f"management URL holds an '@' after the host (a '/' or '?' in the password? {HINT})",
        id="question-mark-in-password",
    ),
    pytest.param(
        f"http://mgr:{SECRET}#pw@127.0.0.1:1/",
        "management URL holds a '#' (a management URL has no #fragment: a '#' in the "
        f"password? {HINT})",
        id="hash-in-password",
    ),
    pytest.param(
        f"http://mgr:{SECRET}@pw@127.0.0.1:1/",
        f"management URL holds more than one '@' (an '@' in the password? {HINT})",
        id="at-in-password",
    ),
    pytest.param(
        f"http://mgr:{SECRET}@[::1/",
        "management URL has an IPv6 address without its closing ']'",
        id="broken-ipv6-bracket",
    ),
    pytest.param(
        f"http://mgr:{SECRET}@[::zz]:15672/",
        "management URL has no valid IPv6 address between '[' and ']'",
        id="bad-ipv6",
    ),
    pytest.param(
        f"http://mgr:{SECRET}@127.0.0.1:99999/",
        "management URL has a port that is not a number 1..65535",
        id="port-out-of-range",
    ),
    pytest.param(
        f"http://mgr:{SECRET}@127.0.0.1:/",
        "management URL has a port that is not a number 1..65535",
        id="empty-port",
    ),
    pytest.param(
        f"http://mgr:{SECRET}",
        "management URL has a port that is not a number 1..65535",
        id="no-host-part",
    ),
    pytest.param(
        f"http://mgr:{SECRET}@:15672/",
        "management URL names no host (http://USER:PASSWORD@HOST:15672/)",
        id="no-host",
    ),
    pytest.param(
        f"amqp://mgr:{SECRET}@127.0.0.1:15672/",
        "management URL must start with http:// or https:// (the management plugin's "
        "address: http://HOST:15672/, with the user name and password before the host; "
        "rr docs run-on-a-cluster)",
        id="amqp-scheme",
    ),
    pytest.param(
        f"ftp://mgr:{SECRET}@127.0.0.1/",
        "management URL must start with http:// or https:// (the management plugin's "
        "address: http://HOST:15672/, with the user name and password before the host; "
        "rr docs run-on-a-cluster)",
        id="ftp-scheme",
    ),
    pytest.param(
        f"mgr:{SECRET}@127.0.0.1:15672",
        "management URL must start with http:// or https:// (the management plugin's "
        "address: http://HOST:15672/, with the user name and password before the host; "
        "rr docs run-on-a-cluster)",
        id="no-scheme",
    ),
    pytest.param(
        f"http://mgr:{SECRET}@127.0.0.1:15672/\x1b[31m",
        "management URL holds a space or a control character (percent-encode it)",
        id="control-character",
    ),
    pytest.param(
        f"http://mgr:{SECRET}é@127.0.0.1:15672/",
        "management URL holds a character that is not ASCII (percent-encode it)",
        id="not-ascii",
    ),
    pytest.param(
        f"http://mgr:{SECRET}%zz@127.0.0.1:15672/",
        "management URL has a '%' that is not a %XX escape (write a '%' itself as %25)",
        id="broken-percent-escape",
    ),
    pytest.param(
        f"http://mgr:{SECRET}%ff@127.0.0.1:15672/",
        "management URL has a user name or password whose %XX escapes are not UTF-8",
        id="escape-not-utf8",
    ),
    pytest.param(
        f"http://mgr:{SECRET}@127.0.0.1:15672/?columns=name",
        "management URL has a query ('?...'): it is the API's address, http://HOST:PORT/ "
        f"or the path a proxy serves it under ({HINT})",
        id="query",
    ),
    pytest.param(
        f"http://m%3Agr:{SECRET}@127.0.0.1:15672/",
        "management URL has a ':' (%3A) in the user name, which basic auth cannot carry",
        id="colon-in-user",
    ),
    pytest.param("", "management URL is empty", id="empty"),
]


def _shown(message: str) -> str:
    """``message`` as rr prints it: URL-looking words censored (cli/_common.py ``fail``)."""
    return censor_urls(message)


@pytest.mark.parametrize(("url", "message"), HOSTILE)
def test_hostile_management_url_is_refused_without_repeating_it(url: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        check_management_url(url)
    assert str(caught.value) == message
    assert PASSWORD_PART not in str(caught.value)


def test_accepted_management_urls() -> None:
    from rabbitctl_retry.urls import ManagementUrl, parse_management_url

    checked = parse_management_url(f"HTTP://svc:{SECRET}%2Fpw%40x@mq1:15672/")
    assert checked == ManagementUrl(
        base="http://mq1:15672",
        shown="HTTP://svc:******@mq1:15672/",
        user="svc",
        password=f"{SECRET}/pw@x",
    )
    assert SECRET not in repr(checked)
    assert checked.authorization is not None
    assert checked.authorization.startswith("Basic ")
    proxied = parse_management_url("https://[::1]/rabbitmq/")
    assert (proxied.base, proxied.user, proxied.authorization) == (
        "https://[::1]:443/rabbitmq",
        None,
        None,
    )
    assert parse_management_url("http://u:p%C3%A9@h:1").password == "pé"
    assert parse_management_url("http://u@h:1/").password == ""


PASSWORDS = st.text(alphabet="/?#@:%&=+[]abc019 \x1b\u202e", min_size=0, max_size=12)


@settings(max_examples=300, deadline=None)
@given(before=PASSWORDS, after=PASSWORDS)
def test_no_password_survives_a_management_url_parse(before: str, after: str) -> None:
    url = f"http://mgr:{before}{SECRET}{after}@127.0.0.1:15672/"
    assert SECRET not in _refusal(url)


def _refusal(url: str) -> str:
    """What rr says refusing ``url``; empty when it takes it."""
    try:
        check_management_url(url)
    except UsageError as error:
        return str(error)
    return ""


# --- every way a management URL reaches rr ------------------------------------------------

NO_BROKER = "amqp://guest:guest@127.0.0.1:1/"


def _plain(folder: Path) -> Path:
    path = folder / "plain.toml"
    path.write_text("[queues.rr-hostile-mgmt]\n", encoding="utf-8")
    return path


def _with_management_url(folder: Path, url: str) -> Path:
    path = folder / "with_management_url.toml"
    path.write_text(
        f"[broker]\nmanagement_url = {json.dumps(url)}\n\n[queues.rr-hostile-mgmt]\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    "source",
    [
        "--management-url",
        "RR_MANAGEMENT_URL",
        "--management-url of rr status",
        "RR_MANAGEMENT_URL of rr status",
        "[broker] management_url",
        "validate",
    ],
)
@pytest.mark.parametrize(("url", "message"), [p for p in HOSTILE if p.id != "empty"])
def test_every_management_url_path_refuses_without_printing_the_password(
    tmp_path: Path, source: str, url: str, message: str
) -> None:
    env: dict[str, str | None] = {"RR_MANAGEMENT_URL": None, "RR_URL": None}
    if source == "--management-url":
        args = ["declare", str(_plain(tmp_path)), "--url", NO_BROKER, "--management-url", url]
    elif source == "RR_MANAGEMENT_URL":
        args = ["declare", str(_plain(tmp_path)), "--url", NO_BROKER]
        env["RR_MANAGEMENT_URL"] = url
    elif source == "--management-url of rr status":
        args = ["status", "-t", str(_plain(tmp_path)), "--url", NO_BROKER, "--management-url", url]
    elif source == "RR_MANAGEMENT_URL of rr status":
        args = ["status", "-t", str(_plain(tmp_path)), "--url", NO_BROKER]
        env["RR_MANAGEMENT_URL"] = url
    elif source == "validate":
        args = ["topology", "validate", str(_with_management_url(tmp_path, url))]
    else:
        args = ["declare", str(_with_management_url(tmp_path, url)), "--url", NO_BROKER]
    result = runner.invoke(app, args, env=env)
    assert PASSWORD_PART not in result.stdout + result.stderr
    assert result.stdout == ""
    if source.startswith(("--", "RR_")):
        assert result.exit_code == 2
        assert result.stderr == (
            f"rr: error: {_shown(message)} (given by --management-url or $RR_MANAGEMENT_URL)\n"
        )
    else:
        topology = tmp_path / "with_management_url.toml"
        assert result.exit_code == 78
        assert result.stderr == (
            f"rr: error: {topology}:2: broker.management_url: {_shown(message)}\n"
        )


def test_an_empty_management_url_in_the_file_is_refused(tmp_path: Path) -> None:
    topology = _with_management_url(tmp_path, "")
    result = runner.invoke(app, ["topology", "validate", str(topology)])
    assert result.exit_code == 78
    assert result.stderr == (
        f"rr: error: {topology}:2: broker.management_url: management URL is empty\n"
    )


# --- the issue's own commands, as a user runs them ------------------------------------------


def _rr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m rabbitctl_retry ARGS`` (the package this interpreter imports)."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RR_URL", "RR_MANAGEMENT_URL", "RR_TRACEBACK")
    }
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


ISSUE_URLS = [
    pytest.param(f"http://mgr:{SECRET}/pw@127.0.0.1:1/", id="slash"),
    pytest.param(f"http://mgr:{SECRET}?pw@127.0.0.1:1/", id="question-mark"),
    pytest.param(f"http://mgr:{SECRET}#pw@127.0.0.1:1/", id="hash"),
    pytest.param(f"http://mgr:{SECRET}@[::1/", id="ipv6"),
    pytest.param(f"http://mgr:{SECRET}@127.0.0.1:99999/", id="port"),
]


@pytest.mark.parametrize("url", ISSUE_URLS)
def test_rr_refuses_the_issues_management_urls_from_the_flag_and_the_environment(
    tmp_path: Path, url: str
) -> None:
    topology = str(_plain(tmp_path))
    for result in (
        _rr("declare", topology, "--url", NO_BROKER, "--management-url", url),
        _rr("declare", topology, "--url", NO_BROKER, env={"RR_MANAGEMENT_URL": url}),
    ):
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("rr: error: management URL ")
        assert result.stderr.endswith(" (given by --management-url or $RR_MANAGEMENT_URL)\n")
        assert result.stderr.count("\n") == 1
        assert PASSWORD_PART not in result.stdout + result.stderr
        assert "internal error" not in result.stderr


@pytest.mark.parametrize("url", ISSUE_URLS)
def test_rr_topology_validate_refuses_the_issues_management_urls(tmp_path: Path, url: str) -> None:
    topology = _with_management_url(tmp_path, url)
    for result in (
        _rr("topology", "validate", str(topology)),
        _rr("declare", str(topology), "--url", NO_BROKER),
    ):
        assert result.returncode == 78, result.stderr
        assert result.stderr.startswith(
            f"rr: error: {topology}:2: broker.management_url: management URL "
        )
        assert result.stderr.count("\n") == 1
        assert PASSWORD_PART not in result.stdout + result.stderr
