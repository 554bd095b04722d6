"""Hypothesis strategies for what an AMQP header can hold: every field type rr's transport
carries, numbers of any signed 64-bit size and digits that ``str.isdigit()`` accepts but
``int()`` refuses, nested tables and arrays (the hostile property tests)."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import strategies as st

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
DIGITS = st.text(alphabet="0123456789 ²\u0663\u06f3\u07c3\u0967\u0966", min_size=1, max_size=12)
"""Digits, and what str.isdigit() calls digits: superscript two, Arabic-Indic, Extended
Arabic-Indic, NKo and Devanagari digits."""
TIMES = st.datetimes(
    min_value=datetime.datetime(1970, 1, 1), max_value=datetime.datetime(2100, 1, 1)
).map(lambda moment: moment.replace(microsecond=0, tzinfo=datetime.UTC))


def field_values(*, decimals: bool) -> st.SearchStrategy[Any]:
    """Any header value, nested a few levels. ``decimals``: include ``Decimal`` (pamqp encodes
    it; rr's transport and emulator take only the types of ``FieldValue``)."""
    scalars: list[st.SearchStrategy[Any]] = [
        st.none(),
        st.booleans(),
        INT64,
        # RabbitMQ 3.10 closes the connection (541 INTERNAL_ERROR) on a header float that is
        # not finite: no message can hold one
        st.floats(allow_nan=False, allow_infinity=False),
        DIGITS,
        st.text(max_size=12),
        st.binary(max_size=12),
        TIMES,
    ]
    if decimals:
        scalars.append(st.decimals(min_value=-(10**5), max_value=10**5, places=3))
    return st.recursive(
        st.one_of(scalars),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=3),
        ),
        max_leaves=6,
    )
