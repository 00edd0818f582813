#!/usr/bin/env bash
# The lab: real Ceph, Temporal, libvirt and guests on this machine, all state in $LAB_DIR
# (default <repo>/.lab). npm run lab:up | lab:status | lab:down call this script.
#
#   lab/lab.sh up       install what is missing (lab/deps.sh), then bring every component up, in
#                       order; idempotent: running components are kept. Writes $LAB_DIR/env.
#   lab/lab.sh up --dr  the same, plus the DR site (lab/dr.sh: a second Ceph cluster and rbd-mirror)
#   lab/lab.sh status   one line per component; exit 1 if any is down
#   lab/lab.sh down     any lab worker left running (lab/worker.sh) stopped, every component down
#                       in reverse order, then remove $LAB_DIR
#
# Environment: LAB_DIR (default $VMSNAP_LAB_DIR, else <repo>/.lab), LAB_COMPONENTS (default "ceph temporal libvirt
# guests"), PAXOS_PROPOSE_INTERVAL (lab/ceph.sh), CEPH_MON_PORT / TEMPORAL_PORT (a second lab).
#
# Contract for a component script lab/<c>.sh (c in COMPONENTS below; skipped when the file is absent):
#   - `lab/<c>.sh up|status|down`, run with LAB_DIR and VMSNAP_LAB_ENV=$LAB_DIR/env exported.
#   - `up` is idempotent, exits non-zero on failure, and writes its env lines
#     (`export KEY='value'`) to $LAB_DIR/env.d/<c>.env. Before each component runs, lab.sh
#     rewrites $LAB_DIR/env from env.d, so `source "$VMSNAP_LAB_ENV"` gives what earlier
#     components wrote (Ceph and Temporal keys first).
#   - `status` prints one line starting with "<c> ok" or "<c> down", exits non-zero when down.
#   - `down` stops only the processes it started (by pid) and removes its state.
#   - Output goes to $LAB_DIR/log/<c>.log (shown live). On failure lab.sh prints the last 30
#     lines of it and of each *.log under $LAB_DIR/<c>/ written during the run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WHO=lab
# debian (lab/debian.sh, the distribution guest) and dr (lab/dr.sh, the DR site) are brought up by
# the tests that need them (or `up --dr`), not by default; down takes them down with the rest, dr
# first (it removes its peer entry from the lab's cluster).
ALL_COMPONENTS=(ceph temporal libvirt guests debian dr)
DEFAULT_COMPONENTS=(ceph temporal libvirt guests)
# LAB_COMPONENTS="ceph temporal" brings up only those (e.g. a benchmark that needs no guests).
read -r -a COMPONENTS <<<"${LAB_COMPONENTS:-${DEFAULT_COMPONENTS[*]}}"
LOG_DIR="$LAB_DIR/log"
ENV_FILE="$LAB_DIR/env"
export LAB_DIR VMSNAP_LAB_ENV="$ENV_FILE"

component_script() { echo "$REPO/lab/$1.sh"; }
present() { [[ -f "$(component_script "$1")" ]]; }

