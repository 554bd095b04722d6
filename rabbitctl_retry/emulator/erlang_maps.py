"""The order in which Erlang/OTP 25 (RabbitMQ 3.10's runtime) folds over a map whose keys are
small non-negative integers: RabbitMQ 3.10.8 gives back the messages of one basic.nack
(multiple, requeue) of a quorum queue with a delivery limit in that order (``maps:fold`` over
the consumer's message ids; docs/reference/testing.md, "What the emulator does — like the server").

* A map of up to 32 keys is a flat map: its keys in ascending order.
* A bigger map is a hash array mapped trie on a 32-bit hash of each key, 4 bits per level,
  lowest bits first: a fold visits the keys in the order of their hashes read 4 bits at a time
  from the lowest (the lowest 4 bits decide first). Keys whose 32-bit hashes are all equal go
  on with a second hash, salted with the depth, and so on.
* The hash is the runtime's internal hash of an immediate term (a small integer ``n`` is the
  64-bit word ``n << 4 | 0xF``): Bob Jenkins' 96-bit mix of ``HCONST`` plus the word's low and
  high 32 bits into ``salt ^ 3432918353``.

Checked against ``erl`` (OTP 25) for hundreds of key sets, colliding hashes included
(tests/emulator/test_erlang_maps.py), and against RabbitMQ 3.10.8 itself
(tests/contract/rabbitmq_suite/test_quorum_queue.py, ``requeue_multiple_true``).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["FLATMAP_MAX_KEYS", "fold_order", "internal_hash"]

FLATMAP_MAX_KEYS = 32
"""A map of more keys than this is a hash trie (the runtime's MAP_SMALL_MAP_LIMIT)."""

_MASK32 = 0xFFFF_FFFF
_HCONST = 0x9E37_79B9
"""The golden ratio, the mix's constant for immediate terms."""
_HCONST_22 = (_HCONST * 22) & _MASK32
"""The constant that salts a deeper level's hash with its depth."""
_INTERNAL_HASH_SALT = 3_432_918_353
_SMALL_LIMIT = 1 << 59
"""Integers from here are bignums on a 64-bit runtime, hashed another way (not modelled)."""
_LEVELS_PER_HASH = 8
"""4 bits a level: one 32-bit hash serves 8 levels of the trie."""


_MIX_SHIFTS = (13, -8, 13, 12, -16, 5, 3, -10, 15)
"""The nine steps of the mix, one word each in turn (a, b, c, a, ...): how far the step
shifts the word it mixes in last (right; negative: left)."""


def _mix(a: int, b: int, c: int) -> int:
    """Bob Jenkins' lookup2 mix of three 32-bit words; the third word after mixing. Each step
    is ``x -= y; x -= z; x ^= z shifted`` for the words x, y, z in turn (``a -= b; a -= c;
    a ^= c >> 13``, then ``b -= c; b -= a; b ^= a << 8``, ...)."""
    words = [a, b, c]
    for step, shift in enumerate(_MIX_SHIFTS):
        x, y, z = step % 3, (step + 1) % 3, (step + 2) % 3
        mixed = (words[x] - words[y] - words[z]) & _MASK32
        last = words[z]
        words[x] = mixed ^ (last >> shift if shift > 0 else (last << -shift) & _MASK32)
    return words[2]


def internal_hash(key: int, depth: int = 0) -> int:
    """The 32-bit hash a map gives the small integer ``key`` for levels ``8 * depth`` to
    ``8 * depth + 7`` of its trie."""
    if not 0 <= key < _SMALL_LIMIT:
        raise ValueError(f"not a small non-negative integer: {key}")
    salt = 0
    if depth > 0:
        salt = _mix((_HCONST_22 + depth) & _MASK32, (_HCONST_22 + 1) & _MASK32, 0)
    word = (key << 4) | 0xF
    low, high = word & _MASK32, word >> 32
    return _mix((_HCONST + low) & _MASK32, (_HCONST + high) & _MASK32, salt ^ _INTERNAL_HASH_SALT)


def _lowest_bits_first(hash_value: int) -> int:
    """``hash_value`` with its eight 4-bit groups in reverse order: sorting by it visits the
    trie's children in order, level by level."""
    reversed_value = 0
    for level in range(_LEVELS_PER_HASH):
        reversed_value = (reversed_value << 4) | ((hash_value >> (4 * level)) & 0xF)
    return reversed_value


def fold_order(keys: Iterable[int]) -> list[int]:
    """The distinct ``keys`` in the order ``maps:fold`` visits them on Erlang/OTP 25."""
    distinct = sorted(set(keys))
    if len(distinct) <= FLATMAP_MAX_KEYS:
        return distinct
    return sorted(distinct, key=_trie_position)


def _trie_position(key: int) -> tuple[int, ...]:
    """Where ``key`` sits in a trie, as a sort key: its hashes of depths 0 to 2 (96 bits; keys
    that share the first hash are told apart by the second, measured with ``erl``)."""
    return tuple(_lowest_bits_first(internal_hash(key, depth)) for depth in range(3))
