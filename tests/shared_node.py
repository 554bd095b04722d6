"""The shared RabbitMQ node the broker tests use, addressed explicitly in every rabbitmqctl
call (``RR_TEST_NODE``, default ``rabbit@localhost``): the fault suite runs nodes of its own
on the same machine, and a bare ``rabbitmqctl`` must never reach the wrong one."""

from __future__ import annotations

import os

SHARED_NODE = os.environ.get("RR_TEST_NODE", "rabbit@localhost")


def ctl_command(*args: str) -> list[str]:
    """``rabbitmqctl -n SHARED_NODE ARGS...``."""
    return ["rabbitmqctl", "-n", SHARED_NODE, *args]
