"""Pure. Which acks may be coalesced into one ``basic.ack(multiple=true)``.

Handlers finish out of order, and ``basic.ack(tag, multiple=true)`` acknowledges *every*
unacknowledged delivery up to ``tag`` on the channel. So a multiple ack is only safe up to the
contiguous prefix of deliveries that are all settled: acked ones are folded into the multiple
ack, rejected ones were already sent on their own (and are no longer unacknowledged, so the
multiple ack does not touch them).

A slow handler at the head would hold back every ack behind it and, with them, the prefetch
window; :meth:`AckWindow.take_singles` lets the caller ack those one by one instead.
"""

from __future__ import annotations

from collections import deque


class AckWindow:
    """Delivery tags of one channel, in delivery order, and which are settled."""

    __slots__ = ("_acked", "_order", "_pending_ack", "_sent")

    def __init__(self) -> None:
        self._order: deque[int] = deque()
        self._acked: set[int] = set()
        self._sent: set[int] = set()
        self._pending_ack = 0

    def delivered(self, tag: int) -> None:
        """A delivery arrived (tags grow on a channel)."""
        self._order.append(tag)

    def acked(self, tag: int) -> None:
        """Its handler is done and it should be acked (the ack is not sent yet)."""
        self._acked.add(tag)
        self._pending_ack += 1

    def rejected(self, tag: int) -> None:
        """It was rejected (that frame is sent on its own, at once)."""
        self._sent.add(tag)

    @property
    def pending_acks(self) -> int:
        """Acks decided but not yet sent."""
        return self._pending_ack

    def take(self) -> int | None:
        """The tag to send ``basic.ack(tag, multiple=true)`` for now, or ``None``.

        Pops the settled prefix; the returned tag is the last acked delivery in it.
        """
        last_acked: int | None = None
        order = self._order
        while order:
            head = order[0]
            if head in self._acked:
                self._acked.discard(head)
                self._pending_ack -= 1
                last_acked = head
            elif head in self._sent:
                self._sent.discard(head)
            else:
                break
            order.popleft()
        return last_acked

    def take_singles(self) -> list[int]:
        """Every acked tag not yet sent, to ack one by one (``multiple=false``); they then
        count as sent, so a later multiple ack steps over them."""
        singles = sorted(self._acked)
        self._sent.update(singles)
        self._acked.clear()
        self._pending_ack = 0
        return singles

    def forget(self) -> None:
        """The channel closed: every unsettled delivery went back to its queue."""
        self._order.clear()
        self._acked.clear()
        self._sent.clear()
        self._pending_ack = 0

    def __len__(self) -> int:
        return len(self._order)
