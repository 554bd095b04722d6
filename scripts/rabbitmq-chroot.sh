#!/usr/bin/env bash
# The newer RabbitMQ servers of the tests, beside the machine's own 3.10, each in a Debian
# chroot of its own (docs/reference/testing.md, "Three servers"). One script for every release:
#
#   release  Debian suite   RabbitMQ, Erlang  node                AMQP  distribution  management
#   4.0      trixie (13)    4.0.5, OTP 27     rabbit4@localhost   5674  25674         15674
#   4.3      sid            4.3.6, OTP 29     rabbit43@localhost  5675  25675         15675
#
#   scripts/rabbitmq-chroot.sh RELEASE [up]         build if needed, start if needed, wait
#   scripts/rabbitmq-chroot.sh RELEASE ctl ARGS     rabbitmqctl -n NODE ARGS inside the chroot
#   scripts/rabbitmq-chroot.sh RELEASE ctl-raw ARGS rabbitmqctl ARGS inside the chroot (ARGS
#                                                   name the node)
#   scripts/rabbitmq-chroot.sh RELEASE stop         stop the node (the chroot stays)
#   scripts/rabbitmq-chroot.sh releases             the releases this script knows, one a line
#
# scripts/rabbitmq4.sh and scripts/rabbitmq43.sh are this script for 4.0 and 4.3.
#
# Each chroot is a minimal Debian (debootstrap --variant=minbase) outside the checkout, built
# once and reused: RR_RABBITMQ4_ROOT (default /var/tmp/rr-rabbitmq4) and RR_RABBITMQ43_ROOT
# (default /var/tmp/rr-rabbitmq43). rabbitmq-server is installed in it from the Debian mirror
# (RR_DEBIAN_MIRROR), and its node listens on 127.0.0.1 only, sharing the host's epmd. sid
# moves: a build that gets another release line than the table says stops with an error.
# Needs root. Idempotent and quiet: when the node already answers, `up` does nothing.
set -euo pipefail

MIRROR="${RR_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
RELEASES=(4.0 4.3)

say() { echo "rabbitmq-chroot: $*" >&2; }

usage() {
  say "usage: $0 RELEASE [up|ctl ARGS...|ctl-raw ARGS...|stop], RELEASE one of ${RELEASES[*]}; or: $0 releases"
  exit 2
}

[ $# -ge 1 ] || usage
RELEASE=$1
shift
case "$RELEASE" in
  releases) printf '%s\n' "${RELEASES[@]}"; exit 0 ;;
  4.0)
    SUITE=trixie
    ROOT="${RR_RABBITMQ4_ROOT:-/var/tmp/rr-rabbitmq4}"
    NODE="rabbit4@localhost"
    PORT=5674
    DIST_PORT=25674
    MANAGEMENT_PORT=15674
    ;;
  4.3)
    SUITE=sid
    ROOT="${RR_RABBITMQ43_ROOT:-/var/tmp/rr-rabbitmq43}"
    NODE="rabbit43@localhost"
    PORT=5675
    DIST_PORT=25675
    MANAGEMENT_PORT=15675
    ;;
  *) usage ;;
esac
ROOT="${ROOT%/}"
LOG="${ROOT}.log"

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
    # (and a private node of the fault suite, tests/faults/node.py, keeps its folder there)
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

hosts_file() {
  # sid's minbase has no netbase, so no /etc/hosts: Erlang cannot resolve localhost and the
  # node dies at boot with {epmd_error,"localhost",nxdomain} (only in erl_crash.dump). And the
  # machine's host name: without it the node's lookups of it go to DNS, and on this machine
  # about one in 30 waits 5 s, which made about one connection in 55 get its connection.start
  # 5 s late (docs/reference/testing.md, "Three servers"). Added when missing, also to a running node's
  # chroot (no restart needed).
  local name
  name=$(hostname 2>/dev/null || true)
  for entry in localhost ${name:+"$name"}; do
    awk -v name="$entry" '$1 == "127.0.0.1" { for (i = 2; i <= NF; i++) if ($i == name) found = 1 }
      END { exit !found }' "$ROOT/etc/hosts" 2>/dev/null || echo "127.0.0.1 $entry" >>"$ROOT/etc/hosts"
  done
}

