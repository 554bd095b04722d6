"""The ``backend`` fixture: each hostile-input test that needs a broker runs on RabbitMQ (a
fresh vhost) and on the emulator."""

from __future__ import annotations

from tests.runtime.conftest import backend

__all__ = ["backend"]
