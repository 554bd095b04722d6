#!/usr/bin/env bash
# Install the test dependencies into .venv and run everything: lint, format, types, tests.
# This is the README's test command, and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# Cached bytecode: without it every run recompiles rr and the tests, and so does each of the
# hundreds of `rr` processes the tests start (5 s of collection alone on a 2-core machine).
unset PYTHONDONTWRITEBYTECODE
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e '.[dev]'
# RabbitMQ 4.0 and 4.3 for the broker tests' other servers (docs/reference/testing.md, "Three
# servers"): each built once into a chroot, which needs root; without one its tests skip
# (and fail in CI).
if [ "$(id -u)" = 0 ]; then
  for release in $(scripts/rabbitmq-chroot.sh releases); do
    scripts/rabbitmq-chroot.sh "$release" up ||
      echo "RabbitMQ $release is not available; its tests will skip" >&2
  done
fi
# Debian's Chromium for the console's browser test (docs/reference/testing.md); without it that test
# skips (and fails in CI).
if [ "$(id -u)" = 0 ] && ! command -v chromium >/dev/null; then
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q chromium) \
    >/dev/null 2>&1 || echo "could not install chromium; the browser test will skip" >&2
fi
# Node's amqplib for the interop tests (tests/interop/; docs/how-to/other-clients.md), where node is
# installed; without it those tests skip (and fail in CI only when CI has node).
if command -v npm >/dev/null; then
  npm ci --prefix tests/interop/node --no-audit --no-fund --loglevel=error ||
    echo "could not install amqplib; its interop tests will fail in CI" >&2
  # The official AsyncAPI JSON schemas (@asyncapi/specs) that rr asyncapi's documents are
  # validated against (tests/asyncapi/); without them those tests skip (and fail in CI).
  npm ci --prefix tests/asyncapi/node --no-audit --no-fund --loglevel=error ||
    echo "could not install @asyncapi/specs; the asyncapi tests will fail in CI" >&2
fi
ruff check .
ruff format --check .
mypy
# In 5 processes (pytest-xdist; --dist loadgroup from pyproject.toml runs the tests of one
# xdist_group on one worker, one after the other: the cluster tests, the two halves of the
# fault tests, ...; docs/reference/testing.md, "Running rr's own suite"). Most broker tests wait on
# RabbitMQ, so more processes than the 2 cores help. A later -n in "$@" wins (-n 0: one).
# The 15 slowest tests are listed at the end: where the suite's time goes.
pytest -n 5 --durations=15 "$@"
