"""States for ``rr simulate --state`` (docs/how-to/test-a-service.md, "Testing handlers"): a fake
processor in place of the one ``open_clients`` would open.

    rr simulate examples/refunds/topology.toml examples/refunds/service.py \\
      --publish 'refunds={"id": 1, "card": "4111"}' --state examples/refunds/fakes.py:busy_once
"""

from __future__ import annotations

from service import Clients, Processor, Refusal


def busy_once() -> Clients:
    """Card 4111 finds the processor busy once, then is paid."""
    return Clients(processor=Processor(script={"4111": [Refusal.BUSY, None]}))
