"""Topologies several test packages use, written once."""

from __future__ import annotations

REFUNDS_AND_PAYOUTS = """
[queues.refunds]
max_attempts = 3
dead_letter = "refunds.dead"

[queues.payouts]
type = "quorum"
max_attempts = 3
dead_letter = "payouts.dead"
"""
"""The guide's classic and quorum queues, 3 attempts each, each with its dead-letter queue."""

GUIDE = """
[queues.refunds]
max_attempts = 5
dead_letter = "refunds.dead"
delay = "dlx-ttl"

[queues.payouts]
type = "quorum"
max_attempts = 5
dead_letter = "payouts.dead"
"""
"""The retries guide's refunds (classic, delayed retries through a TTL queue) and payouts
(quorum), 5 attempts each, each with its dead-letter queue."""
