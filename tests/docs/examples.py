"""Find the examples in markdown, say how each one runs, and compare shown output (pure).

No file, process or broker here: :mod:`tests.docs.test_examples` runs what this module finds.

An *example* is a fenced block of a language rr's docs run (```python, ```toml, ```sh,
```bash, ```console, ```json) or a block without a language holding ``$ ...`` command
lines. A block without a language and without ``$`` lines (a synopsis, a diagram, a log
line) is text, not an example. A block of another language is an example that nothing can
run, so it must be marked.

A marker is an HTML comment on the last non-blank line before the fence:

* ``<!-- example: fragment -->`` — not runnable on its own: never run; Python is compiled;
* ``<!-- example: needs REASON -->`` — runnable only with REASON (the whole test suite, a
  connection closed mid-run, ...): skipped with that reason; Python is compiled.

A marked block is still a test case (skipped, with its reason), so nothing is dropped
silently; a block that is neither marked nor classifiable fails (:class:`Unclassifiable`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from enum import Enum

# --------------------------------------------------------------------------- blocks

RUN_LANGUAGES = frozenset({"python", "toml", "sh", "bash", "console", "json"})
"""Fence languages whose blocks are examples (a bare fence is one when it holds ``$`` lines)."""

TEXT_LANGUAGES = frozenset({"", "text"})
"""Fence languages of text blocks (a bare fence without ``$`` lines)."""

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
_MARKER = re.compile(r"^\s*<!--\s*example:\s*(?P<kind>[a-z-]+)\s*(?P<reason>.*?)\s*-->\s*$")
_PROMPT = "$ "


@dataclass(frozen=True, slots=True)
class Marker:
    """``<!-- example: KIND REASON -->`` before a fence."""

    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced code block of a markdown file."""

    path: str
    """The file, as the test id shows it (``docs/reference/dlq.md``)."""
    line: int
    """The block's first line inside the fence, 1-based: the test id's line."""
    language: str
    text: str
    """The lines between the fences, without the fence's indentation, ending in a newline."""
    marker: Marker | None = None

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def is_example(self) -> bool:
        """Whether the block is an example (see the module's docstring)."""
        if self.language in TEXT_LANGUAGES:
            return any(line.startswith(_PROMPT) for line in self.text.splitlines())
        return True

    @property
    def first_line_path(self) -> str | None:
        """The file a block says it is, on its first line: ``# examples/refunds/topology.toml``
        or ``# outage.py`` (a trailing remark in parentheses, ``(abridged)``, is left out)."""
        first = self.text.split("\n", 1)[0]
        found = re.fullmatch(r"#\s*(?P<path>[\w./-]+\.(?:py|toml))(?:\s*\((?P<note>.*)\))?", first)
        return found["path"] if found else None

    @property
    def abridged(self) -> bool:
        """Whether the first line says the block is abridged: ``# path (abridged)``."""
        return "(abridged)" in self.text.split("\n", 1)[0]


def fenced_blocks(markdown: str, path: str) -> list[Block]:
    """Every fenced block of ``markdown``, examples and text, in order.

    A fence is three or more backticks (or tildes), indented or not; it closes at a line of
    at least as many of the same character and nothing else. A block left open runs to the
    end of the file.
    """
    lines = markdown.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            stripped = lines[end].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            raw = lines[end]
            body.append(raw[len(indent) :] if raw.startswith(indent) else raw.lstrip())
            end += 1
        blocks.append(
            Block(
                path=path,
                line=index + 2,
                language=opening["info"].lower(),
                text="".join(f"{line}\n" for line in body),
                marker=_marker_before(lines, index),
            )
        )
        index = end + 1
    return blocks


def examples(markdown: str, path: str) -> list[Block]:
    """The example blocks of ``markdown`` (text blocks left out)."""
    return [block for block in fenced_blocks(markdown, path) if block.is_example]


def _marker_before(lines: list[str], fence_index: int) -> Marker | None:
    for line in reversed(lines[:fence_index]):
        if not line.strip():
            continue
        found = _MARKER.match(line)
        return Marker(found["kind"], found["reason"]) if found else None
    return None


