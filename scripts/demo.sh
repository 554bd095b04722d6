#!/usr/bin/env bash
# Install rr into .venv and run the refunds/payouts example of the retries guide end to end:
# first on rr's emulator (virtual clock), then on the local RabbitMQ when one answers. Both
# publish the same messages (examples/refunds/messages.jsonl), and the demo ends with where
# each one ended (examples/refunds/progress.py; docs/reference/runtime.md, "rr simulate").
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

# where the demo's broker is, as it may be shown: a password in $RR_URL is masked
broker=$(python -c 'import os; from rabbitctl_retry.errors import censor_url; print(censor_url(os.environ.get("RR_URL", "localhost:5672")))')
if ! python "$example/broker_up.py"; then
  echo "== no RabbitMQ answers at $broker: the emulator run above is the demo"
  echo
  echo "== where each message ended"
  python "$example/progress.py" table "$work/simulated.json"
  exit 0
fi
echo "== RabbitMQ answers at $broker: the same service and messages, for real"
"$example/demo_rabbitmq.sh" "$work"
