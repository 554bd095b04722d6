"""Shared fixtures. Broker tests take ``amqp_url``: skipped without a broker, failed in CI."""

from __future__ import annotations

import pytest

from tests.shared_node import chosen_versions, current, require_broker


@pytest.fixture(params=chosen_versions())
def amqp_url(request: pytest.FixtureRequest) -> str:
    """The broker URL for broker tests: each runs on every server of ``RR_TEST_BROKERS``
    (RabbitMQ 3.10 and 4.0 by default; tests/shared_node.py), whose node becomes the one
    ``ctl_command`` addresses.

    Skips the test when no broker answers there, but fails it when ``CI=true``: CI must
    never pass by skipping the broker tests.
    """
    return require_broker(request.param).url


@pytest.fixture
def broker_version(amqp_url: str) -> str:
    """The release line of the server the test talks to: ``3.10`` or ``4.0``."""
    return current().version