# --------------------------------------------------------------------------- commands


@dataclass(frozen=True, slots=True)
class Command:
    """One shell command of an example, with the output the doc shows below it."""

    text: str
    """As written (continuation lines joined), without the ``$ ``."""
    output: tuple[str, ...] = ()
    """The lines shown below a ``$`` command, up to the next one (trailing blanks left out)."""

    @property
    def argv(self) -> list[str]:
        """The words, as a POSIX shell splits them."""
        return shlex.split(self.text, comments=True)

    @property
    def assignments(self) -> dict[str, str]:
        """``VAR=value`` words in front of the program."""
        found: dict[str, str] = {}
        for word in self.argv:
            name, sep, value = word.partition("=")
            if not sep or not re.fullmatch(r"[A-Za-z_]\w*", name):
                break
            found[name] = value
        return found

    @property
    def program_args(self) -> list[str]:
        """The words from the program on (assignments left out)."""
        return self.argv[len(self.assignments) :]

    @property
    def answer(self) -> str | None:
        """What the doc answers to a ``[y/N]`` question, when it shows one."""
        for line in self.output:
            found = re.search(r"\[y/N\]:\s*(\S+)\s*$", line)
            if found:
                return found[1]
        return None

    @property
    def shows_error(self) -> bool:
        """Whether the output shown holds rr's error line (so the command must fail)."""
        return any(line.startswith("rr: error:") for line in self.output)


def commands(block: Block) -> list[Command]:
    """The commands of a shell example.

    With ``$`` lines (a console block, or a bare one) each ``$ COMMAND`` is a command and the
    lines below it its output. Otherwise (sh, bash) every line that is not blank or a comment
    is a command; a line ending in ``\\`` continues on the next.
    """
    lines = block.text.splitlines()
    if any(line.startswith(_PROMPT) for line in lines):
        found: list[tuple[str, list[str]]] = []
        for line in lines:
            if line.startswith(_PROMPT):
                found.append((line[len(_PROMPT) :].strip(), []))
            elif found:
                found[-1][1].append(line)
        return [Command(text, tuple(_trim(output))) for text, output in found]
    result: list[Command] = []
    pending = ""
    for line in lines:
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        result.append(Command(pending + stripped))
        pending = ""
    if pending:
        result.append(Command(pending.strip()))
    return result


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


# --------------------------------------------------------------------------- classification


class Unclassifiable(Exception):
    """An unmarked example that nothing here knows how to run."""


class Kind(Enum):
    """How an example runs."""

    PYTHON_TESTS = "a pytest module: run with pytest in a subprocess"
    PYTHON_HANDLERS = "a handler module: run with rr simulate"
    PYTHON_SCRIPT = "a script: run with python"
    TOPOLOGY = "a topology file: rr topology validate"
    PYTEST_CONFIG = "pytest settings: a test of the rr_broker fixture runs under them"
    EXPORT_LINE = "an rr dlq export line: imported and exported again"
    SHELL = "shell commands"


RR_LOCAL = frozenset(
    {"simulate", "topology", "asyncapi", "completion", "--help", "-h", "--version"}
)
"""``rr`` commands that need no broker (the emulator, or none)."""

RR_BROKER = frozenset({"declare", "dlq", "status", "doctor"})
"""``rr`` commands that run against the test broker, each in a fresh vhost."""

SANDBOXED = frozenset({"cp"})
"""Other programs an example may run: in a temporary root (``/etc`` and ``~`` moved there)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do with one example."""

    kind: Kind
    broker: bool = False
    """Whether it needs the test broker."""
    skip: str | None = None
    """Why it is not run (its marker), or None."""
    compile_python: bool = False
    """Whether to compile it (Python) even when it is skipped."""
    commands: tuple[Command, ...] = field(default_factory=tuple)


