"""Where ``rr.Publisher`` connects: the URLs, profiles, vhost and environment of every command
(docs/reference/publishing.md, "Where it connects"; docs/reference/cli.md, "Profiles")."""

from __future__ import annotations

from pathlib import Path

import pytest

from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.publisher import DEFAULT_URL, broker_urls

CONFIG = """
default = "local"

[brokers.local]
url = "amqp://guest:guest@localhost:5672/"

[brokers.prod]
url = ["amqps://ops@mq1.internal:5671/", "amqps://ops@mq2.internal:5671/"]
vhost = "payments"
password_env = "RR_TEST_PROD_PASSWORD"

[brokers.prod.tls]
ca_file = "/etc/rr/ca.pem"
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG, encoding="utf-8")
    monkeypatch.setenv("RR_CONFIG", str(path))
    monkeypatch.delenv("RR_URL", raising=False)
    monkeypatch.delenv("RR_BROKER", raising=False)
    monkeypatch.setenv("RR_TEST_PROD_PASSWORD", "s/cret")
    return path


def test_given_urls_win_and_take_the_vhost(config: Path) -> None:
    assert broker_urls(("amqp://a:b@h1/", "amqp://a:b@h2/"), vhost="v") == (
        "amqp://a:b@h1/v",
        "amqp://a:b@h2/v",
    )


def test_a_profile_gives_its_urls_password_vhost_and_tls(config: Path) -> None:
    urls = broker_urls((), profile="prod")
    assert urls == (
        "amqps://ops:s%2Fcret@mq1.internal:5671/payments?cafile=%2Fetc%2Frr%2Fca.pem",
        "amqps://ops:s%2Fcret@mq2.internal:5671/payments?cafile=%2Fetc%2Frr%2Fca.pem",
    )


def test_the_environment_then_the_default_profile(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert broker_urls(()) == ("amqp://guest:guest@localhost:5672/",)  # the file's default
    monkeypatch.setenv("RR_BROKER", "prod")
    assert broker_urls(())[0].startswith("amqps://ops:")
    monkeypatch.setenv("RR_URL", "amqp://x:y@h1/ amqp://x:y@h2/")
    monkeypatch.delenv("RR_BROKER")
    assert broker_urls(()) == ("amqp://x:y@h1/", "amqp://x:y@h2/")


def test_without_anything_the_local_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("", encoding="utf-8")
    monkeypatch.setenv("RR_CONFIG", str(empty))
    monkeypatch.delenv("RR_URL", raising=False)
    monkeypatch.delenv("RR_BROKER", raising=False)
    assert broker_urls(()) == (DEFAULT_URL,)


def test_an_unknown_profile_or_a_bad_url_is_refused(config: Path) -> None:
    with pytest.raises(UsageError, match="no such broker"):
        broker_urls((), profile="nope")
    with pytest.raises(UsageError):
        broker_urls(("ftp://h/",))
