"""The runtime suites' ``backend`` fixture (tests/runtime/conftest.py): each test runs on the
emulator and on each RabbitMQ server."""

from tests.runtime.conftest import backend

__all__ = ["backend"]
