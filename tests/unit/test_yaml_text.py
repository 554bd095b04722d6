"""asyncapi/yaml_text.py: any JSON-shaped data written as YAML is read back by PyYAML as the
same data, the strings a YAML reader would take for something else included."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rabbitctl_retry.asyncapi.yaml_text import yaml_text

TRICKY = [
    "yes", "No", "ON", "off", "y", "n", "true", "False", "null", "Null", "~", "", " ",
    "1e3", "1E3", "0x1F", "0o17", "017", "1_000", "1:20", "2001-12-14", ".inf", "-.inf",
    ".nan", "-", "- a", "a: b", ": ", "a:b", "#", "a #b", "a#b", " lead", "trail ", "a\nb",
    "\n", "a\tb", "é", "日本語", "\u202e", "\u2028", "\x85", "\x00", "\x1b[31m", "\ufeff",
    "'", '"', "\\", "{a}", "[a]", "&a", "*a", "!a", "|", ">", "%a", "@a", "`a", "<<", "=",
    "?", "? a", "a,b", "$ref", "#/components/schemas/X", "application/json", "x" * 2000,
]  # fmt: skip

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.sampled_from(TRICKY)
)
json_data = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text() | st.sampled_from(TRICKY), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(json_data)
def test_yaml_reads_back_as_the_same_data(value: Any) -> None:
    assert yaml.safe_load(yaml_text(value)) == value


@pytest.mark.parametrize("text", TRICKY)
def test_each_tricky_string_as_a_value_and_as_a_key(text: str) -> None:
    document = {text: [text, {text: text}]}
    assert yaml.safe_load(yaml_text(document)) == document


def test_what_it_writes() -> None:
    document = {
        "asyncapi": "3.0.0",
        "channels": {"refunds.dead": {"address": "refunds.dead", "messages": {}}},
        "x": [1, 2.5, 1e16, None, True, "yes", [], [[1]]],
        "$ref": "#/channels/a",
    }
    assert yaml_text(document) == (
        'asyncapi: "3.0.0"\n'
        "channels:\n"
        "  refunds.dead:\n"
        "    address: refunds.dead\n"
        "    messages: {}\n"
        "x:\n"
        "  - 1\n"
        "  - 2.5\n"
        "  - 1.0e+16\n"
        "  - null\n"
        "  - true\n"
        '  - "yes"\n'
        "  - []\n"
        "  - - - 1\n"
        '$ref: "#/channels/a"\n'
    )


def test_nothing_a_terminal_acts_on_is_written_as_it_is() -> None:
    text = yaml_text({"a": "\x1b[31m\u202e\u2028\x85\r"})
    assert text == 'a: "\\u001b[31m\\u202e\\u2028\\u0085\\u000d"\n'
    assert text.isascii()


def test_not_json_is_refused() -> None:
    with pytest.raises(ValueError, match="not a JSON number"):
        yaml_text({"a": float("nan")})
    with pytest.raises(TypeError, match="string"):
        yaml_text({1: "a"})
    with pytest.raises(TypeError, match="JSON-shaped"):
        yaml_text({"a": b"x"})
