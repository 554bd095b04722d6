#!/usr/bin/env bash
# A local three-node RabbitMQ 3.10 cluster for rr's cluster tests (tests/cluster/).
#
#   scripts/cluster.sh up            start rrc1..rrc3@localhost and join them (idempotent)
#   scripts/cluster.sh status        each node's state and the cluster's running nodes
#   scripts/cluster.sh down          stop these three nodes and remove their data folder
#   scripts/cluster.sh stop-node N   rabbitmqctl -n rrcN@localhost stop_app (failover tests)
#   scripts/cluster.sh start-node N  rabbitmqctl -n rrcN@localhost start_app
#
# The nodes run from the machine's own RabbitMQ package, as root (the Debian wrapper
# /usr/sbin/rabbitmq-server then runs them as the rabbitmq user):
#
#   node            AMQP              distribution  management API (HTTP)
#   rrc1@localhost  127.0.0.1:5681    25681         127.0.0.1:15681
#   rrc2@localhost  127.0.0.1:5682    25682         127.0.0.1:15682
#   rrc3@localhost  127.0.0.1:5683    25683         127.0.0.1:15683
#
# All their data (Mnesia, quorum logs, logs, pid files, config) lives under one folder,
# $RR_CLUSTER_DIR (default /var/tmp/rr-cluster), owned by the rabbitmq user. The cluster stays
# up until `down`: the next test session reuses it.
#
# Every command here names one of these three nodes explicitly (rabbitmqctl -n rrcN@localhost):
# the shared nodes rabbit@localhost (5672) and rabbit4@localhost (5674) are never addressed.
# Each node gets its own rabbitmq.conf and rabbitmq-env.conf, because the machine's files in
# /etc/rabbitmq pin the shared node's listener (5672) and node name; RABBITMQ_CONFIG_FILE takes
# the full path including the ".conf" extension (the new-style format is chosen by it).
#
# The Erlang cookie: root has no ~/.erlang.cookie, and needs none. Both rabbitmq-server and
# rabbitmqctl, started by root, are re-run by the Debian wrapper as the rabbitmq user through
# su/runuser, which sets HOME=/var/lib/rabbitmq; the server and the CLI therefore both read
# /var/lib/rabbitmq/.erlang.cookie, so the three nodes share one cookie with each other and
# with every rabbitmqctl started by root. (It is the shared node's cookie too; that only makes
# the nodes reachable, and nothing here ever names the shared nodes.) That is why this script
# must run as root (or, untested, as the rabbitmq user itself).
#
# Concurrent calls (two pytest sessions, xdist workers) are serialised with flock.
set -euo pipefail

DIR=${RR_CLUSTER_DIR:-/var/tmp/rr-cluster}
DIR=${DIR%/}
LOCK="$DIR.lock"
MARK=".rr-cluster"
TIMEOUT=${RR_CLUSTER_TIMEOUT:-120} # seconds per node start
NODES=(1 2 3)
PATH="$PATH:/usr/sbin:/usr/local/sbin"

# Nothing of the caller's RabbitMQ/Erlang environment may leak into our nodes or CLI calls.
while IFS= read -r var; do
  case "$var" in RABBITMQ_* | ERL_*) unset "$var" ;; esac
done < <(compgen -e)

say() { printf 'cluster: %s\n' "$*"; }
die() {
  printf 'cluster: %s\n' "$*" >&2
  exit 1
}

node() { printf 'rrc%s@localhost' "$1"; }
amqp_port() { printf '%s' $((5680 + $1)); }
dist_port() { printf '%s' $((25680 + $1)); }
http_port() { printf '%s' $((15680 + $1)); }
node_dir() { printf '%s/rrc%s' "$DIR" "$1"; }
pid_file() { printf '%s/rabbitmq.pid' "$(node_dir "$1")"; }

# rabbitmqctl (or another CLI tool) against node N, bounded in time.
ctl() {
  local n=$1
  shift
  timeout 90 rabbitmqctl -q -n "$(node "$n")" "$@"
}
diag() {
  local n=$1
  shift
  timeout 30 rabbitmq-diagnostics -q -n "$(node "$n")" "$@"
}

# The Erlang VM of node N answers.
vm_up() { diag "$1" ping >/dev/null 2>&1; }
# The rabbit application of node N runs.
app_up() { diag "$1" check_running >/dev/null 2>&1; }

state() {
  if ! vm_up "$1"; then
    printf 'down'
  elif app_up "$1"; then
    printf 'running'
  else
    printf 'app stopped'
  fi
}

