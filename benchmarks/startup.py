"""How long rr takes to start, against a minimal typer app measured in the same run.

    python benchmarks/startup.py [--runs 15]

Each case is a fresh process (the same Python, ``-m`` for rr, a script for the reference),
timed from spawn to exit; the cases alternate, run after run, so machine load touches them
alike. Printed: the median wall time of each and its ratio to the minimal typer app's
``--help`` (two commands with one argument each; the floor any typer CLI pays). Goals
(docs/reference/cli.md, "Start-up"): ``rr --help`` within 1.5x, ``rr topology validate`` of the
refunds file within 2x. Speed is measured here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFUNDS = ROOT / "examples" / "refunds" / "topology.toml"

MINIMAL_APP = """
import typer

app = typer.Typer()


@app.command()
def hello(name: str) -> None:
    print(name)


@app.command()
def bye(name: str) -> None:
    print(name)


app()
"""


def wall_s(command: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False)
    elapsed_s = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        minimal = Path(folder) / "minimal_typer_app.py"
        minimal.write_text(MINIMAL_APP, encoding="utf-8")
        cases = {
            "minimal typer app --help": [sys.executable, str(minimal), "--help"],
            "rr --help": [sys.executable, "-m", "rabbitctl_retry", "--help"],
            "rr topology validate (refunds)": [
                sys.executable,
                "-m",
                "rabbitctl_retry",
                "topology",
                "validate",
                str(REFUNDS),
            ],
            "rr dlq --help": [sys.executable, "-m", "rabbitctl_retry", "dlq", "--help"],
        }
        for command in cases.values():  # warm the file cache, untimed
            wall_s(command)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(arguments.runs):
            for name, command in cases.items():
                times[name].append(wall_s(command))
    reference = statistics.median(times["minimal typer app --help"])
    python = sys.version.split()[0]
    print(f"start-up, median of {arguments.runs} runs each (alternating), Python {python}")
    for name, samples in times.items():
        median_s = statistics.median(samples)
        print(f"  {name:34} {median_s * 1000:7.0f} ms  {median_s / reference:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
