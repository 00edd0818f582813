# shellcheck shell=bash
# Helpers shared by the lab scripts. Source it; it defines functions and a few variables only.
#
#   REPO      the repository root
#   LAB_DIR   all lab state: $LAB_DIR, else $VMSNAP_LAB_DIR (the name tests, benchmarks and
#             support/lab/env.ts use for another lab), else $REPO/.lab; `lab.sh down` removes it
#   ENV_D     $LAB_DIR/env.d: each component writes its env lines to env.d/<component>.env
#   VMSNAP_CACHE  what outlives a lab (Temporal binary, guest image, libvirt's QEMU capabilities);
#                 default ~/.cache/vmsnap (.ci/run --cold points it at an empty directory)
#
# Sourcing it also installs an ERR trap: a command that ends a script under `set -e` prints the
# script, line, command and exit status (and the function stack) on stderr, so a failed step
# always says which one it was.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAB_DIR="${LAB_DIR:-${VMSNAP_LAB_DIR:-$REPO/.lab}}"
ENV_D="$LAB_DIR/env.d"
VMSNAP_CACHE="${VMSNAP_CACHE:-$HOME/.cache/vmsnap}"
TEMPORAL_VERSION="v1.5.1"
# shellcheck disable=SC2034 # read by the scripts that source this file (deps.sh, temporal.sh)
TEMPORAL_BIN_DEFAULT="$VMSNAP_CACHE/temporal-$TEMPORAL_VERSION"

# on_err STATUS COMMAND PIPESTATUS: the ERR trap. Under `set -e` the failing command is about to end the
# script; say where. ${BASH_SOURCE[1]}/${BASH_LINENO[0]} are the trap's caller: the failed line.
on_err() {
  local status="$1" command="$2" pipe="$3" i where=""
  [[ "$pipe" == *" "* ]] && status+=" (pipeline statuses: $pipe)"
  for ((i = 1; i < ${#FUNCNAME[@]}; i++)); do
    where+=" ${FUNCNAME[i]}@${BASH_SOURCE[i]##*/}:${BASH_LINENO[i - 1]}"
  done
  # shellcheck disable=SC2016 # the backquotes are literal: they frame the command in the message
  printf '[%s] FAILED: %s:%s: `%s` exited %s; in:%s\n' "${WHO:-${0##*/}}" \
    "${BASH_SOURCE[1]#"$REPO"/}" "${BASH_LINENO[0]}" "$command" "$status" "$where" >&2
}
set -o errtrace
trap 'on_err "$?" "$BASH_COMMAND" "${PIPESTATUS[*]}"' ERR

# say COMPONENT MESSAGE...: one progress line on stderr.
say() {
  local who="$1"
  shift
  printf '[%s] %s\n' "$who" "$*" >&2
}

die() {
  local who="$1"
  shift
  printf '[%s] ERROR: %s\n' "$who" "$*" >&2
  exit 1
}

# now: seconds since the epoch with milliseconds.
now() { date +%s.%3N; }

# elapsed START: seconds since START, one decimal.
elapsed() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }'; }

# pid_running PIDFILE MARKER: true when PIDFILE names a live process whose command line contains
# MARKER (a guard against a recycled pid). A process whose main thread has exited while other
# threads are still exiting (a killed Go or Ceph daemon, its sockets still open) counts as live.
pid_running() {
  local pidfile="$1" marker="$2" pid cmdline live=0 stat
  [[ -s "$pidfile" ]] || return 1
  pid="$(tr -dc '0-9' <"$pidfile")"
  [[ -n "$pid" && -d "/proc/$pid" ]] || return 1
  for stat in /proc/"$pid"/task/*/stat; do
    [[ "$(awk '{ print $3 }' "$stat" 2>/dev/null)" =~ ^[RSDtTWP]$ ]] && live=1 && break
  done
  ((live)) || return 1
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
  [[ -z "$cmdline" ]] && return 0
  grep -qF -- "$marker" <<<"$cmdline"
}

# stop_pidfile PIDFILE MARKER [GRACE_SECONDS]: SIGTERM the process, SIGKILL after the grace
# period, then remove the pid file. Does nothing when the process is not ours or not running.
stop_pidfile() {
  local pidfile="$1" marker="$2" grace="${3:-15}" pid i
  if pid_running "$pidfile" "$marker"; then
    pid="$(tr -dc '0-9' <"$pidfile")"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      pid_running "$pidfile" "$marker" || break
      sleep 0.1
    done
    if pid_running "$pidfile" "$marker"; then
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        pid_running "$pidfile" "$marker" || break
        sleep 0.1
      done
    fi
  fi
  rm -f "$pidfile"
}

# pidfile_pid PIDFILE: the pid in it, or nothing.
pidfile_pid() { [[ -s "$1" ]] && tr -dc '0-9' <"$1"; }

# port_in_use PORT: true when something listens on 127.0.0.1:PORT (or on any address).
port_in_use() {
  ss -Hltn "sport = :$1" | grep -q .
}

# wait_until SECONDS COMMAND...: poll COMMAND every 0.1 s until it succeeds or time runs out.
wait_until() {
  local limit="$1" deadline
  shift
  deadline=$(($(date +%s%N) + limit * 1000000000))
  until "$@" >/dev/null 2>&1; do
    (($(date +%s%N) < deadline)) || return 1
    sleep 0.1
  done
}

# write_env COMPONENT: read `KEY VALUE` pairs on stdin, write `export KEY='VALUE'` lines
# to $ENV_D/COMPONENT.env atomically. Values must not contain a single quote.
write_env() {
  local component="$1" key value tmp
  mkdir -p "$ENV_D"
  tmp="$(mktemp "$ENV_D/.$component.XXXXXX")"
  {
    printf '# written by lab/%s.sh\n' "$component"
    while read -r key value; do
      [[ "$value" != *"'"* ]] || die "$component" "env value for $key contains a quote"
      printf "export %s='%s'\n" "$key" "$value"
    done
  } >"$tmp"
  mv -f "$tmp" "$ENV_D/$component.env"
}

# The lab's hypervisor hosts: two private libvirtds (lab/libvirt.sh), "a" and "b". Each has a host
# id a vmsnap worker for it uses (task queue vmsnap-<host id>).
# shellcheck disable=SC2034 # read by the scripts that source this file (libvirt.sh, guests.sh)
LAB_HOSTS=(a b)

# lab_host HOST: a|b for a host given as a|b|A|B or by its host id (hv-a, hv-b).
lab_host() {
  case "$1" in
    a | A | hv-a) echo a ;;
    b | B | hv-b) echo b ;;
    *) die lab "unknown lab host: $1 (a, b, hv-a or hv-b)" ;;
  esac
}

# lab_host_name HOST: the host id of a lab host (hv-a, hv-b).
lab_host_name() { echo "hv-$(lab_host "$1")"; }
