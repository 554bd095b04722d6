"""The docs-example harness itself: what it finds, how it classifies, what output it accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs import test_examples as harness
from tests.docs.examples import (
    Block,
    Kind,
    Marker,
    Unclassifiable,
    classify,
    commands,
    examples,
    fenced_blocks,
    missing_lines,
    subscribed_queues,
)

SYNTHETIC = """\
# A page

```python
from rabbitctl_retry import subscriber


@subscriber("orders")
def handle(msg): ...
```

A synopsis is text, not an example:

```
rr declare TOPOLOGY.toml [--dry-run]
```

```
$ rr topology validate orders.toml
orders.toml: ok (1 queues in the file; 1 queues, 0 exchanges and 0 bindings to declare)
$ rr dlq purge orders.dead
Purge 3 message(s) from 'orders.dead'? They cannot be recovered [y/N]: y
purged 3 message(s) from 'orders.dead'
```

```toml
# examples/refunds/topology.toml
[queues.orders]
```

<!-- example: fragment -->
```python
await broker.advance(30)
```

<!-- example: needs a cluster of three nodes -->

```sh
rr completion bash > /etc/bash_completion.d/rr
cp completions/rr.zsh \\
   ~/.zfunc/_rr
```

- in a list:

  ```console
  $ RR_URL=amqp://localhost/ rr status
  ```

~~~json
{"body": ""}
~~~
"""


def test_the_extractor_finds_every_block_of_a_synthetic_page() -> None:
    blocks = fenced_blocks(SYNTHETIC, "docs/page.md")
    assert [(b.line, b.language, b.is_example) for b in blocks] == [
        (4, "python", True),
        (14, "", False),
        (18, "", True),
        (26, "toml", True),
        (32, "python", True),
        (38, "sh", True),
        (46, "console", True),
        (50, "json", True),
    ]
    found = examples(SYNTHETIC, "docs/page.md")
    assert [b.id for b in found] == [
        "docs/page.md:4",
        "docs/page.md:18",
        "docs/page.md:26",
        "docs/page.md:32",
        "docs/page.md:38",
        "docs/page.md:46",
        "docs/page.md:50",
    ]
    assert [b.marker for b in found] == [
        None,
        None,
        None,
        Marker("fragment", ""),
        Marker("needs", "a cluster of three nodes"),
        None,
        None,
    ]
    assert found[2].first_line_path == "examples/refunds/topology.toml"
    assert found[5].text == "$ RR_URL=amqp://localhost/ rr status\n"  # the list's indent is gone


def test_each_example_is_classified() -> None:
    found = examples(SYNTHETIC, "docs/page.md")
    plans = [classify(block) for block in found]
    assert [(p.kind, p.broker, p.skip) for p in plans] == [
        (Kind.PYTHON_HANDLERS, False, None),
        (Kind.SHELL, True, None),  # rr dlq purge needs the broker
        (Kind.TOPOLOGY, False, None),
        (Kind.PYTHON_SCRIPT, False, "a fragment (marked)"),
        (Kind.SHELL, False, "needs a cluster of three nodes"),
        (Kind.SHELL, True, None),
        (Kind.EXPORT_LINE, True, None),
    ]
    assert plans[3].compile_python


def test_commands_and_the_output_shown_below_them() -> None:
    found = examples(SYNTHETIC, "docs/page.md")
    validate, purge = commands(found[1])
    assert validate.text == "rr topology validate orders.toml"
    assert validate.output == (
        "orders.toml: ok (1 queues in the file; 1 queues, 0 exchanges and 0 bindings to declare)",
    )
    assert validate.answer is None
    assert purge.answer == "y"
    assert not purge.shows_error
    assert [c.text for c in commands(found[4])] == [
        "rr completion bash > /etc/bash_completion.d/rr",
        "cp completions/rr.zsh ~/.zfunc/_rr",
    ]
    (status,) = commands(found[5])
    assert status.assignments == {"RR_URL": "amqp://localhost/"}
    assert status.program_args == ["rr", "status"]


@pytest.mark.parametrize(
    ("language", "text", "marker", "why"),
    [
        ("sh", "./scripts/deploy.sh --prod\n", None, "the tests do not run './scripts/deploy.sh'"),
        ("", "$ rr run service --topology t.toml\n", None, "rr run runs until it is stopped"),
        ("sh", "rr frobnicate\n", None, "unknown rr command 'frobnicate'"),
        ("python", "x = compute()\n", None, "no test module, no handler module"),
        ("yaml", "a: 1\n", None, "nothing runs ```yaml blocks"),
        ("python", "x = 1\n", Marker("later", ""), "unknown marker"),
        ("sh", "./scripts/demo.sh\n", Marker("needs", ""), "says not what"),
        ("sh", "# only a comment\n", None, "without a command"),
    ],
)
def test_an_unmarked_block_nothing_can_run_is_unclassifiable(
    language: str, text: str, marker: Marker | None, why: str
) -> None:
    block = Block("docs/page.md", 3, language, text, marker)
    with pytest.raises(Unclassifiable, match=why.replace("(", r"\(")):
        classify(block)


def test_the_test_case_of_an_unclassifiable_block_fails(tmp_path: Path) -> None:
    block = Block("docs/page.md", 3, "sh", "./scripts/deploy.sh --prod\n")
    with pytest.raises(Unclassifiable) as raised:
        classify(block)
    with pytest.raises(pytest.fail.Exception, match=r"deploy\.sh"):
        harness.test_example(block, raised.value, tmp_path)


def test_a_marked_python_block_is_still_compiled(tmp_path: Path) -> None:
    block = Block("docs/page.md", 3, "python", "def broken(:\n", Marker("fragment", ""))
    with pytest.raises(SyntaxError):
        harness.test_example(block, classify(block), tmp_path)
    fine = Block("docs/page.md", 3, "python", "await broker.advance(30)\n", Marker("fragment", ""))
    with pytest.raises(pytest.skip.Exception, match="fragment"):
        harness.test_example(fine, classify(fine), tmp_path)


def test_subscribed_queues_are_read_from_the_decorators() -> None:
    source = "@subscriber(\"refunds\")\nasync def a(m): ...\n@subscriber( 'refunds.dead' )\n"
    assert subscribed_queues(source) == ["refunds", "refunds.dead"]


# --------------------------------------------------------------------------- shown output

ACTUAL = """\
                    payouts.dead