# The nodes listed under KEY ("running_nodes", "disk_nodes") in node N's cluster_status.
cluster_nodes() {
  local json
  json=$(ctl "$1" cluster_status --formatter json 2>/dev/null) || return 0
  grep -o "\"$2\":\[[^]]*\]" <<<"$json" | grep -o 'rrc[0-9]@localhost' | sort | paste -sd ' ' - || true
}

all_running() {
  [ "$(cluster_nodes 1 running_nodes)" = "rrc1@localhost rrc2@localhost rrc3@localhost" ]
}

need_root() {
  [ "$(id -u)" = 0 ] || die "must run as root (the rabbitmq wrapper and the shared cookie, see the header)"
  local tool
  for tool in rabbitmq-server rabbitmqctl rabbitmq-diagnostics; do
    command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install rabbitmq-server)"
  done
  id rabbitmq >/dev/null 2>&1 || die "no rabbitmq user (is the rabbitmq-server package installed?)"
}

lock() {
  mkdir -p "$(dirname "$DIR")"
  exec 9>"$LOCK"
  flock -w 600 9 || die "another scripts/cluster.sh holds $LOCK for 10 minutes"
}

check_node_arg() {
  case "${1:-}" in 1 | 2 | 3) ;; *) die "node number must be 1, 2 or 3, not '${1:-}'" ;; esac
}

# Node N's rabbitmq.conf, as this script writes it.
config_text() {
  cat <<EOF
# rrc$1@localhost of scripts/cluster.sh
listeners.tcp.local = 127.0.0.1:$(amqp_port "$1")
loopback_users = none
log.console = false
log.file.level = info
management.tcp.ip = 127.0.0.1
management.tcp.port = $(http_port "$1")
EOF
}
PLUGINS='[rabbitmq_management].'

# Node N runs with what this script writes now (a node started by an older version of it is
# restarted by `up`, keeping its data and its place in the cluster).
config_current() {
  local d
  d=$(node_dir "$1")
  [ "$(cat "$d/rabbitmq.conf" 2>/dev/null)" = "$(config_text "$1")" ] &&
    [ "$(cat "$d/enabled_plugins" 2>/dev/null)" = "$PLUGINS" ]
}

# Create node N's folder and files (kept when they exist: a restarted node keeps its data).
prepare() {
  local n=$1 d
  d=$(node_dir "$n")
  mkdir -p "$DIR" "$d/mnesia" "$d/log"
  touch "$DIR/$MARK"
  config_text "$n" >"$d/rabbitmq.conf"
  printf '# rrc%s@localhost of scripts/cluster.sh: no settings (not /etc/rabbitmq/rabbitmq-env.conf)\n' \
    "$n" >"$d/rabbitmq-env.conf"
  printf '%s\n' "$PLUGINS" >"$d/enabled_plugins"
  chmod 755 "$DIR"
  chown -R rabbitmq:rabbitmq "$DIR"
}

# Start node N's Erlang VM in the background (rabbitmq-server -detached returns at once).
# Without `9>&-` the detached VM would inherit the lock's file descriptor and hold the lock
# for as long as it runs.
launch() {
  local n=$1 d
  d=$(node_dir "$n")
  prepare "$n"
  rm -f "$(pid_file "$n")"
  say "starting $(node "$n") (AMQP 127.0.0.1:$(amqp_port "$n"), distribution $(dist_port "$n"))"
  env \
    RABBITMQ_NODENAME="$(node "$n")" \
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$(amqp_port "$n")" \
    RABBITMQ_DIST_PORT="$(dist_port "$n")" \
    RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" \
    RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" \
    RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf" \
    RABBITMQ_MNESIA_BASE="$d/mnesia" \
    RABBITMQ_LOG_BASE="$d/log" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" \
    RABBITMQ_PID_FILE="$(pid_file "$n")" \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
    ERL_EPMD_ADDRESS=127.0.0.1 \
    timeout 60 rabbitmq-server -detached </dev/null >>"$d/startup.log" 2>&1 9>&- ||
    die "rabbitmq-server -detached failed for $(node "$n"): $(tail -n 20 "$d/startup.log")"
}

# Wait until node N's rabbit application has booted.
await() {
  local n=$1
  if ! timeout $((TIMEOUT + 30)) rabbitmqctl -q -n "$(node "$n")" wait --timeout "$TIMEOUT" \
    "$(pid_file "$n")" >/dev/null 2>&1; then
    printf 'cluster: %s did not start within %s s; log tail:\n' "$(node "$n")" "$TIMEOUT" >&2
    tail -n 30 "$(node_dir "$n")/log/$(node "$n").log" >&2 2>/dev/null || true
    tail -n 10 "$(node_dir "$n")/startup.log" >&2 2>/dev/null || true
    exit 1
  fi
}

