#!/usr/bin/env bash
# The demo's RabbitMQ part (scripts/demo.sh), at $RR_URL (default localhost): declare, run the
# service, publish messages.jsonl with rr publish, keep serving until every message ended as
# the emulator said it would (WORK/simulated.json, from demo_emulator.sh), the receipts it
# published wait in refunds.receipts and the other queues are empty, stop, show the log and
# the queues, read the receipts (the queue is empty after), show where each message ended,
# then delete the example's queues (each only if empty: nothing is left on the broker). Waits
# on rr's /healthz and log lines and on queue depths, never on a guessed time (progress.py).
# Needs rr and python on PATH.
set -euo pipefail
example=$(dirname "$0")
work=${1:?usage: demo_rabbitmq.sh WORK_DIR}
rr declare "$example/topology.toml"
port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
rr run "$example/service.py" --topology "$example/topology.toml" --log-format json \
  --metrics-port "$port" --metrics-bind 127.0.0.1 2>"$work/run.log" &
service=$!
trap 'kill "$service" 2>/dev/null || true' EXIT
if ! python "$example/progress.py" ready "$port" "$service"; then # /healthz: consuming
  python "$example/progress.py" log "$work/run.log"
  exit 1
fi
for queue in refunds payouts; do # rr publish --file reads rr's export format (docs/reference/cli.md)
  python "$example/progress.py" export "$queue" >"$work/$queue.jsonl"
  rr publish "$queue" --file "$work/$queue.jsonl"
done
echo "   (rr run serves until every message reached its end, its receipts wait in refunds.receipts"
echo "    and the other queues are empty)"
status=0
python "$example/progress.py" ended "$work/simulated.json" "$work/run.log" || status=$?
kill -TERM "$service"
wait "$service" || true
trap - EXIT
echo
echo "== what rr run and the service logged"
python "$example/progress.py" log "$work/run.log"
echo
echo "== the example's queues, after the stop"
python "$example/show_queues.py"
echo
echo "== the receipts in refunds.receipts, read as the bookkeeping would (and acked)"
python "$example/progress.py" receipts "$work/simulated.json" "$work/receipts.json" || status=$?
echo
echo "== where each message ended"
python "$example/progress.py" table "$work/simulated.json" "$work/run.log" "$work/receipts.json" ||
  status=$?
echo
echo "== clean up"
python "$example/progress.py" clean || status=$?
exit "$status"
