#!/usr/bin/env bash
# Install rr into .venv and walk through the refunds/payouts example of the retries guide.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e .
topology=examples/refunds/topology.toml

echo "== rr topology validate $topology"
rr topology validate "$topology"
echo
echo "== rr topology show $topology"
rr topology show "$topology"
echo
if python examples/refunds/broker_up.py; then
  echo "== rr declare $topology --dry-run   (RabbitMQ answers at ${RR_URL:-localhost:5672})"
  rr declare "$topology" --dry-run
  echo
  echo "== rr declare $topology"
  rr declare "$topology"
  echo
  echo "== rr declare $topology   (again: nothing changes)"
  rr declare "$topology"
else
  echo "== no RabbitMQ answers at ${RR_URL:-localhost:5672}: skipping rr declare"
fi
