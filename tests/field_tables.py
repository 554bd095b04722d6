"""Hypothesis strategies for AMQP field tables as bytes: every type RabbitMQ takes, with any
bytes a value of it may hold, nested tables and arrays (tests of rr's codec and of the export
format, which must give each back byte for byte)."""

from __future__ import annotations

import struct

from hypothesis import strategies as st

_FIXED = {
    "t": st.sampled_from([b"\x00", b"\x01"]),
    "b": st.binary(min_size=1, max_size=1),
    "B": st.binary(min_size=1, max_size=1),
    "s": st.binary(min_size=2, max_size=2),
    "u": st.binary(min_size=2, max_size=2),
    "I": st.binary(min_size=4, max_size=4),
    "i": st.binary(min_size=4, max_size=4),
    "l": st.binary(min_size=8, max_size=8),
    "L": st.binary(min_size=8, max_size=8),
    "f": st.floats(width=32, allow_nan=False).map(lambda x: struct.pack(">f", x)),
    "d": st.floats(allow_nan=False).map(lambda x: struct.pack(">d", x)),
    "D": st.binary(min_size=5, max_size=5),
    "T": st.integers(0, 253_402_300_799).map(lambda x: struct.pack(">Q", x)),
    "V": st.just(b""),
}


def _sized(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


_SCALARS = st.one_of(
    *(value.map(lambda data, tag=tag: tag.encode() + data) for tag, value in _FIXED.items()),
    st.binary(max_size=8).map(lambda data: b"S" + _sized(data)),
    st.binary(max_size=8).map(lambda data: b"x" + _sized(data)),
)
_NAMES = st.text(min_size=1, max_size=6).filter(lambda name: len(name.encode()) < 256)


def _tables(values: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return st.dictionaries(_NAMES, values, max_size=4).map(
        lambda table: b"".join(bytes((len(k.encode()),)) + k.encode() + v for k, v in table.items())
    )


_VALUES: st.SearchStrategy[bytes] = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        _tables(inner).map(lambda data: b"F" + _sized(data)),
        st.lists(inner, max_size=3).map(lambda items: b"A" + _sized(b"".join(items))),
    ),
    max_leaves=8,
)


def raw_tables() -> st.SearchStrategy[bytes]:
    """A table's fields (without the length in front): names of 1 to 6 characters, values of
    any type, nested a few levels."""
    return _tables(_VALUES)