# assemble_env: $LAB_DIR/env = env.d/lab.env, then each component's file in COMPONENTS order,
# then any other env.d/*.env.
assemble_env() {
  local tmp f c
  local -A seen=()
  mkdir -p "$ENV_D"
  tmp="$(mktemp "$LAB_DIR/.env.XXXXXX")"
  {
    echo "# vmsnap lab environment, assembled by lab/lab.sh from $ENV_D. Source it."
    for c in lab "${COMPONENTS[@]}"; do
      f="$ENV_D/$c.env"
      seen[$f]=1
      [[ -f "$f" ]] && cat "$f"
    done
    for f in "$ENV_D"/*.env; do
      [[ -f "$f" && -z "${seen[$f]:-}" ]] && cat "$f"
    done
  } >"$tmp"
  mv -f "$tmp" "$ENV_FILE"
}

# show_failure C STAMP: the component's own log and the logs under $LAB_DIR/C written since STAMP.
show_failure() {
  local c="$1" stamp="$2" f
  {
    echo
    echo "==== lab: component '$c' failed. Last 30 lines of $LOG_DIR/$c.log:"
    tail -n 30 "$LOG_DIR/$c.log" 2>/dev/null || true
    if [[ -d "$LAB_DIR/$c" ]]; then
      while IFS= read -r f; do
        echo "==== last 30 lines of $f:"
        tail -n 30 "$f"
      done < <(find "$LAB_DIR/$c" -name '*.log' -newer "$stamp" -type f -not -path '*/store.db/*' \
        -exec grep -Iq . {} \; -print | head -n 4)
    fi
  } >&2
}

# run_step NAME COMMAND...: run with output to $LOG_DIR/NAME.log, followed live on stderr.
# Daemons a step starts may keep the file open; following stops when the step's process exits.
run_step() {
  local name="$1" log pid rc
  shift
  log="$LOG_DIR/$name.log"
  : >"$log"
  # 9>&-: daemons must not inherit the lock (see main), or it would be held for their lifetime.
  "$@" >>"$log" 2>&1 </dev/null 9>&- &
  pid=$!
  tail -n +1 -s 0.1 -f --pid="$pid" "$log" >&2 || true
  rc=0
  wait "$pid" || rc=$?
  return "$rc"
}

# unsafe_lab_dir DIR: prints why DIR (resolved) must never be a lab dir, which `down` removes
# whole: it is /, or $HOME or the repository, or holds one of them. Fails when DIR is fine.
unsafe_lab_dir() {
  local dir="$1" p
  [[ "$dir" != / ]] || { echo "it is /"; return 0; }
  for p in "$(realpath -m -- "${HOME:-/}")" "$(realpath -m -- "$REPO")"; do
    [[ "$p/" != "$dir/"* ]] || { echo "it is or holds $p"; return 0; }
  done
  return 1
}

# not_a_lab_dir DIR (resolved, existing): prints why `down` must leave DIR alone. LAB_DIR comes
# from the environment, so a typo must not cost a home directory: a lab dir holds env.d/lab.env
# (the first file lab:up writes) naming this very directory, and passes unsafe_lab_dir.
not_a_lab_dir() {
  local dir="$1" recorded
  unsafe_lab_dir "$dir" && return 0
  recorded="$(sed -n "s/^export VMSNAP_LAB_DIR='\(.*\)'\$/\1/p" "$dir/env.d/lab.env" 2>/dev/null || true)"
  if [[ ! -d "$dir" || -z "$recorded" || "$(realpath -m -- "$recorded")" != "$dir" ]]; then
    echo "it has no env.d/lab.env naming it, so lab:up did not make it"
    return 0
  fi
  return 1
}

cmd_up() {
  local t0 t c stamp why summary=()
  t0="$(now)"
  if why="$(unsafe_lab_dir "$(realpath -m -- "$LAB_DIR")")"; then
    die "$WHO" "LAB_DIR=$LAB_DIR cannot be a lab dir (lab:down removes it): $why"
  fi
  mkdir -p "$LAB_DIR" "$LOG_DIR" "$ENV_D"
  # First file written: remove_lab_dir's proof that this directory is a lab.
  write_env lab <<<"VMSNAP_LAB_DIR $LAB_DIR"
  # One restore-record key for the whole fleet (both lab hosts, every test worker), as an operator
  # copies one file to every host; kept across lab:up so records signed earlier still verify.
  if [[ ! -s "$LAB_DIR/restore.key" ]]; then
    (umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$LAB_DIR/restore.key.tmp")
    mv -f "$LAB_DIR/restore.key.tmp" "$LAB_DIR/restore.key"
  fi
  printf '%s %s\n' VMSNAP_LAB_DIR "$LAB_DIR" VMSNAP_RESTORE_KEY_FILE "$LAB_DIR/restore.key" | write_env lab
  assemble_env
  stamp="$LAB_DIR/.up-started"
  touch "$stamp"

  t="$(now)"
  if ! run_step deps bash "$REPO/lab/deps.sh"; then
    show_failure deps "$stamp"
    die "$WHO" "deps failed"
  fi
  summary+=("deps $(elapsed "$t") s")

  for c in "${COMPONENTS[@]}"; do
    if ! present "$c"; then
      summary+=("$c skipped (no lab/$c.sh)")
      continue
    fi
    t="$(now)"
    if ! run_step "$c" bash "$(component_script "$c")" up; then
      assemble_env
      show_failure "$c" "$stamp"
      die "$WHO" "component '$c' failed to come up (the others stay up; lab/lab.sh down removes all)"
    fi
    assemble_env
    summary+=("$c $(elapsed "$t") s")
  done

  local IFS=','
  say "$WHO" "up in $(elapsed "$t0") s:${summary[*]/#/ }"
  unset IFS
  local ui
  # shellcheck disable=SC1090 # the env file is generated at run time (assemble_env)
  ui="$(source "$ENV_FILE" && echo "${TEMPORAL_UI_URL:-}")"
  echo "Temporal UI: $ui"
  echo "Environment: source $ENV_FILE"
}

cmd_status() {
  local c rc=0 line
  # The DR site is reported once something brought it up.
  [[ -d "$LAB_DIR/ceph-dr" && " ${COMPONENTS[*]} " != *" dr "* ]] && COMPONENTS+=(dr)
  for c in "${COMPONENTS[@]}"; do
    present "$c" || continue
    if line="$(bash "$(component_script "$c")" status 2>&1)"; then
      echo "$line"
    else
      echo "${line:-$c down}"
      rc=1
    fi
  done
  [[ -f "$ENV_FILE" ]] || { echo "env missing: $ENV_FILE"; rc=1; }
  return "$rc"
}

cmd_down() {
  local i c rc=0 t0 dir why
  t0="$(now)"
  dir="$(realpath -m -- "$LAB_DIR")"
  # Checked before any component's down, which removes its own state under $LAB_DIR too.
  if [[ -e "$dir" ]] && why="$(not_a_lab_dir "$dir")"; then
    die "$WHO" "refusing to take down LAB_DIR=$LAB_DIR: $why"
  fi
  local f
  for f in "$LAB_DIR"/workers/*/worker.pid; do
    [[ -f "$f" ]] && stop_pidfile "$f" "vmsnap.js worker" 40
  done
  # Always every component: each down is a no-op when it is not running.
  for ((i = ${#ALL_COMPONENTS[@]} - 1; i >= 0; i--)); do
    c="${ALL_COMPONENTS[i]}"
    present "$c" || continue
    if ! bash "$(component_script "$c")" down 9>&-; then
      say "$WHO" "component '$c' did not come down cleanly"
      rc=1
    fi
  done
  if ((rc == 0)); then
    rm -rf -- "$LAB_DIR"
    say "$WHO" "down in $(elapsed "$t0") s; removed $LAB_DIR"
  else
    say "$WHO" "kept $LAB_DIR because a component failed to stop"
  fi
  return "$rc"
}

main() {
  local lock
  case "${1:-}" in
    up | down)
      if [[ "$1" == up && "${2:-}" == --dr && " ${COMPONENTS[*]} " != *" dr "* ]]; then
        COMPONENTS+=(dr)
      elif [[ -n "${2:-}" ]]; then
        echo "usage: lab/lab.sh up [--dr]|status|down" >&2
        exit 2
      fi
      # One up/down at a time per lab dir; the lock lives outside $LAB_DIR, which down removes.
      lock="${TMPDIR:-/tmp}/vmsnap-lab-$(printf '%s' "$LAB_DIR" | md5sum | cut -c1-12).lock"
      exec 9>"$lock"
      flock -w 600 9 || die "$WHO" "another lab.sh up/down holds $lock"
      if [[ "$1" == up ]]; then cmd_up; else cmd_down; fi
      ;;
    status) cmd_status ;;
    *)
      echo "usage: lab/lab.sh up [--dr]|status|down" >&2
      exit 2
      ;;
  esac
}

main "$@"
