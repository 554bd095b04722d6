"""``mypy --strict`` on typed handlers (docs/reference/handlers.md, "Type checking"): the file
written as the guide writes it passes; each mistake in the other is found on its line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
OK = HERE / "typed_handlers_ok.py"
WRONG = HERE / "typed_handlers_wrong.py"

EXPECTED = {
    "not_a_queue": ("arg-type", 'Argument 1 to "subscriber" has incompatible type "int"'),
    "charge": ("attr-defined", '"Processor" has no attribute "charge"'),
    "count": ("assignment", 'expression has type "Processor", variable has type "int"'),
    "returns_int": ("type-var", 'cannot be "Callable[[Message], int]"'),
    "returns_text": ("type-var", 'cannot be "Callable[[Message], Coroutine[Any, Any, str]]"'),
    "bad_timeout": ("arg-type", 'Argument "timeout" to "subscriber" has incompatible type'),
}


def _line_of(text: str, needle: str) -> int:
    """The line of the ``# E:`` mark nearest above (or on) the line naming ``needle``."""
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if needle in line:
            for back in range(number, 0, -1):
                if "# E:" in lines[back - 1]:
                    return back
    raise AssertionError(needle)


def test_mypy_strict_on_typed_handlers() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(OK), str(WRONG)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    found = re.findall(r"^(.+?):(\d+): error: (.*)  \[([a-z-]+)\]$", run.stdout, re.MULTILINE)
    assert not [item for item in found if not item[0].endswith(WRONG.name)], run.stdout
    text = WRONG.read_text()
    errors = {(int(line), code): message for _, line, message, code in found}
    expected = {(_line_of(text, needle), code): words for needle, (code, words) in EXPECTED.items()}
    assert set(errors) == set(expected), run.stdout
    for place, words in expected.items():
        assert words in errors[place]
    assert run.returncode == 1, run.stderr
