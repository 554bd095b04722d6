"""dlq/results.py: a transfer's results kept in order, in bounded memory, whatever the chunk."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rabbitctl_retry.dlq.results import TransferOutcome, TransferResult, TransferResults
from tests.unit.test_spill import assert_flat

texts = st.one_of(st.none(), st.text(max_size=20))
results = st.builds(TransferResult, texts, texts, st.sampled_from(TransferOutcome), texts)


@given(st.lists(results, max_size=60), st.integers(min_value=1, max_value=7))
def test_every_result_comes_back_in_order_with_its_counts(
    appended: list[TransferResult], chunk: int
) -> None:
    kept = TransferResults(chunk=chunk)
    for result in appended:
        kept.append(result)
    assert list(kept) == appended
    assert list(kept) == appended  # read again: the same
    assert len(kept) == len(appended)
    assert bool(kept) is bool(appended)
    for outcome in TransferOutcome:
        assert kept.count(outcome) == sum(1 for r in appended if r.outcome is outcome)


def test_equal_when_the_same_results_in_the_same_order() -> None:
    one = TransferResult("m1", "refunds", TransferOutcome.SENT)
    two = TransferResult("m2", None, TransferOutcome.SKIPPED, "why")
    assert TransferResults([one, two], chunk=1) == TransferResults([one, two])
    assert TransferResults([one, two]) != TransferResults([two, one])
    assert TransferResults([one]) != TransferResults([one, two])


def test_memory_stays_flat_in_the_number_of_results() -> None:
    """100,000 results hold about what 10,000 hold: the rest wait in the temporary file."""

    def fill(count: int) -> int:
        kept = TransferResults()
        for number in range(count):
            kept.append(TransferResult(f"m-{number:08}", "refunds", TransferOutcome.SENT))
        return len(kept)

    assert_flat(fill)
