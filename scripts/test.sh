#!/usr/bin/env bash
# Install the test dependencies into .venv and run everything: lint, format, types, tests.
# This is the README's test command, and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[dev]'
# RabbitMQ 4.0 for the broker tests' second server (docs/testing.md, "Two servers"): built
# once into a chroot, which needs root; without it the 4.0 tests skip (and fail in CI).
if [ "$(id -u)" = 0 ]; then
  scripts/rabbitmq4.sh up || echo "RabbitMQ 4.0 is not available; its tests will skip" >&2
fi
ruff check .
ruff format --check .
mypy
pytest "$@"
