"""rabbitctl_retry/suggestions.py: one way of offering close names, wherever rr offers them."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.errors import ConfigError
from rabbitctl_retry.suggestions import close_matches, did_you_mean
from rabbitctl_retry.topology.load import load_text


def test_close_names_alike_then_beginnings_case_aside() -> None:
    assert close_matches("STAT", ["status", "simulate", "run"]) == ["status"]
    assert close_matches("dead", ["dead_letter", "max_attempts"]) == ["dead_letter"]
    assert close_matches("zzz", ["status"]) == []
    assert close_matches("", ["status"]) == []
    assert close_matches("sta", ["status", "start", "stats", "stable"], most=2) == [
        "stats",
        "start",
    ]


def test_one_sentence_for_one_or_several() -> None:
    assert did_you_mean([]) == ""
    assert did_you_mean(["status"]) == " Did you mean 'status'?"
    assert did_you_mean(["a", "b"]) == " Did you mean 'a' or 'b'?"


def test_a_topology_key_offers_one_close_key() -> None:
    with pytest.raises(ConfigError) as raised:
        load_text('[queues.orders]\nmax_attempt = 3\ndead_letter = "orders.dead"\n')
    assert "(did you mean 'max_attempts'?)" in str(raised.value)


def test_an_unknown_command_offers_commands_the_same_way() -> None:
    result = CliRunner().invoke(app, ["stat"])
    assert result.exit_code == 2
    assert "Did you mean 'status'?" in result.output