def classify(block: Block) -> Plan:
    """How ``block`` runs; :class:`Unclassifiable` when it is unmarked and nothing can run it.

    A marker of an unknown kind is unclassifiable too, as is a ``needs`` marker without a
    reason: a skip must say why.
    """
    marker = block.marker
    python = block.language == "python"
    if marker is not None:
        if marker.kind == "fragment":
            return Plan(_kind_guess(block), skip="a fragment (marked)", compile_python=python)
        if marker.kind == "needs":
            if not marker.reason:
                raise Unclassifiable(f"{block.id}: '<!-- example: needs -->' says not what")
            return Plan(_kind_guess(block), skip=f"needs {marker.reason}", compile_python=python)
        raise Unclassifiable(
            f"{block.id}: unknown marker '<!-- example: {marker.kind} -->' "
            "(known: fragment, needs REASON)"
        )
    if python:
        return Plan(_python_kind(block), compile_python=True)
    if block.language == "toml":
        is_pytest = "[tool.pytest.ini_options]" in block.text
        return Plan(Kind.PYTEST_CONFIG if is_pytest else Kind.TOPOLOGY)
    if block.language == "json":
        return Plan(Kind.EXPORT_LINE, broker=True)
    if block.language in {"sh", "bash", "console"} or block.language in TEXT_LANGUAGES:
        found = commands(block)
        if not found:
            raise Unclassifiable(f"{block.id}: a shell example without a command")
        broker = False
        for command in found:
            broker = _shell_needs_broker(block, command) or broker
        return Plan(Kind.SHELL, broker=broker, commands=tuple(found))
    raise Unclassifiable(
        f"{block.id}: nothing runs ```{block.language} blocks: mark it "
        "'<!-- example: fragment -->' or '<!-- example: needs REASON -->'"
    )


def _kind_guess(block: Block) -> Kind:
    if block.language == "python":
        try:
            return _python_kind(block)
        except Unclassifiable:
            return Kind.PYTHON_SCRIPT
    if block.language == "toml":
        return Kind.TOPOLOGY
    if block.language == "json":
        return Kind.EXPORT_LINE
    return Kind.SHELL


def _python_kind(block: Block) -> Kind:
    text = block.text
    if re.search(r"^(async )?def test_", text, re.MULTILINE):
        return Kind.PYTHON_TESTS
    if "@subscriber(" in text:
        return Kind.PYTHON_HANDLERS
    if "asyncio.run(" in text or "__main__" in text:
        return Kind.PYTHON_SCRIPT
    raise Unclassifiable(
        f"{block.id}: a Python example that is no test module, no handler module (@subscriber) "
        "and no script (asyncio.run or __main__): make it one, or mark it "
        "'<!-- example: fragment -->'"
    )


def _shell_needs_broker(block: Block, command: Command) -> bool:
    try:
        words = command.program_args
    except ValueError as error:
        raise Unclassifiable(f"{block.id}: cannot split {command.text!r}: {error}") from None
    if not words:
        raise Unclassifiable(f"{block.id}: {command.text!r} runs no program")
    program, args = words[0], words[1:]
    if program == "rr":
        sub = args[0] if args else ""
        if sub in RR_LOCAL:
            return False
        if sub in RR_BROKER:
            return True
        if sub == "run":
            raise Unclassifiable(
                f"{block.id}: {command.text!r}: rr run runs until it is stopped; "
                "mark the block '<!-- example: needs REASON -->'"
            )
        raise Unclassifiable(f"{block.id}: {command.text!r}: unknown rr command {sub!r}")
    if program in SANDBOXED:
        return False
    raise Unclassifiable(
        f"{block.id}: {command.text!r}: the tests do not run {program!r}; "
        "mark the block '<!-- example: needs REASON -->'"
    )


def subscribed_queues(source: str) -> list[str]:
    """The queues of the ``@subscriber("QUEUE")`` decorators in a handler module's source."""
    return re.findall(r"@subscriber\(\s*[\"']([^\"']+)[\"']\s*\)", source)


# --------------------------------------------------------------------------- output


_RULE_CHARS = frozenset("━╇─┼═╪╋┿╈╉┣┫┠┨ ")
_CELL_SPLIT = re.compile(r"\s*[│┃]\s*")