to      ┃ outcome  ┃ count ┃ reason
━━━━━━━━╇━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━
-       │ skipped  │ 8     │ does not match --where
payouts │ replayed │ 3     │
replayed 3 of 11 dead letters read from 'payouts.dead' (16 there at the start): 8 skipped, 0 failed, in 0.0 s (236/s)
1 │ id: payouts-26 │ payouts  delivery_limit  x1  2026-12-01T07:08:29Z
  │ rr-error-message: payment processor unreachable (timeout after 10 s) │
Replay the dead letters? Each is removed once the broker confirmed its copy [y/N]:
"""  # noqa: E501

SHOWN = """\
                   payouts.dead
to      ┃ outcome  ┃ count ┃ reason
━━━━━━━━╇━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━
-       │ skipped  │ 8     │ does not match --where
payouts │ replayed │ 3     │
replayed 3 of 11 dead letters read from 'payouts.dead' (16 there at the start): 8 skipped, 0 failed,
in 0.1 s (226/s)
1 │ id: payouts-26 │ payouts delivery_limit x1 2026-11-30T03:31:00Z
  │ rr-error-message: payment processor          │
  │ unreachable (timeout after 10 s)             │
...
removed once the broker confirmed its copy [y/N]: y
"""


def test_shown_output_matches_despite_wrapping_times_rates_and_answers() -> None:
    assert missing_lines(SHOWN.splitlines(), ACTUAL) == []


@pytest.mark.parametrize(
    ("shown", "actual"),
    [
        ("payouts │ replayed │ 3     │", "payouts │ replayed │ 13    │"),
        ("payouts │ replayed │ 3     │", "payouts │ failed   │ 3     │"),
        ("payouts │ replayed │ 3     │", "payouts replayed 3"),
        ("replayed 3 of 11 dead letters", "replayed 3 of 12 dead letters"),
        ("timeout after 10 s", "timeout after 11 s"),
        ("  │ unreachable (timeout after 10 s) │", "  │ unreachable │"),
        ("16 dead letters shown of 16 in 'payouts.dead'", ""),
    ],
)
def test_a_line_rr_did_not_print_is_missing(shown: str, actual: str) -> None:
    assert missing_lines([shown], actual) == [shown]
