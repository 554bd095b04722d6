"""Profiles on the real servers (docs/reference/cli.md, "Profiles"): a broker of rr's configuration
file chosen by ``--broker`` or ``$RR_BROKER`` (or its ``default``), its password from the
environment or a file, ``--vhost`` over every source, and which source wins. The proof that
rr reached the right broker and vhost: ``rr status`` counts the 3 messages of a queue that
exists only in the test's fresh vhost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner, Result

from rabbitctl_retry.cli import app
from rabbitctl_retry.transport.base import Properties
from tests.backends import RabbitBackend
from tests.broker.test_doctor_deprecated_on_servers import MANAGEMENT_URLS
from tests.dlq.support import declare, publish_all
from tests.shared_node import chosen_versions, require_broker

pytestmark = pytest.mark.broker

QUEUE = "profiled"


@pytest.fixture(params=chosen_versions())
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[RabbitBackend]:
    """A shared server in a fresh vhost, holding ``profiled`` with 3 messages."""
    rabbit = RabbitBackend(require_broker(request.param))
    rabbit.setup()
    try:
        await declare(rabbit, QUEUE)
        await publish_all(rabbit, QUEUE, [(b"m%d" % n, Properties()) for n in range(3)])
        yield rabbit
    finally:
        await rabbit.close()


async def rr(args: list[str], config: Path, **env: str) -> Result:
    runner = CliRunner(
        env={"COLUMNS": "200", "RR_URL": None, "RR_BROKER": None, "RR_CONFIG": str(config), **env}
    )
    return await asyncio.to_thread(runner.invoke, app, args)


def messages(result: Result, exit_code: int = 0) -> dict[str, int | None]:
    assert result.exit_code == exit_code, result.output
    return {queue["name"]: queue["messages"] for queue in json.loads(result.stdout)["queues"]}


def write(tmp_path: Path, text: str) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    return config


async def test_broker_names_a_profile_whose_password_is_in_the_environment(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    config = write(
        tmp_path,
        f'[brokers.here]\nurl = "{_with_user(backend)}"\nvhost = "{backend.vhost}"\n'
        'password_env = "RR_TEST_PASSWORD"\n',
    )

    by_flag = await rr(
        ["status", QUEUE, "--broker", "here", "-o", "json"], config, RR_TEST_PASSWORD="guest"
    )
    by_env = await rr(
        ["status", QUEUE, "-o", "json"], config, RR_BROKER="here", RR_TEST_PASSWORD="guest"
    )
    wrong = await rr(["status", QUEUE, "-b", "here"], config, RR_TEST_PASSWORD="wrong")
    unset = await rr(["status", QUEUE, "-b", "here"], config)

    assert messages(by_flag) == {QUEUE: 3}
    assert messages(by_env) == {QUEUE: 3}
    assert wrong.exit_code == 77, wrong.output  # the password came from the environment
    assert unset.exit_code == 78
    assert unset.stderr == (
        f"rr: error: {config}: brokers.here.password_env: $RR_TEST_PASSWORD is not set (it "
        "holds this broker's password)\n"
    )


async def test_a_password_file_and_vhost_over_the_profile(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("guest\n", encoding="utf-8")
    config = write(
        tmp_path,
        f'[brokers.here]\nurl = "{_with_user(backend)}/"\npassword_file = "{secret}"\n',
    )

    in_default_vhost = await rr(["status", QUEUE, "-b", "here", "-o", "json"], config)
    in_its_vhost = await rr(
        ["status", QUEUE, "-b", "here", "--vhost", backend.vhost, "-o", "json"], config
    )

    assert messages(in_default_vhost, exit_code=1) == {QUEUE: None}  # none in vhost /
    assert messages(in_its_vhost) == {QUEUE: 3}


async def test_the_default_profile_and_which_source_wins(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    config = write(
        tmp_path,
        'default = "here"\n\n'
        f'[brokers.here]\nurl = "{backend.url}"\n\n'
        '[brokers.nowhere]\nurl = "amqp://guest:guest@127.0.0.1:1/"\n',
    )
    elsewhere = "amqp://guest:guest@127.0.0.1:1/"

    by_default = await rr(["status", QUEUE, "-o", "json"], config)
    flag_over_env = await rr(
        ["status", QUEUE, "-b", "here", "-o", "json"], config, RR_URL=elsewhere
    )
    url_flag_over_broker_env = await rr(
        ["status", QUEUE, "--url", backend.url, "-o", "json"], config, RR_BROKER="nowhere"
    )
    both_flags = await rr(["status", QUEUE, "-b", "here", "--url", backend.url], config)
    both_env = await rr(["status", QUEUE], config, RR_URL=backend.url, RR_BROKER="here")
    unknown = await rr(["status", QUEUE, "-b", "prod"], config)

    assert messages(by_default) == {QUEUE: 3}
    assert messages(flag_over_env) == {QUEUE: 3}
    assert messages(url_flag_over_broker_env) == {QUEUE: 3}
    assert (both_flags.exit_code, both_flags.stderr) == (
        2,
        "rr: error: give --url or --broker, not both\n",
    )
    assert (both_env.exit_code, both_env.stderr) == (
        2,
        "rr: error: $RR_URL and $RR_BROKER are both set: unset one (or give --url or --broker)\n",
    )
    assert (unknown.exit_code, unknown.stderr) == (
        2,
        f"rr: error: --broker 'prod': {config} has no such broker (it has here, nowhere)\n",
    )


async def test_the_profiles_management_url_with_its_password(
    backend: RabbitBackend, tmp_path: Path
) -> None:
    if backend.version not in MANAGEMENT_URLS:
        pytest.skip(f"the shared RabbitMQ {backend.version} has no management API")
    management = urlsplit(MANAGEMENT_URLS[backend.version])
    config = write(
        tmp_path,
        f'[brokers.here]\nurl = "{_with_user(backend)}"\nvhost = "{backend.vhost}"\n'
        f'management_url = "{management.scheme}://guest@{management.hostname}:{management.port}/"\n'
        'password_env = "RR_TEST_PASSWORD"\n',
    )

    shown = await rr(
        ["status", QUEUE, "-b", "here", "-o", "json"], config, RR_TEST_PASSWORD="guest"
    )

    assert shown.exit_code == 0, shown.output
    (queue,) = json.loads(shown.stdout)["queues"]
    assert queue["messages"] == 3
    assert (queue["live"]["queue"], queue["live"]["exists"]) == (
        QUEUE,
        True,
    )  # read through the profile's management URL


def _with_user(backend: RabbitBackend) -> str:
    """The server's URL with the user ``guest`` and no password."""
    parts = urlsplit(backend.url)
    return f"{parts.scheme}://guest@{parts.hostname}:{parts.port}"
