"""Which AMQP client rr's commands connect with: aiormq (``transport/amqp.py``) or rr's own
(``transport/native.py``), both adapters of the same port.

``RR_AMQP_CLIENT`` chooses (docs/reference/runtime.md, "Speed"):

``native`` (or unset)
    rr's own client, the default: the same URLs, errors and behaviour as aiormq's adapter,
    fewer steps per message.
``aiormq``
    the aiormq adapter: the way back, should rr's own client misbehave somewhere. aiormq is
    not part of the default install: ``pip install 'rabbitctl-retry[aiormq]'`` adds it;
    without it this choice is a usage error that says so.

:func:`choose` is the pure decision; :func:`connect` carries it out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from rabbitctl_retry.errors import UsageError
from rabbitctl_retry.transport.base import Connection

ENV = "RR_AMQP_CLIENT"
"""The environment variable that chooses the client."""

AIORMQ_MODULES = ("aiormq", "yarl")
"""What the aiormq adapter imports that the default install does not hold."""
AIORMQ_MISSING = (
    f"{ENV}=aiormq needs aiormq, which is not installed: pip install 'rabbitctl-retry[aiormq]', "
    f"or unset {ENV} for rr's own client (rr docs runtime 'Running it')"
)

ClientName = Literal["aiormq", "native"]
CHOICES: tuple[ClientName, ...] = ("aiormq", "native")


def choose(setting: str | None) -> ClientName:
    """The client for ``setting`` (``RR_AMQP_CLIENT``'s value, ``None`` when unset)."""
    wanted = (setting or "").strip().lower() or "native"
    if wanted == "native":
        return "native"
    if wanted == "aiormq":
        return "aiormq"
    raise UsageError(
        f"{ENV}={setting!r} is not a client rr knows: use aiormq or native "
        "(rr docs runtime 'Running it')"
    )


async def connect(
    url: str,
    *,
    timeout_s: float = 5.0,
    client_name: str = "rr",
    environ: Mapping[str, str] | None = None,
) -> Connection:
    """A connection to ``url`` through the client ``RR_AMQP_CLIENT`` chooses."""
    setting = (os.environ if environ is None else environ).get(ENV)
    if choose(setting) == "native":
        from rabbitctl_retry.transport import native

        return await native.connect(url, timeout_s=timeout_s, client_name=client_name)
    try:
        from rabbitctl_retry.transport import amqp
    except ModuleNotFoundError as missing:
        if missing.name not in AIORMQ_MODULES:
            raise
        raise UsageError(AIORMQ_MISSING) from None
    return await amqp.connect(url, timeout_s=timeout_s, client_name=client_name)
