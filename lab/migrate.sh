#!/usr/bin/env bash
# Move a lab guest to the other hypervisor host (lab/libvirt.sh), and check it survived the move.
#
#   lab/migrate.sh GUEST TO [--paused] [--frozen] [--timeout SECONDS]
#   (--frozen: the guest moves frozen, so health is its agent answering, not its probe ticking)
#
# TO: a|b or the host id (hv-a, hv-b). Live by default (`virsh migrate --live`); --paused moves it
# without --live (paused during the copy, running on TO afterwards; lab notes: no TCG crash seen in
# paused moves). Managed migration from the source's libvirtd to TO's, the persistent definition
# moves with it (--persistent --undefinesource), so the guest is defined on exactly one host. The
# destination QEMU listens for the migration stream on 127.0.0.1 only (--listen-address; libvirt 9
# refuses a loopback migration_address in qemu.conf) and the source connects there (--migrateuri).
# Its per-host paths (console log, control socket: lab/guests.sh) are rewritten in the destination's XML.
#
# After the move it waits until, on TO, the guest agent answers (agent guests) and every data disk's
# probe ticks again for at least a second, and the console written on TO since the move shows no
# kernel oops or panic.
#
# Prints one `migrate: ...` summary line on stdout (wall times, longest probe gap during the move).
# Exit status:
#   0  moved, healthy on TO (also when it already ran there: nothing done)
#   1  the migration failed (virsh migrate's error on stderr); the guest's host is reported
#   2  usage, or the lab is not up
#   3  LAB CRASH: the migration completed but the guest is not healthy on TO (kernel oops/panic on
#      its console, or agent/probe silent by the deadline) — a lab artefact (TCG), not a vmsnap
#      verdict. Recreate the guest (lab/guests.sh recreate GUEST).
set -euo pipefail
LAB_DIR="${LAB_DIR:-${VMSNAP_LAB_DIR:-}}" # tests name another lab with VMSNAP_LAB_DIR
source "$(dirname "${BASH_SOURCE[0]}")/guests.sh"
WHO=migrate

# What a crashed guest kernel prints on its console (oops_begin/panic make the console verbose).
CRASH_PATTERN='Call Trace|Kernel panic|BUG:|invalid opcode|general protection fault|Oops'

usage() {
  sed -n '4,4p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2
  exit 2
}

# ticks_after GUEST T_US: fewest PROBE lines stamped at or after T_US among GUEST's disks.
ticks_after() {
  local name="$1" since="$2" d n min=""
  for d in $(disks_of "$name"); do
    n="$(tail -n 2000 "$GUESTS_DIR/$name/ticks.log" | awk -v d="$d" -v s="$since" '$2 == "PROBE" && $3 == d && $1 >= s { n++ } END { print n + 0 }')"
    [[ -z "$min" || "$n" -lt "$min" ]] && min="$n"
  done
  echo "${min:-0}"
}

# longest_gap GUEST FROM_US TO_US: longest interval (ms) between consecutive PROBE lines of one disk
# stamped in [FROM_US, TO_US] (including the last tick before FROM_US).
longest_gap() {
  local name="$1" from="$2" to="$3"
  tail -n 4000 "$GUESTS_DIR/$name/ticks.log" | awk -v f="$from" -v t="$to" '
    $2 == "PROBE" && $1 <= t {
      if ($1 < f) { last[$3] = $1; next }
      if ($3 in last && $1 - last[$3] > max) max = $1 - last[$3]
      last[$3] = $1
    }
    END { printf "%d", max / 1000 }'
}

# console_crash FILE OFFSET: the crash lines written to FILE after byte OFFSET.
console_crash() {
  [[ -f "$1" ]] || return 0
  tail -c "+$(($2 + 1))" "$1" | tr -d '\r' | grep -aE "$CRASH_PATTERN" | head -n 20 || true
}

healthy_on() { # healthy_on GUEST HOST SINCE_US
  [[ "$(dom_state "$1" "$2")" == running ]] || return 1
  if has_agent "$1"; then agent_answers "$1" "$2" || return 1; fi
  # A guest moved frozen cannot tick its probe (its filesystems are frozen): its agent is the proof.
  ((FROZEN)) && return 0
  (($(ticks_after "$1" "$3") >= 2))
}
FROZEN=0

# migration_xml GUEST FROM TO: the source's migratable XML with FROM's per-host paths replaced by
# TO's, consoles appended to (a log already there from an earlier stay keeps its lines).
migration_xml() {
  local name="$1" from to xml
  from="$(host_dir "$1" "$2")"
  to="$(host_dir "$1" "$3")"
  xml="$(virsh_on "$2" dumpxml --migratable "$name")"
  xml="${xml//"path='$from/serial.log'"/"path='$to/serial.log'"}"
  xml="${xml//"path='$from/ctl.sock'"/"path='$to/ctl.sock'"}"
  xml="${xml//"append='off'"/"append='on'"}"
  grep -qF "path='$to/ctl.sock'" <<<"$xml" || die "$WHO" "$name: no control socket $from/ctl.sock in its XML"
  grep -qF "path='$to/serial.log'" <<<"$xml" || die "$WHO" "$name: no console log $from/serial.log in its XML"
  printf '%s\n' "$xml"
}

