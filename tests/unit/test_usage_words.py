"""Pure: click's and the validators' messages in rr's words (cli/group.py in_rrs_words; issue
#29: no "Input should be", no "Value error", no literal tab in a one-line error)."""

from __future__ import annotations

import pytest

from rabbitctl_retry.cli.group import in_rrs_words


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "Invalid value for '--limit' / '-n': Input should be greater than or equal to 1",
            "--limit must be at least 1",
        ),
        (
            "Invalid value for '--watch': Input should be greater than or equal to 0.5",
            "--watch must be at least 0.5",
        ),
        (
            "Invalid value for '--prefetch': Input should be less than or equal to 65535",
            "--prefetch must be at most 65535",
        ),
        (
            "Invalid value for '--port': Input should be a valid integer, unable to parse string",
            "--port must be a whole number",
        ),
        (
            "Invalid value for '--output' / '-o': Value error, 'yaml' is not one of 'table', "
            "'json', 'jsonl'.",
            "--output 'yaml': choose table, json or jsonl",
        ),
        (
            "Missing argument 'SHELL'. Choose from:\n\tbash,\n\tzsh,\n\tfish",
            "Missing argument 'SHELL': choose bash, zsh or fish",
        ),
        ("No such option: --colour", "No such option: --colour"),
        ("Invalid value for 'X': something else", "X: something else"),
    ],
)
def test_messages_in_rrs_words(text: str, words: str) -> None:
    assert in_rrs_words(text) == words
