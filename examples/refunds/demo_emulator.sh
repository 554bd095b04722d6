#!/usr/bin/env bash
# The demo's emulator part (scripts/demo.sh): rr simulate publishes messages.jsonl, the list
# demo_rabbitmq.sh sends to RabbitMQ with rr publish, and prints the timeline (a receipt a
# refund paid publishes is an "output" row under its ack); its JSON document goes to
# WORK/simulated.json for the demo's last table. Needs rr and python on PATH.
set -euo pipefail
example=$(dirname "$0")
work=${1:?usage: demo_emulator.sh WORK_DIR}
rr simulate "$example/topology.toml" "$example/service.py" \
  --publish-file "$example/messages.jsonl" 2>/dev/null
rr simulate "$example/topology.toml" "$example/service.py" \
  --publish-file "$example/messages.jsonl" --output json >"$work/simulated.json" 2>/dev/null
