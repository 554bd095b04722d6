"""The ``backend`` fixture of the runtime tests: each publish test runs on RabbitMQ (a fresh
vhost, every server) and on the emulator."""

from __future__ import annotations

from tests.runtime.conftest import backend

__all__ = ["backend"]
