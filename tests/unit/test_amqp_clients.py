"""RR_AMQP_CLIENT: the pure choice of rr's AMQP client, and the client a command really uses."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback

import pytest

from rabbitctl_retry.errors import BrokerUnreachable, ExitCode, UsageError
from rabbitctl_retry.transport import clients


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (None, "native"),
        ("", "native"),
        ("  ", "native"),
        ("aiormq", "aiormq"),
        (" AIORMQ ", "aiormq"),
        ("native", "native"),
        ("Native", "native"),
    ],
)
def test_the_choice(setting: str | None, expected: str) -> None:
    assert clients.choose(setting) == expected


def test_an_unknown_client_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="use aiormq or native"):
        clients.choose("pika")


@pytest.mark.parametrize(("setting", "module"), [("aiormq", "amqp"), ("native", "native")])
async def test_connect_goes_through_the_client_chosen(setting: str, module: str) -> None:
    # A closed port: each client refuses with its own connect, named in the traceback.
    url = "amqp://guest:guest@127.0.0.1:1/"
    with pytest.raises(BrokerUnreachable, match="connection refused") as caught:
        await clients.connect(url, timeout_s=2.0, environ={clients.ENV: setting})
    files = {frame.filename for frame in traceback.extract_tb(caught.value.__traceback__)}
    assert any(name.endswith(f"transport/{module}.py") for name in files), files


def test_a_command_refuses_an_unknown_client_with_the_usage_exit_code() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rabbitctl_retry", "dlq", "inspect", "q", "--url", "amqp://x/"],
        capture_output=True,
        text=True,
        env={**os.environ, clients.ENV: "bogus", "COLUMNS": "200"},
        timeout=60,
        check=False,
    )
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert "RR_AMQP_CLIENT='bogus' is not a client rr knows" in result.stderr
    assert result.stdout == ""
