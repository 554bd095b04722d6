"""Pure. What a RabbitMQ server's version means for a topology (``rr doctor``, docs/cli.md).

:func:`examine` takes what ``rr doctor`` read from the server (:class:`ServerFacts`) and,
optionally, the expansion of a topology file, and returns findings: ``info`` (how this server
behaves, worth knowing) or ``unsafe`` (the topology would lose or refuse something on this
server). ``rr doctor`` exits 1 when any finding is unsafe.

What changes between the versions rr supports (each cited from the RabbitMQ release notes):

* 3.13: dead letters carry ``x-last-death-queue/-reason/-exchange`` beside
  ``x-first-death-*``.
* 4.0: a quorum queue declared without ``x-delivery-limit`` gets a limit of 20: a message
  returned 20 times (``basic.reject``/``nack`` with requeue, a consumer or channel that went
  away, ``rr dlq inspect`` taking and giving back) is dead-lettered, or dropped when the queue
  has no dead-letter route. Transient (non-durable) non-exclusive queues are refused.
* 4.3: only ``basic.reject`` counts toward a quorum delivery limit, not
  ``basic.nack(requeue=true)`` (rr retries with ``basic.reject``, so its counts hold on every
  version).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rabbitctl_retry.topology.expand import Desired, QueueEntity
from rabbitctl_retry.transport.base import ServerVersion

QUORUM_DEFAULT_DELIVERY_LIMIT = 20


class Level(StrEnum):
    INFO = "info"
    UNSAFE = "unsafe"


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """What ``rr doctor`` read from the server."""

    version: ServerVersion
    product: str = "RabbitMQ"
    url: str | None = None
    """The URL of the node rr reached (the first of several that answered), password
    censored."""
    delayed_message_plugin: bool | None = None
    """Whether the ``x-delayed-message`` exchange type exists (``None``: not probed)."""


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    """Stable identifier for scripts: ``quorum-default-delivery-limit``, ..."""
    level: Level
    message: str
    queue: str | None = None


def _at_least(version: ServerVersion, major: int, minor: int) -> bool:
    return (version.major, version.minor) >= (major, minor)


def server_findings(facts: ServerFacts) -> list[Finding]:
    """How this server behaves where versions differ (no topology needed)."""
    version = facts.version
    findings = [
        Finding(
            "server-version",
            Level.INFO,
            f"{facts.product} {version}",
        )
    ]
    if _at_least(version, 3, 13):
        findings.append(
            Finding(
                "last-death-headers",
                Level.INFO,
                "dead letters carry x-last-death-queue/-reason/-exchange beside x-first-death-*",
            )
        )
    if version.major >= 4:
        findings.append(
            Finding(
                "quorum-default-delivery-limit",
                Level.INFO,
                f"quorum queues declared without x-delivery-limit get "
                f"{QUORUM_DEFAULT_DELIVERY_LIMIT}: a message returned that often is "
                "dead-lettered, or dropped without a dead-letter route",
            )
        )
        findings.append(
            Finding(
                "transient-queues-deprecated",
                Level.INFO,
                "transient (non-durable) non-exclusive queues are a deprecated feature "
                "(transient_nonexcl_queues): permitted by default on 4.0 to 4.3, refused where "
                "the operator denies it (rabbitmqctl list_deprecated_features tells; AMQP "
                "does not)",
            )
        )
    counted = (
        "basic.reject counts toward a quorum delivery limit, basic.nack(requeue=true) does not"
        if _at_least(version, 4, 3)
        else "basic.reject and basic.nack(requeue=true) both count toward a quorum delivery limit"
    )
    findings.append(Finding("quorum-return-counting", Level.INFO, f"{counted}; rr uses reject"))
    if facts.delayed_message_plugin is not None:
        findings.append(
            Finding(
                "delayed-message-plugin",
                Level.INFO,
                "the delayed-message exchange plugin is "
                + ("enabled" if facts.delayed_message_plugin else "not enabled"),
            )
        )
    return findings


def _quorum(queue: QueueEntity) -> bool:
    return queue.arguments.get("x-queue-type") == "quorum"


def _has_dead_letter_route(queue: QueueEntity) -> bool:
    return "x-dead-letter-exchange" in queue.arguments


def topology_findings(desired: Desired, facts: ServerFacts) -> list[Finding]:
    """What this server does to the topology's queues where versions differ."""
    version = facts.version
    findings: list[Finding] = []
    for queue in desired.queues:
        if version.major >= 4 and not queue.durable:
            findings.append(
                Finding(
                    "transient-queue",
                    Level.INFO,
                    f"{queue.name!r} is transient (durable = false): a deprecated feature on "
                    f"RabbitMQ {version}, refused where the operator denies it; make it "
                    "durable",
                    queue.name,
                )
            )
        if version.major >= 4 and _quorum(queue) and "x-delivery-limit" not in queue.arguments:
            if _has_dead_letter_route(queue):
                findings.append(
                    Finding(
                        "quorum-default-limit",
                        Level.INFO,
                        f"{queue.name!r} gets x-delivery-limit = "
                        f"{QUORUM_DEFAULT_DELIVERY_LIMIT}: a message returned "
                        f"{QUORUM_DEFAULT_DELIVERY_LIMIT} times goes to its dead-letter route",
                        queue.name,
                    )
                )
            else:
                findings.append(
                    Finding(
                        "quorum-default-limit-drops",
                        Level.UNSAFE,
                        f"{queue.name!r} is a quorum queue without a dead-letter route: on "
                        f"RabbitMQ {version} it gets x-delivery-limit = "
                        f"{QUORUM_DEFAULT_DELIVERY_LIMIT}, so a message returned "
                        f"{QUORUM_DEFAULT_DELIVERY_LIMIT} times is dropped (each rr dlq "
                        "inspect returns what it reads). Give it a dead_letter of its own, "
                        "or choose its limit with delivery_limit",
                        queue.name,
                    )
                )
    for exchange in desired.exchanges:
        if exchange.type == "x-delayed-message" and facts.delayed_message_plugin is False:
            findings.append(
                Finding(
                    "delayed-message-plugin-missing",
                    Level.UNSAFE,
                    f"{exchange.name!r} needs the delayed-message exchange plugin, which this "
                    "server does not have",
                )
            )
    return findings


def examine(desired: Desired | None, facts: ServerFacts) -> list[Finding]:
    """Every finding; ``desired`` is the topology's expansion, when one was given."""
    findings = server_findings(facts)
    if desired is not None:
        findings.extend(topology_findings(desired, facts))
    return findings


def safe(findings: list[Finding]) -> bool:
    return all(finding.level is not Level.UNSAFE for finding in findings)
