"""Pure. What ``rr dlq`` shows and what it replays where.

* ``origin``   — the queue a dead letter failed in, why, and when;
* ``filters``  — ``--where`` expressions;
* ``replay``   — the choice for one dead letter (replay where, skip, fail, stop) and the copy's
  headers;
* ``view``     — bodies and ``x-death`` as text;
* ``report``   — summaries, replay results, and the exit code of a replay;
* ``jsonl``    — the export file format, with type-preserving header values.

No sockets, clocks or randomness here: time and the run id come in as arguments, and the
shell (``ops/dlq.py``) carries the decisions out on a broker.
"""
