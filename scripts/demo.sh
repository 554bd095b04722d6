#!/usr/bin/env bash
# Install rr into .venv and run the refunds/payouts example of the retries guide end to end:
# first on rr's emulator (virtual clock), then on the local RabbitMQ when one answers. Both
# publish the same messages (examples/refunds/messages.jsonl), and the demo ends with where
# each one ended (examples/refunds/progress.py; docs/runtime.md, "rr simulate").
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e .
example=examples/refunds
export COLUMNS="${COLUMNS:-120}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== rr topology show $example/topology.toml"
rr topology show "$example/topology.toml"
echo
echo "== rr simulate: the service on the emulator; virtual time jumps to the end of each wait,"
echo "   and the run stops once nothing is left to happen"
"$example/demo_emulator.sh" "$work"
echo

if ! python "$example/broker_up.py"; then
  echo "== no RabbitMQ answers at ${RR_URL:-localhost:5672}: the emulator run above is the demo"
  echo
  echo "== where each message ended"
  python "$example/progress.py" table "$work/simulated.json"
  exit 0
fi
echo "== RabbitMQ answers at ${RR_URL:-localhost:5672}: the same service and messages, for real"
"$example/demo_rabbitmq.sh" "$work"
