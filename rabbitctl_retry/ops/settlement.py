"""Pure. Which settlement frames a channel may send now, in the order it must send them.

Handlers finish out of order, but a channel's settlement frames must reach the broker in an
order it accepts. ``basic.ack(tag, multiple=true)`` acknowledges *every* delivery up to
``tag`` that is still unacknowledged on the channel; a frame naming a tag that is no longer
unacknowledged ("unknown delivery tag") closes the channel with 406 PRECONDITION_FAILED,
and with it every delivery in flight. So, per channel:

* a delivery is recorded when it arrives (tags grow on a channel) and *decided* when its
  handler is done: ack, or reject with or without requeue, or given back unhandled
  (``basic.nack`` with requeue: a delivery for a consumer the broker cancelled). *Every*
  delivery of the channel must be recorded: a multiple ack covers every lower tag, so one
  the window never saw would be acked unhandled (lost);
* :meth:`SettleWindow.frames` pops what may be sent now, as one ordered list: the rejects
  (and give-backs) of the settled prefix (the contiguous run of decided deliveries from the
  oldest), then one ``basic.ack(multiple=true)`` for the last acked delivery of that prefix
  — every lower delivery still unacknowledged on the wire is an ack of the same prefix, so
  the multiple ack settles exactly those; then, beyond the first undecided delivery, the
  rejects (sent one by one, at once: a requeue should not wait), and, with ``singles``, the
  acks one by one (``multiple=false``), so that a slow handler at the head does not hold
  back every ack behind it and, with them, the prefetch window;
* a popped frame counts as sent. The caller must write the frames of one call, and of
  successive calls, in exactly this order, from one place (see ``ops/settler.py``);
  then every frame names a delivery that is unacknowledged when the broker reads it.

A delivery is decided at most once: the first decision wins, later ones are refused (the
caller's catch-all settles a delivery only if nothing else did).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

_ACK = 0
_REQUEUE = 1
_DROP = 2
_GIVE_BACK = 3


@dataclass(frozen=True, slots=True)
class AckFrame:
    """``basic.ack(tag, multiple)``."""

    tag: int
    multiple: bool = False


@dataclass(frozen=True, slots=True)
class RejectFrame:
    """``basic.reject(tag, requeue)``."""

    tag: int
    requeue: bool


@dataclass(frozen=True, slots=True)
class NackFrame:
    """``basic.nack(tag, multiple=false, requeue=true)``: a delivery given back unhandled,
    which RabbitMQ 4.3 does not count toward a quorum delivery limit (a reject would)."""

    tag: int


SettleFrame = AckFrame | RejectFrame | NackFrame


class SettleWindow:
    """The undecided and decided-but-unsent deliveries of one channel, in delivery order."""

    __slots__ = ("_loose_acks", "_loose_rejects", "_unsent")

    def __init__(self) -> None:
        self._unsent: OrderedDict[int, int | None] = OrderedDict()
        """Delivered tags whose frame is not sent yet, oldest first -> their decision
        (``_ACK``, ``_REQUEUE``, ``_DROP``) or ``None`` while undecided."""
        self._loose_acks = 0
        """Acks decided and not yet sent."""
        self._loose_rejects = 0
        """Rejects decided and not yet sent."""

    def delivered(self, tag: int) -> None:
        """A delivery arrived. Tags must be recorded in the order the broker gave them."""
        self._unsent[tag] = None

    def ack(self, tag: int) -> bool:
        """Decide to ack ``tag``; ``False`` if it is unknown or already decided."""
        return self._decide(tag, _ACK)

    def reject(self, tag: int, *, requeue: bool) -> bool:
        """Decide to reject ``tag``; ``False`` if it is unknown or already decided."""
        return self._decide(tag, _REQUEUE if requeue else _DROP)

    def give_back(self, tag: int) -> bool:
        """Decide to give ``tag`` back unhandled and uncounted (:class:`NackFrame`); ``False``
        if it is unknown or already decided."""
        return self._decide(tag, _GIVE_BACK)

    def _decide(self, tag: int, decision: int) -> bool:
        if tag not in self._unsent or self._unsent[tag] is not None:
            return False
        self._unsent[tag] = decision
        if decision == _ACK:
            self._loose_acks += 1
        else:
            self._loose_rejects += 1
        return True

    def is_open(self, tag: int) -> bool:
        """``tag`` was delivered and is not decided yet."""
        return tag in self._unsent and self._unsent[tag] is None

    def open_tags(self) -> list[int]:
        """Every delivered tag not decided yet, in delivery order."""
        return [tag for tag, decision in self._unsent.items() if decision is None]

    @property
    def pending_acks(self) -> int:
        """Acks decided but not sent yet."""
        return self._loose_acks

    @property
    def unsent(self) -> int:
        """Decisions not sent yet."""
        return self._loose_acks + self._loose_rejects

    def frames(self, *, singles: bool = False) -> list[SettleFrame]:
        """Pop every frame that may be sent now, in the order to send them (module doc)."""
        out: list[SettleFrame] = []
        unsent = self._unsent
        last_ack: int | None = None
        while unsent:
            head = next(iter(unsent))
            decision = unsent[head]
            if decision is None:
                break
            unsent.popitem(last=False)
            if decision == _ACK:
                last_ack = head
                self._loose_acks -= 1
            else:
                out.append(_returning_frame(head, decision))
                self._loose_rejects -= 1
        if last_ack is not None:
            out.append(AckFrame(last_ack, multiple=True))
        if unsent and (self._loose_rejects or (singles and self._loose_acks)):
            self._pop_loose(out, singles)
        return out

    def _pop_loose(self, out: list[SettleFrame], singles: bool) -> None:
        """Decided deliveries behind an undecided one: rejects, and with ``singles`` acks."""
        unsent = self._unsent
        for tag, decision in list(unsent.items()):
            if decision is None or (decision == _ACK and not singles):
                continue
            del unsent[tag]
            if decision == _ACK:
                out.append(AckFrame(tag))
                self._loose_acks -= 1
            else:
                out.append(_returning_frame(tag, decision))
                self._loose_rejects -= 1

    def forget(self) -> int:
        """The channel closed: every unsettled delivery went back to its queue; how many."""
        given_back = len(self._unsent)
        self._unsent.clear()
        self._loose_acks = 0
        self._loose_rejects = 0
        return given_back

    def __len__(self) -> int:
        """Deliveries not sent yet (undecided or decided)."""
        return len(self._unsent)


def _returning_frame(tag: int, decision: int) -> SettleFrame:
    """The frame of a decision other than an ack."""
    if decision == _GIVE_BACK:
        return NackFrame(tag)
    return RejectFrame(tag, decision == _REQUEUE)