cmd_up() {
  need_root
  lock
  if all_running; then
    local n restarted=0
    for n in "${NODES[@]}"; do
      config_current "$n" && continue
      say "restarting $(node "$n") with this script's current configuration (data kept)"
      ctl "$n" stop "$(pid_file "$n")" >/dev/null || true
      launch "$n"
      await "$n"
      restarted=1
    done
    if [ "$restarted" = 0 ]; then
      say "already up: rrc1..rrc3@localhost running in one cluster (AMQP 127.0.0.1:5681-5683)"
      return 0
    fi
    all_running || die "the cluster did not come back: running nodes seen by rrc1: '$(cluster_nodes 1 running_nodes)'"
    say "up: rrc1..rrc3@localhost running in one cluster (AMQP 127.0.0.1:5681-5683, management HTTP 15681-15683)"
    return 0
  fi
  local n st launched=() stopped=()
  for n in "${NODES[@]}"; do
    st=$(state "$n")
    case "$st" in
      down) launch "$n" && launched+=("$n") ;;
      "app stopped") stopped+=("$n") ;;
    esac
  done
  # All VMs are started before waiting on any: a node that was clustered before (data kept,
  # e.g. after a reboot) waits at boot for its peers.
  for n in ${launched[@]+"${launched[@]}"}; do await "$n"; done
  for n in ${stopped[@]+"${stopped[@]}"}; do
    say "start_app on $(node "$n")"
    ctl "$n" start_app >/dev/null
  done
  local members
  members=$(cluster_nodes 1 disk_nodes)
  for n in 2 3; do
    case " $members " in *" $(node "$n") "*) continue ;; esac
    say "joining $(node "$n") to rrc1@localhost"
    # join_cluster prints feature-flag warnings and "tracked connection table" errors that
    # RabbitMQ 3.10 logs on every join: kept in join.log, shown only when a step fails.
    {
      ctl "$n" stop_app && ctl "$n" reset && ctl "$n" join_cluster rrc1@localhost &&
        ctl "$n" start_app
    } >"$DIR/join.log" 2>&1 || die "joining $(node "$n") failed: $(tail -n 30 "$DIR/join.log")"
  done
  all_running || die "the cluster did not come up: running nodes seen by rrc1: '$(cluster_nodes 1 running_nodes)'"
  say "up: rrc1..rrc3@localhost running in one cluster (AMQP 127.0.0.1:5681-5683, management HTTP 15681-15683, data in $DIR)"
}

cmd_status() {
  need_root
  local n ok=0
  for n in "${NODES[@]}"; do
    printf '%s  amqp 127.0.0.1:%s  %s\n' "$(node "$n")" "$(amqp_port "$n")" "$(state "$n")"
  done
  printf 'running nodes (cluster_status of rrc1@localhost): %s\n' "$(cluster_nodes 1 running_nodes)"
  printf 'cluster members (disk nodes): %s\n' "$(cluster_nodes 1 disk_nodes)"
  all_running || ok=1
  return "$ok"
}

cmd_down() {
  need_root
  lock
  local n pid
  for n in "${NODES[@]}"; do
    if vm_up "$n"; then
      say "stopping $(node "$n")"
      if [ -f "$(pid_file "$n")" ]; then
        ctl "$n" stop "$(pid_file "$n")" >/dev/null || true
      else
        ctl "$n" stop >/dev/null || true
      fi
    fi
    # A VM that ignored `stop`: end it by the pid it wrote, if that process is this node's
    # (its environment names the node; the command line does not).
    pid=$(cat "$(pid_file "$n")" 2>/dev/null || true)
    if [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null |
      grep -qx "RABBITMQ_NODENAME=$(node "$n")"; then
      say "killing $(node "$n") (pid $pid)"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  if [ -d "$DIR" ]; then
    [ -f "$DIR/$MARK" ] || die "$DIR has no $MARK file: not removing a folder this script did not create"
    rm -rf -- "$DIR"
    say "removed $DIR"
  fi
  say "down"
}

cmd_app() {
  need_root
  check_node_arg "${2:-}"
  say "$1 on $(node "$2")"
  ctl "$2" "$1" >/dev/null
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  stop-node) cmd_app stop_app "${2:-}" ;;
  start-node) cmd_app start_app "${2:-}" ;;
  *)
    echo "usage: $0 up|down|status|stop-node N|start-node N" >&2
    exit 2
    ;;
esac
