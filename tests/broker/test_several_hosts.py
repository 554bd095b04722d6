"""Several broker URLs (docs/reference/cli.md, "Several hosts"), on each real server: rr takes the
first URL that answers, in the order given; a refused login ends it at once; when none answers, the
one error line names every URL tried (censored)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import urlsplit

from typer.testing import CliRunner

from rabbitctl_retry.cli import app

runner = CliRunner()


def closed_port() -> int:
    """A local TCP port nobody listens on (connections are refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def nowhere() -> str:
    return f"amqp://guest:s3cret-nowhere@127.0.0.1:{closed_port()}/"


def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    return url.replace(f"{parts.username}:{parts.password}@", f"{parts.username}:{password}@")


def test_the_first_url_that_answers_is_used(amqp_url: str) -> None:
    result = runner.invoke(app, ["doctor", "--url", nowhere(), "--url", amqp_url, "-o", "json"])
    assert result.exit_code == 0, result.output
    server = json.loads(result.stdout)["server"]
    parts = urlsplit(amqp_url)  # RR_TEST_URL's host, port and vhost
    assert server["url"].endswith(f"@{parts.netloc.rpartition('@')[2]}{parts.path or '/'}")
    assert "guest:guest@" not in server["url"]  # the password is censored


def test_rr_url_takes_several_urls_separated_by_spaces(amqp_url: str) -> None:
    env = {"RR_URL": f"{nowhere()} {amqp_url}"}
    result = runner.invoke(app, ["dlq", "inspect", "amq.rabbitmq.no-such-queue"], env=env)
    assert result.exit_code == 1, result.output  # reached the broker: the queue is missing
    assert "no queue 'amq.rabbitmq.no-such-queue'" in result.stderr


def test_the_topology_file_may_list_the_nodes(amqp_url: str, tmp_path: Path) -> None:
    topology = tmp_path / "topology.toml"
    topology.write_text(f'[broker]\nurl = ["{nowhere()}", "{amqp_url}"]\n', encoding="utf-8")
    result = runner.invoke(app, ["doctor", "--topology", str(topology), "-o", "json"])
    assert result.exit_code == 0, result.output


def test_when_no_url_answers_every_one_is_named_once(amqp_url: str) -> None:
    first, second = nowhere(), nowhere()
    result = runner.invoke(app, ["doctor", "--url", first, "--url", second])
    assert result.exit_code == 69, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("rr: error: none of the 2 brokers answered: ")
    for url in (first, second):
        assert f"127.0.0.1:{urlsplit(url).port}" in lines[0]
    assert "s3cret-nowhere" not in result.stderr + result.stdout


def test_a_refused_login_is_not_hidden_by_the_next_url(amqp_url: str) -> None:
    wrong = with_password(amqp_url, "wrong-password")
    result = runner.invoke(app, ["doctor", "--url", wrong, "--url", amqp_url])
    assert result.exit_code == 77, result.output
    assert "wrong-password" not in result.stderr


def test_a_malformed_second_url_is_refused_before_anything_happens() -> None:
    result = runner.invoke(
        app, ["doctor", "--url", "amqp://127.0.0.1:5672/", "--url", "http://127.0.0.1/"]
    )
    assert result.exit_code == 2, result.output
    assert "(given by --url number 2)" in result.stderr
