#!/usr/bin/env bash
# A RabbitMQ 4.0 for the tests, beside the machine's own 3.10 (docs/testing.md).
#
# Debian 13 (trixie) ships RabbitMQ 4.0.5 on Erlang 27. This script builds a minimal trixie
# chroot outside the checkout (once; later runs reuse it), installs rabbitmq-server in it, and
# starts the node rabbit4@localhost on 127.0.0.1:5674 (distribution port 25674), sharing the
# host's epmd. It is idempotent and quiet: when the node already answers, it does nothing.
#
#   scripts/rabbitmq4.sh            build if needed, start if needed, wait until it is up
#   scripts/rabbitmq4.sh ctl ARGS   run rabbitmqctl -n rabbit4@localhost ARGS inside the chroot
#   scripts/rabbitmq4.sh ctl-raw ARGS   run rabbitmqctl ARGS inside the chroot (ARGS name the node)
#   scripts/rabbitmq4.sh stop       stop the node (the chroot stays)
#
# RR_RABBITMQ4_ROOT overrides the chroot's folder (default /var/tmp/rr-rabbitmq4).
set -euo pipefail

ROOT="${RR_RABBITMQ4_ROOT:-/var/tmp/rr-rabbitmq4}"
NODE="rabbit4@localhost"
PORT=5674
DIST_PORT=25674
MIRROR="${RR_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
LOG="${ROOT}.log"

say() { echo "rabbitmq4: $*" >&2; }

mounted() { mountpoint -q "$ROOT/$1"; }

mount_all() {
  mounted proc && mounted dev && mounted tmp && return 0
  # under a lock: parallel test workers (pytest -n) run `ctl-raw` at the same time, and two
  # that both found a folder unmounted would mount it twice
  (
    flock 9
    mounted proc || mount -t proc proc "$ROOT/proc"
    mounted dev || mount --bind /dev "$ROOT/dev"
    # the host's /tmp, so that rabbitmqctl import_definitions /tmp/x.json finds the host's file
    mounted tmp || mount --bind /tmp "$ROOT/tmp"
  ) 9>"$ROOT.mount.lock"
}

in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/rabbitmq "$@"; }

ctl() { in_root rabbitmqctl -n "$NODE" "$@"; }

answers() {
  python3 - "$PORT" <<'PY'
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as sock:
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        sock.settimeout(5)
        sys.exit(0 if sock.recv(8) else 1)
except OSError:
    sys.exit(1)
PY
}

build() {
  [ -x "$ROOT/usr/sbin/rabbitmq-server" ] && return 0
  say "building a Debian trixie chroot with rabbitmq-server in $ROOT (a few minutes, once)"
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >>"$LOG" 2>&1
  mkdir -p "$ROOT"
  [ -x "$ROOT/usr/bin/apt-get" ] || debootstrap --variant=minbase trixie "$ROOT" "$MIRROR" >>"$LOG" 2>&1
  printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
  chmod +x "$ROOT/usr/sbin/policy-rc.d"
  mount_all
  in_root apt-get update -q >>"$LOG" 2>&1
  in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    rabbitmq-server >>"$LOG" 2>&1
}

configure() {
  cat >"$ROOT/etc/rabbitmq/rabbitmq-env.conf" <<EOF
NODENAME=$NODE
NODE_PORT=$PORT
DIST_PORT=$DIST_PORT
NODE_IP_ADDRESS=127.0.0.1
EOF
  cat >"$ROOT/etc/rabbitmq/rabbitmq.conf" <<'EOF'
loopback_users = none
EOF
  # The host's epmd (the 3.10 node's) serves both nodes; both need the same cookie to be
  # addressed with rabbitmqctl from inside the chroot only, so each keeps its own.
  mkdir -p "$ROOT/var/lib/rabbitmq" "$ROOT/var/log/rabbitmq"
  in_root chown -R rabbitmq:rabbitmq /var/lib/rabbitmq /var/log/rabbitmq /etc/rabbitmq
}

start() {
  answers && return 0
  mount_all
  configure
  say "starting $NODE on 127.0.0.1:$PORT"
  in_root su rabbitmq -s /bin/sh -c 'rabbitmq-server -detached' >>"$LOG" 2>&1 || true
  for _ in $(seq 1 90); do
    answers && break
    sleep 2
  done
  ctl await_startup >>"$LOG" 2>&1
  answers || { say "RabbitMQ 4 did not come up; see $LOG"; return 1; }
}

case "${1:-up}" in
  up) build && start ;;
  ctl) shift; mount_all; ctl "$@" ;;
  ctl-raw) shift; mount_all; in_root rabbitmqctl "$@" ;;
  stop) answers && ctl stop >>"$LOG" 2>&1 || true ;;
  *) say "usage: $0 [up|ctl ARGS...|ctl-raw ARGS...|stop]"; exit 2 ;;
esac