_MOMENT = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"
"""An ISO 8601 time, as rr prints them (x-death times, rr-failed-at)."""


_AGE_BUCKET = r"<\s1\s(?:min|h|day|week)\b"
"""An age bucket of ``rr dlq inspect --summary`` (``< 1 h``): how old messages are varies."""


def _pattern(text: str) -> str:
    """A regex for one shown line or cell: whitespace runs match any whitespace, ``...``
    anything, and values that differ from run to run (times, rates, durations) any value."""
    parts: list[str] = []
    for token in re.split(rf"(\.\.\.|{_AGE_BUCKET}|\s+)", text):
        if token == "...":
            parts.append(".*?")
        elif re.fullmatch(_AGE_BUCKET, token):
            parts.append(_AGE_BUCKET)
        elif token and token.isspace():
            parts.append(r"\s+")
        elif token:
            parts.append(_varying(token))
    return "".join(parts)


def _varying(token: str) -> str:
    """One word of a shown line, as a regex: times, rates and decimal durations vary."""
    time = re.fullmatch(rf"(\W*){_MOMENT}(\W*)", token)
    if time:
        return re.escape(time[1]) + _MOMENT + re.escape(time[2])
    rate = re.fullmatch(r"(\W*)[\d,]+(?:\.\d+)?/s(\W*)", token)
    if rate:
        return re.escape(rate[1]) + r"[\d,]+(?:\.\d+)?/s" + re.escape(rate[2])
    age = re.fullmatch(r"age=\d+[smhd]", token)
    if age:  # how long ago a message was dead-lettered, "age=12m"
        return r"age=\d+[smhd]"
    decimal = re.fullmatch(r"\d+\.\d+", token)
    if decimal:  # a duration in seconds, "in 0.1 s"
        return r"\d+\.\d+"
    return re.escape(token)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in _CELL_SPLIT.split(line.strip())]


def _is_rule(line: str) -> bool:
    return bool(line.strip()) and set(line) <= _RULE_CHARS


def missing_lines(shown: tuple[str, ...] | list[str], actual: str) -> list[str]:
    """The lines of ``shown`` (a doc's output) that ``actual`` does not bear out.

    * ``...`` alone, blank lines and table rules (``━━╇━━``) are skipped; ``...`` inside a
      line matches anything; times, rates (``226/s``), decimals (``0.1 s``) and ages
      (``age=12m``, ``< 1 h``) vary.
    * A table row that starts a row (its first cell is not empty) must be a line of
      ``actual`` with the same cells in the same order (a cell may go on in ``actual``
      where the doc wrapped it: ``payment processor`` matches ``payment processor unreachable
      ...``).
    * Every other line — a row's continuation, a summary, an error — must appear somewhere in
      ``actual``, whitespace and line breaks counting as one space (rr does not wrap its
      output in a pipe, while the doc's lines were wrapped on a terminal).
    * A question's answer (``[y/N]: y``) is what the user typed, not what rr printed.
    """
    flat = " ".join(actual.split())
    actual_rows = [_cells(line) for line in actual.splitlines() if re.search(r"[│┃]", line)]
    missing: list[str] = []
    for line in shown:
        stripped = line.strip()
        if not stripped or stripped == "..." or _is_rule(line):
            continue
        stripped = re.sub(r"(\[y/N\]:)\s*\S+$", r"\1", stripped)
        if re.search(r"[│┃]", stripped):
            cells = _cells(stripped)
            if cells[0]:
                if not any(_row_matches(cells, row) for row in actual_rows):
                    missing.append(line)
                continue
            for cell in cells[1:]:
                if cell and cell != "..." and not re.search(_pattern(cell), flat):
                    missing.append(line)
                    break
            continue
        if not re.search(_pattern(stripped), flat):
            missing.append(line)
    return missing


def _row_matches(shown: list[str], actual: list[str]) -> bool:
    if len(actual) < len(shown):
        return False
    return all(
        re.fullmatch(_pattern(cell) + r"(?:\s.*)?", " ".join(have.split())) is not None
        for cell, have in zip(shown, actual, strict=False)
        if cell or have
    )
