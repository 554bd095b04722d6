#!/usr/bin/env bash
# Install the test dependencies into .venv and run everything: lint, format, types, tests.
# This is the README's test command, and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[dev]'
ruff check .
ruff format --check .
mypy
pytest "$@"
