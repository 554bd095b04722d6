"""rr's configuration file (``profiles.py``, docs/reference/cli.md "Profiles"): what a file means,
what it refuses, and the URLs a profile connects with, as tables."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from rabbitctl_retry.errors import ConfigError
from rabbitctl_retry.profiles import (
    Profile,
    Tls,
    parse_config,
    profile_management_url,
    profile_urls,
    with_vhost,
)

FULL = """
default = "prod"

[brokers.prod]
url = ["amqps://ops@mq1.internal:5671/", "amqps://ops@mq2.internal/shop?heartbeat=5"]
management_url = "https://ops@mq1.internal:15671/"
vhost = "payments/eu"
password_env = "RR_PROD_PASSWORD"

[brokers.prod.tls]
ca_file = "/etc/rr/ca file.pem"
cert_file = "/etc/rr/client.pem"
key_file = "/etc/rr/client.key"

[brokers.local]
url = "amqp://guest:guest@localhost:5672/"
"""


def test_a_full_file_reads_as_its_profiles() -> None:
    config = parse_config(tomllib.loads(FULL))

    assert config.default == "prod"
    assert sorted(config.profiles) == ["local", "prod"]
    assert config.profiles["prod"] == Profile(
        name="prod",
        urls=("amqps://ops@mq1.internal:5671/", "amqps://ops@mq2.internal/shop?heartbeat=5"),
        management_url="https://ops@mq1.internal:15671/",
        vhost="payments/eu",
        password_env="RR_PROD_PASSWORD",
        tls=Tls(
            ca_file="/etc/rr/ca file.pem",
            cert_file="/etc/rr/client.pem",
            key_file="/etc/rr/client.key",
        ),
    )
    assert config.profiles["local"].urls == ("amqp://guest:guest@localhost:5672/",)


def test_a_profile_connects_with_its_password_vhost_and_tls_files() -> None:
    prod = parse_config(tomllib.loads(FULL)).profiles["prod"]

    assert profile_urls(prod, password="p@ss/w rd%") == (
        "amqps://ops:p%40ss%2Fw%20rd%25@mq1.internal:5671/payments%2Feu"
        "?cafile=%2Fetc%2Frr%2Fca%20file.pem&certfile=%2Fetc%2Frr%2Fclient.pem"
        "&keyfile=%2Fetc%2Frr%2Fclient.key",
        "amqps://ops:p%40ss%2Fw%20rd%25@mq2.internal/payments%2Feu?heartbeat=5"
        "&cafile=%2Fetc%2Frr%2Fca%20file.pem&certfile=%2Fetc%2Frr%2Fclient.pem"
        "&keyfile=%2Fetc%2Frr%2Fclient.key",
    )
    assert profile_management_url(prod, password="p@ss") == "https://ops:p%40ss@mq1.internal:15671/"


def test_a_profile_without_a_password_source_keeps_its_urls() -> None:
    local = parse_config(tomllib.loads(FULL)).profiles["local"]

    assert profile_urls(local, password=None) == ("amqp://guest:guest@localhost:5672/",)
    assert profile_management_url(local, password=None) is None


def test_verify_false_is_no_verify_ssl() -> None:
    profile = Profile(name="t", urls=("amqps://h/",), tls=Tls(verify=False))

    assert profile_urls(profile, password=None) == ("amqps://h/?no_verify_ssl=1",)


@pytest.mark.parametrize(
    ("url", "vhost", "expected"),
    [
        ("amqp://u:p@h:5672/", "/", "amqp://u:p@h:5672/%2F"),
        ("amqp://u:p@h", "orders", "amqp://u:p@h/orders"),
        ("amqp://h/old?heartbeat=5", "new one", "amqp://h/new%20one?heartbeat=5"),
        ("amqp://[::1]:5672?name=x", "a/b", "amqp://[::1]:5672/a%2Fb?name=x"),
    ],
)
def test_with_vhost_sets_the_path_and_keeps_the_query(url: str, vhost: str, expected: str) -> None:
    assert with_vhost(url, vhost) == expected


@pytest.mark.parametrize(
    ("document", "path", "words"),
    [
        ({"brokers": {"p": {"url": "amqp://h/"}}, "defualt": "p"}, "defualt", "unknown key"),
        (
            {"brokers": {"p": {"url": "amqp://h/", "pasword_env": "X"}}},
            "brokers.p.pasword_env",
            "unknown key",
        ),
        ({"brokers": {"p": {}}}, "brokers.p.url", "must be a broker URL or a list"),
        ({"brokers": {"p": {"url": []}}}, "brokers.p.url", "must be a broker URL or a list"),
        ({"brokers": {"p": {"url": "http://h/"}}}, "brokers.p.url", "must start with amqp://"),
        (
            {"brokers": {"p": {"url": ["amqp://h/", "amqp://a@b@h/"]}}},
            "brokers.p.url[1]",
            "more than one '@'",
        ),
        (
            {"brokers": {"p": {"url": "amqp://h/", "management_url": "amqp://h/"}}},
            "brokers.p.management_url",
            "must start with http://",
        ),
        (
            {"brokers": {"p": {"url": "amqp://h/", "password_env": "A", "password_file": "f"}}},
            "brokers.p",
            "not both",
        ),
        (
            {"brokers": {"p": {"url": "amqp://h/", "vhost": ""}}},
            "brokers.p.vhost",
            "non-empty string",
        ),
        (
            {"brokers": {"p": {"url": "amqp://h/", "tls": {"verify": "no"}}}},
            "brokers.p.tls.verify",
            "true or false",
        ),
        (
            {"brokers": {"p": {"url": "amqp://h/", "tls": {"cafile": "x"}}}},
            "brokers.p.tls.cafile",
            "unknown key",
        ),
        (
            {"brokers": {"p": {"url": "amqp://h/"}}, "default": "q"},
            "default",
            "names no broker of this file (it has p)",
        ),
        ({"brokers": "p"}, "brokers", "must be a table"),
    ],
)
def test_what_a_file_may_not_say(document: dict[str, Any], path: str, words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(document)

    assert raised.value.path == path
    assert words in raised.value.detail


@pytest.mark.parametrize(
    ("profile", "password", "path", "words"),
    [
        (Profile(name="p", urls=("amqp://h/",)), "pw", "brokers.p.url", "names no user"),
        (Profile(name="p", urls=("amqp://u:x@h/",)), "pw", "brokers.p.url", "holds a password"),
        (
            Profile(name="p", urls=("amqp://u@h/", "amqp://u:x@h2/")),
            "pw",
            "brokers.p.url[1]",
            "holds a password",
        ),
        (
            Profile(name="p", urls=("amqp://h/",), tls=Tls(ca_file="c")),
            None,
            "brokers.p.tls",
            "need amqps://",
        ),
        (
            Profile(name="p", urls=("amqps://h/?cafile=a",), tls=Tls(ca_file="c")),
            None,
            "brokers.p.tls",
            "gives cafile in its query",
        ),
    ],
)
def test_what_a_profile_cannot_add(
    profile: Profile, password: str | None, path: str, words: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        profile_urls(profile, password=password)

    assert raised.value.path == path
    assert words in raised.value.detail


def test_the_example_of_docs_cli_md_is_a_valid_file() -> None:
    text = (Path(__file__).parents[2] / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    section = text[text.index("### Profiles") :]
    block = section[section.index("```toml\n") + len("```toml\n") : section.index("\n```\n")]

    config = parse_config(tomllib.loads(block))

    assert config.default == "local"
    prod = config.profiles["prod"]
    assert profile_urls(prod, password="pw") == (
        "amqps://ops:pw@mq1.internal:5671/payments?cafile=%2Fetc%2Frr%2Fca.pem"
        "&certfile=%2Fetc%2Frr%2Fclient.pem&keyfile=%2Fetc%2Frr%2Fclient.key",
        "amqps://ops:pw@mq2.internal:5671/payments?cafile=%2Fetc%2Frr%2Fca.pem"
        "&certfile=%2Fetc%2Frr%2Fclient.pem&keyfile=%2Fetc%2Frr%2Fclient.key",
    )
