"""``rr docs [TOPIC [SECTION]]`` (docs/reference/cli.md, "rr docs"): the topics are the docs
tree's pages, found by their file's stem; an unknown topic or section is a usage error that
suggests. Most tests read a small tree of their own (``docs_root`` patched); a few read the
checkout's docs/, as an editable install does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rabbitctl_retry.cli import app
from rabbitctl_retry.cli.completions import Shell, render
from rabbitctl_retry.doc_topics import (
    UnknownName,
    close_matches,
    did_you_mean,
    find_heading,
    headings,
    resolve_topic,
    section_of,
    title_of,
)
from rabbitctl_retry.docs_tree import CHECKOUT, docs_root, pages

runner = CliRunner(env={"COLUMNS": "100"})

PAGE = """# Dead letters: `rr dlq`

Intro.

## Big queues

Constant memory.

### Deep inside

Still big queues.

## 5. When something does not go back

Back.

```sh
# not a heading
```

## Groups: failures by cause

By cause.
"""


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "docs"
    (root / "reference").mkdir(parents=True)
    (root / "how-to").mkdir()
    (root / "README.md").write_text("# The index\n\nStart with getting-started.\n")
    (root / "getting-started.md").write_text("# Getting started\n\npip install.\n")
    (root / "reference" / "dlq.md").write_text(PAGE)
    (root / "how-to" / "run-on-a-cluster.md").write_text("# How to: run on a cluster\n")
    (root / "images").mkdir()
    (root / "images" / "x.png").write_bytes(b"\x89PNG")
    monkeypatch.setattr("rabbitctl_retry.cli.docs.docs_root", lambda: root)
    return root


def test_topics_are_the_stems_of_the_pages(tree: Path) -> None:
    found = pages(tree)
    assert sorted(found) == ["dlq", "getting-started", "run-on-a-cluster"]
    assert found["dlq"].path == Path("reference/dlq.md")
    assert (found["dlq"].part, found["getting-started"].part) == ("reference", "")


def test_a_topic_resolves_exactly_or_by_case() -> None:
    topics = ["cli", "dlq", "run-on-a-cluster", "runtime"]
    assert resolve_topic("dlq", topics) == "dlq"
    assert resolve_topic("DLQ", topics) == "dlq"
    with pytest.raises(UnknownName) as raised:
        resolve_topic("dql", topics)
    assert raised.value.suggestions == ("dlq",)


def test_suggestions_are_close_words_or_beginnings() -> None:
    assert close_matches("runtim", ["runtime", "cli"]) == ["runtime"]
    assert set(close_matches("run", ["runtime", "run-on-a-cluster", "cli"])) == {
        "runtime",
        "run-on-a-cluster",
    }
    assert close_matches("zzz", ["runtime", "cli"]) == []
    assert did_you_mean(["dlq"]) == " Did you mean 'dlq'?"
    assert did_you_mean(["a", "b"]) == " Did you mean 'a' or 'b'?"
    assert did_you_mean([]) == ""


def test_headings_skip_fenced_code_and_sections_end_at_their_level() -> None:
    assert [h.text for h in headings(PAGE)][1:] == [
        "Big queues",
        "Deep inside",
        "5. When something does not go back",
        "Groups: failures by cause",
    ]
    assert title_of(PAGE) == "Dead letters: rr dlq"
    big = section_of(PAGE, "big QUEUES")
    assert big.startswith("## Big queues")
    assert "Still big queues." in big
    assert "Back." not in big
    assert section_of(PAGE, "Deep inside").strip().endswith("Still big queues.")


def test_a_section_is_named_by_its_text_its_start_or_without_its_number() -> None:
    assert find_heading(PAGE, "When something does not go back") is not None
    found = find_heading(PAGE, "Groups")
    assert found is not None
    assert found.text == "Groups: failures by cause"
    assert find_heading(PAGE, "Gro") is None  # not by half a word
    with pytest.raises(UnknownName) as raised:
        section_of(PAGE, "Big queue")
    assert "Big queues" in raised.value.suggestions


def test_no_topic_prints_the_index_and_the_topics(tree: Path) -> None:
    result = runner.invoke(app, ["docs"])
    assert result.exit_code == 0, result.output
    assert "The index" in result.output
    for topic in ("dlq", "getting-started", "run-on-a-cluster"):
        assert topic in result.output
    assert "How to: run on a cluster" in result.output


def test_list_and_its_json(tree: Path) -> None:
    listed = runner.invoke(app, ["docs", "--list"])
    assert listed.exit_code == 0
    assert "The index" not in listed.output
    assert "Dead letters: rr dlq" in listed.output
    document = json.loads(runner.invoke(app, ["docs", "--list", "-o", "json"]).output)
    assert document == {
        "topics": [
            {"topic": "getting-started", "part": "", "path": "docs/getting-started.md",
             "title": "Getting started"},
            {"topic": "run-on-a-cluster", "part": "how-to",
             "path": "docs/how-to/run-on-a-cluster.md", "title": "How to: run on a cluster"},
            {"topic": "dlq", "part": "reference", "path": "docs/reference/dlq.md",
             "title": "Dead letters: rr dlq"},
        ]
    }  # fmt: skip
    tsv = runner.invoke(app, ["docs", "--list", "-o", "tsv"]).output.splitlines()
    assert tsv[0] == "topic\tpart\ttitle"
    assert "dlq\treference\tDead letters: rr dlq" in tsv
    index = json.loads(runner.invoke(app, ["docs", "-o", "json"]).output)
    assert index["index"].startswith("# The index")


def test_a_page_rendered_raw_and_as_json(tree: Path) -> None:
    shown = runner.invoke(app, ["docs", "dlq"])
    assert shown.exit_code == 0
    assert "Big queues" in shown.output
    assert "## Big queues" not in shown.output  # rendered, not Markdown
    raw = runner.invoke(app, ["docs", "dlq", "--raw"])
    assert raw.output == PAGE
    document = json.loads(runner.invoke(app, ["docs", "dlq", "-o", "json"]).output)
    assert document == {
        "topic": "dlq",
        "path": "docs/reference/dlq.md",
        "title": "Dead letters: rr dlq",
        "section": None,
        "markdown": PAGE,
    }


def test_a_section_alone(tree: Path) -> None:
    raw = runner.invoke(app, ["docs", "dlq", "Groups", "--raw"])
    assert raw.exit_code == 0
    assert raw.output == "## Groups: failures by cause\n\nBy cause.\n"


def test_an_unknown_topic_suggests_and_lists(tree: Path) -> None:
    result = runner.invoke(app, ["docs", "dql"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "rr: error: rr docs: no topic 'dql'. Did you mean 'dlq'? "
        "Topics: dlq, getting-started, run-on-a-cluster"
    )


def test_an_unknown_section_suggests_and_lists(tree: Path) -> None:
    result = runner.invoke(app, ["docs", "dlq", "Big queue"])
    assert result.exit_code == 2
    assert "rr docs dlq: no section 'Big queue'. Did you mean 'Big queues'?" in result.output
    assert "Its sections: Big queues; 5. When something does not go back;" in result.output


def test_without_docs_it_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rabbitctl_retry.cli.docs.docs_root", lambda: None)
    result = runner.invoke(app, ["docs"])
    assert result.exit_code == 1
    assert "installed without its docs" in result.output


def test_a_checkout_reads_its_own_docs() -> None:
    """From a checkout (an editable install) the docs are the repository's docs/."""
    assert docs_root() == CHECKOUT
    found = pages(CHECKOUT)
    assert {"cli", "dlq", "architecture", "getting-started"} <= set(found)
    result = runner.invoke(app, ["docs", "architecture", "Layers", "--raw"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("## Layers")


def test_completion_offers_the_topics() -> None:
    topics = " ".join(sorted(pages(CHECKOUT)))
    assert f'"docs") COMPREPLY=($(compgen -W "{topics} --list' in render(app, Shell.BASH)
    assert f"'1:value:({topics})'" in render(app, Shell.ZSH)
    assert f"-n '__fish_seen_subcommand_from docs' -a '{topics}'" in render(app, Shell.FISH)
