"""The contract suite can fail: an emulator with a wrong rule does not pass the topic scenario.

The wrong rule is one a hand-written matcher easily gets wrong: ``#`` matching one or more
words instead of zero or more. The expected result is the one RabbitMQ gives
(``test_topic_routing[rabbitmq]`` checks the same table against the real server).
"""

from __future__ import annotations

import pytest

from rabbitctl_retry.emulator import routing
from tests.contract.backends import EmulatorBackend
from tests.contract.test_routing import EXPECTED_TOPIC, observe_topic_routing


def hash_needs_a_word(pattern: tuple[str, ...], words: tuple[str, ...]) -> bool:
    """A topic matcher in which ``#`` matches one or more words (wrong: zero or more)."""
    if not pattern:
        return not words
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(hash_needs_a_word(rest, words[n:]) for n in range(1, len(words) + 1))
    if not words:
        return False
    return (head in ("*", words[0])) and hash_needs_a_word(rest, words[1:])


async def observe_on_a_fresh_emulator() -> dict[str, list[str]]:
    backend = EmulatorBackend()
    try:
        return await observe_topic_routing(backend)
    finally:
        await backend.close()


async def test_the_topic_scenario_catches_a_hash_that_needs_a_word(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await observe_on_a_fresh_emulator() == EXPECTED_TOPIC

    monkeypatch.setattr(routing, "_match_words", hash_needs_a_word)
    assert not routing.topic_matches("a.#", "a")  # the wrong rule is in force
    wrong = await observe_on_a_fresh_emulator()

    assert wrong != EXPECTED_TOPIC
    missing = {
        pattern: [key for key in keys if key not in wrong[pattern]]
        for pattern, keys in EXPECTED_TOPIC.items()
    }
    extra = {
        pattern: [key for key in keys if key not in EXPECTED_TOPIC[pattern]]
        for pattern, keys in wrong.items()
    }
    # exactly the keys that need '#' to match zero words go missing, and nothing else changes
    assert {pattern: keys for pattern, keys in missing.items() if keys} == {
        "a.#": ["a"],
        "#.b": ["b"],
        "a.#.c": ["a.c"],
        "#": [""],
        "a.*.#": ["a.b", "a.c", "a."],
        "#.#": ["", "a", "b"],
        "both": ["a"],
    }
    assert {pattern: keys for pattern, keys in extra.items() if keys} == {}
