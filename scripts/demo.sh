#!/usr/bin/env bash
# Install rr into .venv and run the refunds/payouts example of the retries guide end to end:
# first on rr's emulator (virtual clock), then on the local RabbitMQ when one answers.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -e .
example=examples/refunds
export COLUMNS="${COLUMNS:-120}"

echo "== rr topology show $example/topology.toml"
rr topology show "$example/topology.toml"
echo
echo "== rr simulate: the service on the emulator, 2 minutes of virtual time in no time"
rr simulate "$example/topology.toml" "$example/service.py" \
  -p 'refunds={"id": 1, "card": "4111", "amount_cents": 1250}' \
  -p 'refunds={"id": 2, "card": "unavailable", "amount_cents": 990}' \
  -p 'refunds={"id": 3, "card": "busy", "amount_cents": 4200}' \
  -p 'payouts={"id": 5, "card": "unavailable", "amount_cents": 50000}' \
  -p 'payouts={"id": 6, "card": "declined", "amount_cents": 7000}' 2>/dev/null
echo

if ! python "$example/broker_up.py"; then
  echo "== no RabbitMQ answers at ${RR_URL:-localhost:5672}: the emulator run above is the demo"
  exit 0
fi
echo "== RabbitMQ answers at ${RR_URL:-localhost:5672}: the same service for real"
rr declare "$example/topology.toml"
rr run "$example/service.py" --topology "$example/topology.toml" --log-level warning &
service=$!
trap 'kill "$service" 2>/dev/null || true' EXIT
sleep 2
python "$example/publish.py"
sleep 3
echo
echo "== after 3 seconds (the busy refund waits 30 s in refunds.retry, on the broker)"
kill -TERM "$service"
wait "$service" || true
trap - EXIT
python "$example/show_queues.py"
