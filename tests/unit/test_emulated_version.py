"""The release a test asks the emulator for (``TestBroker(server_version=...)``, the pytest
plugin's ``rr_server_version``): a RabbitMQ version from 3.10 on, or a ValueError naming the
releases the emulator is proven against, never a silent 0.0.0 (docs/reference/testing.md)."""

from __future__ import annotations

import pytest

from rabbitctl_retry.emulator.emulator import emulated_version
from rabbitctl_retry.server import ServerVersion
from rabbitctl_retry.testing import TestBroker


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("4.0.5", ServerVersion(4, 0, 5)),
        ("3.10.8", ServerVersion(3, 10, 8)),
        ("3.10.0", ServerVersion(3, 10, 0)),
        ("4.3", ServerVersion(4, 3, 0)),
        (" 3.13.7 ", ServerVersion(3, 13, 7)),
    ],
)
def test_a_version_is_read(text: str, version: ServerVersion) -> None:
    assert emulated_version(text) == version


@pytest.mark.parametrize("text", ["banana", "4", "", "4.0.5-rc1", "v4.0.5", "4..5"])
def test_what_is_no_version_is_refused_naming_the_known_ones(text: str) -> None:
    with pytest.raises(
        ValueError, match=r"is not a RabbitMQ version: give one of 3\.10\.8, 4\.0\.5, 4\.3\.6"
    ):
        emulated_version(text)


def test_a_release_before_3_10_is_refused() -> None:
    with pytest.raises(ValueError, match=r"models RabbitMQ from 3\.10 on"):
        emulated_version("3.9.29")


def test_test_broker_refuses_an_unknown_version() -> None:
    with pytest.raises(ValueError, match="'banana' is not a RabbitMQ version"):
        TestBroker(server_version="banana")
    assert TestBroker(server_version="4.3.6").emulator.server_version == ServerVersion(4, 3, 6)