qemu_pid_on() { # qemu_pid_on GUEST HOST: the pid of GUEST's QEMU on HOST, from libvirt's pid file
  local lv
  if [[ "$2" == a ]]; then lv="$LIBVIRT_LAB_DIR"; else lv="$LIBVIRT_B_LAB_DIR"; fi
  pidfile_pid "$lv/run/qemu/$1.pid" || true
}

main() {
  local name="" to="" live=1 timeout=60 arg
  while (($#)); do
    arg="$1"
    shift
    case "$arg" in
      --paused) live=0 ;;
      --frozen) FROZEN=1 ;;
      --timeout) timeout="${1:?--timeout needs seconds}"; shift ;;
      -*) usage ;;
      *) if [[ -z "$name" ]]; then name="$arg"; elif [[ -z "$to" ]]; then to="$arg"; else usage; fi ;;
    esac
  done
  [[ -n "$name" && -n "$to" ]] || usage
  [[ "$timeout" =~ ^[0-9]+$ ]] || usage
  disks_of "$name" >/dev/null
  to="$(lab_host "$to")"
  [[ -f "$ENV_D/ceph.env" && -f "$ENV_D/libvirt.env" ]] || { say "$WHO" "the lab is not up (no ceph/libvirt env in $ENV_D)"; exit 2; }
  load_env

  local from
  from="$(where "$name")"
  [[ -n "$from" ]] || die "$WHO" "$name runs on neither host"
  if [[ "$from" == "$to" ]]; then
    echo "migrate: $name already on $(lab_host_name "$to"): nothing to do"
    return 0
  fi

  local dst_log offset src_pid t0 t0_us t1 t1_us mode flags=() rc=0 out
  XML_FILE="$(mktemp "${TMPDIR:-/tmp}/vmsnap-migrate.XXXXXX.xml")"
  trap 'rm -f "$XML_FILE"' EXIT
  migration_xml "$name" "$from" "$to" >"$XML_FILE"
  dst_log="$(host_dir "$name" "$to")/serial.log"
  mkdir -p "$(dirname "$dst_log")"
  offset="$(stat -c %s "$dst_log" 2>/dev/null || echo 0)"
  src_pid="$(qemu_pid_on "$name" "$from")"
  # A live move that does not converge in time is finished paused (--timeout-suspend).
  if ((live)); then mode=live; flags=(--live --timeout "$timeout" --timeout-suspend); else mode=paused; fi

  t0="$(now)"
  t0_us="${EPOCHREALTIME/./}"
  out="$(timeout "$((timeout + 30))" virsh -q -c "$(uri_of "$from")" migrate "${flags[@]}" \
    --persistent --undefinesource --xml "$XML_FILE" --persistent-xml "$XML_FILE" \
    --listen-address 127.0.0.1 --migrateuri tcp://127.0.0.1 "$name" "$(uri_of "$to")" 2>&1)" || rc=$?
  t1="$(now)"
  t1_us="${EPOCHREALTIME/./}"
  if ((rc)); then
    printf '%s\n' "$out" >&2
    echo "migrate: $name $mode $(lab_host_name "$from") -> $(lab_host_name "$to") FAILED (virsh exit $rc" \
      "after $(elapsed "$t0") s); it now runs on: $(lab_host_name "$(where_or_home "$name")")"
    exit 1 # (exit, not return: the ERR trap would report it as a script failure)
  fi

  # The source QEMU removes its own socket when it exits: link <guest>/ctl.sock after that.
  # shellcheck disable=SC2016 # $1 is the child bash's argument, expanded there
  if [[ -n "$src_pid" ]] && ! wait_until 10 bash -c '! kill -0 "$1"' _ "$src_pid"; then
    say "$WHO" "the source QEMU $src_pid still runs 10 s after the move"
  fi
  link_ctl "$name" "$to"

  local healthy=1 crash health
  wait_until 30 healthy_on "$name" "$to" "$((t1_us + 1000000))" || healthy=0
  if ((healthy)); then health="healthy $(elapsed "$t1") s later"; else health="NOT healthy $(elapsed "$t1") s later"; fi
  crash="$(console_crash "$dst_log" "$offset")"
  local summary
  summary="$name $mode $(lab_host_name "$from") -> $(lab_host_name "$to"): migrate $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
  summary+=", $health, longest probe gap $(longest_gap "$name" "$t0_us" "${EPOCHREALTIME/./}") ms"
  if [[ -n "$crash" || "$healthy" == 0 ]]; then
    {
      echo "LAB CRASH after migration (a TCG lab artefact, not a vmsnap verdict): $name on $(lab_host_name "$to")"
      [[ -n "$crash" ]] && printf 'console since the move:\n%s\n' "$crash"
      ((healthy)) || echo "not healthy within 30 s (state: $(dom_state "$name" "$to"); agent and/or probe silent)"
    } >&2
    echo "migrate: $summary; LAB CRASH"
    exit 3
  fi
  echo "migrate: $summary"
}

main "$@"
