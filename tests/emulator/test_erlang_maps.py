"""The emulator's model of Erlang/OTP 25's map fold order (emulator/erlang_maps.py), checked
against ``erl`` itself: RabbitMQ 3.10 returns a quorum consumer's nacked messages in it."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from rabbitctl_retry.emulator.erlang_maps import FLATMAP_MAX_KEYS, fold_order, internal_hash

# One line of keys in, the keys in maps:fold order out (the fold conses, hence the reverse).
ERLANG_FOLD = """
{ok, Bin} = file:read_file("%s"),
Lines = [L || L <- binary:split(Bin, <<"\\n">>, [global]), L =/= <<>>],
Out = [begin
    Keys = [binary_to_integer(T) || T <- binary:split(L, <<" ">>, [global])],
    Map = maps:with(Keys, maps:from_list([{K, x} || K <- Keys])),
    Order = lists:reverse(maps:fold(fun(K, _, Acc) -> [K | Acc] end, [], Map)),
    lists:join(" ", [integer_to_list(K) || K <- Order])
end || L <- Lines],
io:put_chars([[O, "\\n"] || O <- Out]),
halt().
"""

COLLIDING = [(40660, 59671), (22575, 119693), (121236, 167527), (29879, 217607)]
"""Pairs of small integers with the same 32-bit map hash (found with internal_hash)."""


def key_sets() -> list[list[int]]:
    chosen = random.Random(25)
    sets = [list(range(100)), list(range(33)), list(range(32)), [2**40, 2**58 + 3, *range(40)]]
    for _ in range(150):
        size = chosen.choice([1, 31, 32, 33, 40, 100, 500])
        top = chosen.choice([size, 3 * size, 100_000, 2**27])
        sets.append(chosen.sample(range(top), size))
    for pair in COLLIDING:
        others = chosen.sample(range(300_000), chosen.choice([31, 40, 100]))
        sets.append([*others, *pair])
    return sets


def erlang_fold_orders(sets: list[list[int]], folder: Path) -> list[list[int]]:
    erl = shutil.which("erl")
    if erl is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no erl (Erlang/OTP, which RabbitMQ runs on) on this machine")
        pytest.skip("no erl (Erlang/OTP) on this machine")
    keys_file = folder / "keys.txt"
    keys_file.write_text("".join(" ".join(map(str, keys)) + "\n" for keys in sets))
    release = subprocess.run(
        [erl, "-noshell", "-eval", "io:put_chars(erlang:system_info(otp_release)), halt()."],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    if release != "25":
        pytest.skip(f"erl is OTP {release}, the model is of OTP 25 (RabbitMQ 3.10's)")
    result = subprocess.run(
        [erl, "-noshell", "-eval", ERLANG_FOLD % keys_file],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [[int(key) for key in line.split()] for line in result.stdout.splitlines()]


def test_the_model_folds_as_erlang_otp_25_does(tmp_path: Path) -> None:
    sets = key_sets()
    assert erlang_fold_orders(sets, tmp_path) == [fold_order(keys) for keys in sets]


def test_a_flat_map_folds_in_key_order_a_bigger_one_does_not() -> None:
    assert fold_order(range(FLATMAP_MAX_KEYS, -1, -1)) != list(range(FLATMAP_MAX_KEYS + 1))
    assert fold_order(range(FLATMAP_MAX_KEYS - 1, -1, -1)) == list(range(FLATMAP_MAX_KEYS))
    assert fold_order([5, 5, 3]) == [3, 5]


def test_colliding_keys_are_told_apart_by_the_next_depth() -> None:
    for first, second in COLLIDING:
        assert internal_hash(first) == internal_hash(second)
        assert internal_hash(first, 1) != internal_hash(second, 1)


def test_only_small_non_negative_integers() -> None:
    for key in (-1, 2**59):
        with pytest.raises(ValueError, match="not a small non-negative integer"):
            internal_hash(key)
