"""A message copy: every copy rr publishes of a message it read, in one place.

* ``properties.py``: a copy's properties, by the one rule of ``retry/properties.py`` (which
  stays in the pure core, where ``dlq/`` reads the property names): a replayed, moved or
  imported copy's, and ``rr run``'s retry and dead-letter copies' (persistent, their own
  expiration);
* ``sent.py`` (pure): what became of a copy, the one vocabulary of every sender;
* ``sending.py``: the transfers' and the import's sender (``CopySender``: in order, paced,
  the first copy alone), and ``outcome_of``, the one classification of a publish;
* ``publisher.py``: ``rr run``'s sender (``CopyPublisher``: retry, dead-letter and delayed
  copies on the connection's confirm or fast channel).

What a copy's outcome means for its message is each caller's: the transfer
(``ops/transfer.py``), the import (``ops/dlq.py``), the consumer (``runtime/consumer.py``)
and the in-memory delays (``runtime/delays.py``).
"""