installed_release() { in_root dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || true; }

build() {
  if [ ! -x "$ROOT/usr/sbin/rabbitmq-server" ]; then
    say "building a Debian $SUITE chroot with rabbitmq-server in $ROOT (a few minutes, once)"
    # (waiting for the dpkg lock: another apt-get, such as the one installing Chromium, may run)
    command -v debootstrap >/dev/null || apt-get -o DPkg::Lock::Timeout=600 install -y -q debootstrap >>"$LOG" 2>&1
    mkdir -p "$ROOT"
    [ -x "$ROOT/usr/bin/apt-get" ] || debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >>"$LOG" 2>&1 ||
      { say "debootstrap of Debian $SUITE failed (its log: $LOG)"; return 1; }
    printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
    chmod +x "$ROOT/usr/sbin/policy-rc.d"
    hosts_file
    mount_all
    in_root apt-get update -q >>"$LOG" 2>&1
    in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      rabbitmq-server >>"$LOG" 2>&1
  fi
  local version
  version=$(installed_release)
  case "$version" in
    "$RELEASE".*) ;;
    *)
      say "$ROOT has rabbitmq-server ${version:-(none)}, not $RELEASE.x (Debian $SUITE moved on?)"
      return 1
      ;;
  esac
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
  if [ -n "$MANAGEMENT_PORT" ]; then
    cat >>"$ROOT/etc/rabbitmq/rabbitmq.conf" <<EOF
management.tcp.ip = 127.0.0.1
management.tcp.port = $MANAGEMENT_PORT
EOF
    echo "[rabbitmq_management]." >"$ROOT/etc/rabbitmq/enabled_plugins"
  fi
  # The host's epmd (the 3.10 node's) serves every node; each chroot's node keeps its own
  # Erlang cookie, so only a rabbitmqctl inside that chroot can address it.
  mkdir -p "$ROOT/var/lib/rabbitmq" "$ROOT/var/log/rabbitmq"
  in_root chown -R rabbitmq:rabbitmq /var/lib/rabbitmq /var/log/rabbitmq /etc/rabbitmq
}

# The management API listens (a node started before the script enabled it does not).
management_answers() {
  [ -z "$MANAGEMENT_PORT" ] && return 0
  python3 - "$MANAGEMENT_PORT" <<'PY'
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
except OSError:
    sys.exit(1)
PY
}

start() {
  if answers; then
    management_answers && return 0
    say "$NODE answers without its management API on $MANAGEMENT_PORT; restarting it"
    ctl stop >>"$LOG" 2>&1 || true
    for _ in $(seq 1 30); do
      answers || break
      sleep 1
    done
  fi
  mount_all
  configure
  say "starting $NODE on 127.0.0.1:$PORT"
  in_root su rabbitmq -s /bin/sh -c 'rabbitmq-server -detached' >>"$LOG" 2>&1 || true
  for _ in $(seq 1 90); do
    answers && break
    sleep 2
  done
  ctl await_startup >>"$LOG" 2>&1 || true
  answers || { say "RabbitMQ $RELEASE did not come up; see $LOG (and $ROOT/var/lib/rabbitmq/erl_crash.dump)"; return 1; }
}

case "${1:-up}" in
  up) build && hosts_file && start ;;
  ctl) shift; mount_all; ctl "$@" ;;
  ctl-raw) shift; mount_all; in_root rabbitmqctl "$@" ;;
  stop) if answers; then ctl stop >>"$LOG" 2>&1 || true; fi ;;
  *) usage ;;
esac
