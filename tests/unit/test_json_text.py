"""json_text.py: a document whose arrays are streamed is written as json.dumps writes the same
values, escaped; nothing inside a value can forge or break the streaming."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rabbitctl_retry.json_text import StreamedArray, escape_unsafe, json_chunks, json_default

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
    st.sampled_from(["\x00", '"\\u0000', "\x00rr-streamed:0\x00", "\u202e", "\n", "[]"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def documents(draw: st.DrawFn) -> tuple[Any, Any]:
    """(document with streamed arrays, the same document with plain lists)."""
    items = draw(st.lists(values, max_size=5))
    streamed = StreamedArray(lambda: iter(items), len(items))
    others = draw(st.dictionaries(st.text(max_size=6), values, max_size=3))
    position = draw(st.sampled_from(["top", "nested", "in a list"]))
    if position == "top":
        return {**others, "results": streamed}, {**others, "results": items}
    if position == "nested":
        return {"a": {**others, "results": streamed}}, {"a": {**others, "results": items}}
    return [others, {"results": streamed}], [others, {"results": items}]


@given(documents())
def test_streamed_text_is_the_escaped_text_of_the_same_values(pair: tuple[Any, Any]) -> None:
    streamed, plain = pair
    text = "".join(json_chunks(streamed))
    assert text == escape_unsafe(json.dumps(plain, indent=2, ensure_ascii=False))
    assert json.loads(text) == plain


def test_items_are_made_as_they_are_written() -> None:
    made: list[int] = []

    def items() -> Any:
        for number in range(3):
            made.append(number)
            yield {"n": number}

    chunks = json_chunks({"results": StreamedArray(items, 3)})
    written = [next(chunks)]
    assert made == []
    written.append(next(chunks))
    assert made == [0]
    written.extend(chunks)
    assert made == [0, 1, 2]
    assert json.loads("".join(written)) == {"results": [{"n": 0}, {"n": 1}, {"n": 2}]}


def test_a_value_that_reads_like_a_placeholder_is_written_as_it_is() -> None:
    forged = "\x00rr-streamed:0\x00"
    document = {forged: forged, "results": StreamedArray(lambda: iter([{"id": forged}]), 1)}
    text = "".join(json_chunks(document))
    assert json.loads(text) == {forged: forged, "results": [{"id": forged}]}


def test_one_line_documents_hold_the_array_whole() -> None:
    document = {"results": StreamedArray(lambda: iter([1, 2]), 2), "at": object()}
    line = json.loads(json.dumps(document, default=json_default))
    assert line["results"] == [1, 2]
    assert line["at"].startswith("<object")


def test_a_streamed_array_equals_the_list_of_its_items() -> None:
    array = StreamedArray(lambda: iter([1, 2]), 2)
    assert array == [1, 2]
    assert array == [1, 2]
    assert array != [2, 1]
    assert len(array) == 2
