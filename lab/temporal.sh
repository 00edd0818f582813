#!/usr/bin/env bash
# The lab's Temporal: `temporal server start-dev` (Web UI on) from the cached CLI binary, persisted
# to a SQLite file in $LAB_DIR/temporal so a restart keeps workflows, with vmsnap's search
# attributes registered at every start (registering them again on restart is accepted).
#
#   lab/temporal.sh up       start (or keep running); write env.d/temporal.env
#   lab/temporal.sh status   "temporal ok" / "temporal down: why" (exit 1 when down)
#   lab/temporal.sh stop     stop the server (SIGTERM, SIGKILL after 15 s); keep the database
#   lab/temporal.sh kill     SIGKILL the server (a crash); keep the database
#   lab/temporal.sh start    start it again on the same database and wait until it answers
#   lab/temporal.sh down     stop and remove $LAB_DIR/temporal
#
# Environment: LAB_DIR, TEMPORAL_BIN (default ~/.cache/vmsnap/temporal-v1.5.1, built by lab/deps.sh),
# TEMPORAL_PORT (default 7233) and TEMPORAL_UI_PORT (default TEMPORAL_PORT + 1000) for a second lab.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WHO=temporal
TEMPORAL_BIN="${TEMPORAL_BIN:-$TEMPORAL_BIN_DEFAULT}"
T_DIR="$LAB_DIR/temporal"
DB="$T_DIR/temporal.db"
LOG="$T_DIR/server.log"
PIDFILE="$T_DIR/server.pid"
IP=127.0.0.1
PORT="${TEMPORAL_PORT:-7233}"
UI_PORT="${TEMPORAL_UI_PORT:-$((PORT + 1000))}"
ADDRESS="$IP:$PORT"
NAMESPACE=default
SEARCH_ATTRIBUTES=(
  VmsnapDomain=Keyword
  VmsnapHost=Keyword
  VmsnapPhase=Keyword
  VmsnapQuiesced=Bool
  VmsnapResult=Keyword
  VmsnapDomains=KeywordList
  VmsnapHostState=Keyword
)

running() { pid_running "$PIDFILE" "$DB"; }
gone() { ! running; }
port_free() { ! port_in_use "$1"; }

# ready: the frontend answers and the namespace lists every vmsnap search attribute.
ready() {
  local listed name
  listed="$(timeout 5 "$TEMPORAL_BIN" operator search-attribute list \
    --address "$ADDRESS" --namespace "$NAMESPACE" 2>/dev/null)" || return 1
  for name in "${SEARCH_ATTRIBUTES[@]}"; do
    grep -qw -- "${name%%=*}" <<<"$listed" || return 1
  done
}

start_server() {
  local t port args sa
  t="$(now)"
  if running; then
    say "$WHO" "already running (pid $(pidfile_pid "$PIDFILE"))"
  else
    [[ -x "$TEMPORAL_BIN" ]] || die "$WHO" "no Temporal binary at $TEMPORAL_BIN: run bash lab/deps.sh"
    for port in "$PORT" "$UI_PORT"; do
      # A server that was just stopped may hold its port for a moment while its threads exit.
      if ! wait_until 5 port_free "$port"; then
        die "$WHO" "port $port is in use by another process (ss -ltnp 'sport = :$port')"
      fi
    done
    mkdir -p "$T_DIR"
    args=(server start-dev --ip "$IP" --port "$PORT" --ui-port "$UI_PORT"
      --db-filename "$DB" --namespace "$NAMESPACE")
    for sa in "${SEARCH_ATTRIBUTES[@]}"; do args+=(--search-attribute "$sa"); done
    if [[ -f "$DB" ]]; then
      say "$WHO" "starting on the existing database $DB"
    else
      say "$WHO" "starting with a new database $DB"
    fi
    printf '\n==== %s start: %s %s\n' "$(date -u +%FT%TZ)" "$TEMPORAL_BIN" "${args[*]}" >>"$LOG"
    # The wrapper writes its own pid, then execs the server: the pid file names the server itself.
    # shellcheck disable=SC2016 # $$, $1 and $@ belong to the wrapper shell
    setsid bash -c 'echo "$$" >"$1"; shift; exec "$@"' _ "$PIDFILE" "$TEMPORAL_BIN" "${args[@]}" \
      >>"$LOG" 2>&1 </dev/null &
  fi
  if ! wait_until 60 ready; then
    running || die "$WHO" "the server exited, see $LOG"
    die "$WHO" "the server does not answer on $ADDRESS after 60 s, see $LOG"
  fi
  say "$WHO" "ready on $ADDRESS (search attributes registered) in $(elapsed "$t") s; UI http://$IP:$UI_PORT"
}

cmd_up() {
  start_server
  write_env temporal <<EOF
TEMPORAL_ADDRESS $ADDRESS
TEMPORAL_NAMESPACE $NAMESPACE
TEMPORAL_UI_URL http://$IP:$UI_PORT
TEMPORAL_BIN $TEMPORAL_BIN
TEMPORAL_DB $DB
TEMPORAL_LOG $LOG
EOF
}

cmd_status() {
  if ! running; then
    echo "temporal down: server not running"
    return 1
  fi
  if ! timeout 5 "$TEMPORAL_BIN" operator cluster health --address "$ADDRESS" 2>/dev/null | grep -q SERVING; then
    echo "temporal down: $ADDRESS does not answer a health check"
    return 1
  fi
  echo "temporal ok ($ADDRESS, UI http://$IP:$UI_PORT, pid $(pidfile_pid "$PIDFILE"))"
}

cmd_stop() {
  local t
  t="$(now)"
  stop_pidfile "$PIDFILE" "$DB" 15
  say "$WHO" "stopped in $(elapsed "$t") s (database kept)"
}

cmd_kill() {
  if running; then
    kill -KILL "$(pidfile_pid "$PIDFILE")"
    wait_until 10 gone || die "$WHO" "the server survived SIGKILL"
  fi
  rm -f "$PIDFILE"
  say "$WHO" "killed (database kept)"
}

cmd_down() {
  stop_pidfile "$PIDFILE" "$DB" 15
  rm -rf "$T_DIR" "$ENV_D/temporal.env"
  say "$WHO" "stopped and removed $T_DIR"
}

case "${1:-}" in
  up) cmd_up ;;
  status) cmd_status ;;
  stop) cmd_stop ;;
  kill) cmd_kill ;;
  start) start_server ;;
  down) cmd_down ;;
  *)
    echo "usage: lab/temporal.sh up|status|stop|kill|start|down" >&2
    exit 2
    ;;
esac
