#!/usr/bin/env bash
# A private libvirtd for the lab (Debian 12 ships only the monolithic libvirtd).
#
#   lab/libvirt.sh up       configure and start (idempotent); write env.d/libvirt.env
#   lab/libvirt.sh status   "libvirt ok ..." / "libvirt down: why" (exit 1 when down)
#   lab/libvirt.sh down     stop libvirtd and any QEMU it left (by pid), remove $LAB_DIR/libvirt
#   lab/libvirt.sh kill     SIGKILL libvirtd only: its QEMUs keep running (fault tests)
#   lab/libvirt.sh start    start libvirtd again after `kill`; it reconnects to the running QEMUs
#
# Isolation: a privileged libvirtd has its state directories compiled in (/etc/libvirt,
# /run/libvirt, /var/lib/libvirt, /var/cache/libvirt, /var/log/libvirt). It runs in its own mount
# namespace with those five bind-mounted from $LAB_DIR/libvirt/{etc,run,lib,log} and, for the
# cache, ~/.cache/vmsnap/libvirt-cache (QEMU capabilities: probing them costs ~8-10 s at the first
# start; libvirtd revalidates the cache against the QEMU binary), so it never
# reads or writes a system instance's files; its client socket is $LAB_DIR/libvirt/sock/libvirt-sock
# (no TCP, no auth). QEMU children inherit the namespace. The one change outside the lab dir is the
# `libvirt-qemu` user and group, created when missing (libvirtd looks them up before reading
# qemu.conf and aborts without them).
#
# libvirtd is pinned to CPU 0: the two vCPUs of this kind of machine report different CPUID, and
# unpinned libvirtd discards its QEMU capability cache and takes ~8 s to answer (lab notes).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WHO=libvirt
LV_DIR="$LAB_DIR/libvirt"
CONF="$LV_DIR/libvirtd.conf"
PIDFILE="$LV_DIR/libvirtd.pid"
SOCK_DIR="$LV_DIR/sock"
SOCKET="$SOCK_DIR/libvirt-sock"
URI="qemu:///system?socket=$SOCKET"
LOG="$LV_DIR/libvirtd.log"
CACHE_DIR="${VMSNAP_CACHE:-$HOME/.cache/vmsnap}/libvirt-cache"
# private dir (relative to $LV_DIR, or absolute) -> the system path it stands in for inside
# libvirtd's mount namespace
BINDS=(etc:/etc/libvirt run:/run/libvirt lib:/var/lib/libvirt "$CACHE_DIR:/var/cache/libvirt" log:/var/log/libvirt)

bind_source() { # bind_source SRC:DST -> the directory on the host
  local src="${1%%:*}"
  if [[ $src == /* ]]; then echo "$src"; else echo "$LV_DIR/$src"; fi
}

virsh_q() { timeout 20 virsh -q -c "$URI" "$@"; }

ensure_user() {
  getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu
  getent passwd libvirt-qemu >/dev/null \
    || useradd --system --gid libvirt-qemu --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin libvirt-qemu
}

write_config() {
  local b
  mkdir -p "$SOCK_DIR"
  for b in "${BINDS[@]}"; do mkdir -p "$(bind_source "$b")"; done
  mkdir -p "$LV_DIR/log/qemu" "$LV_DIR/lib/qemu" "$LV_DIR/run/qemu"
  cat >"$CONF" <<CONF
# written by lab/libvirt.sh
unix_sock_dir = "$SOCK_DIR"
unix_sock_ro_perms = "0700"
unix_sock_rw_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
listen_tls = 0
listen_tcp = 0
log_outputs = "3:file:$LOG"
CONF
  # read by libvirtd as /etc/libvirt/qemu.conf inside its namespace
  cat >"$LV_DIR/etc/qemu.conf" <<CONF
# written by lab/libvirt.sh
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
stdio_handler = "file"
cgroup_controllers = [ ]
security_driver = "none"
namespaces = [ ]
CONF
}

running() { pid_running "$PIDFILE" "$CONF"; }
answers() { virsh_q version >/dev/null 2>&1; }

# Runs inside the new mount namespace: bind-mounts SRC DST pairs, then execs the rest of argv.
# A constant script: every path arrives as an argument, nothing is spliced into shell text.
# shellcheck disable=SC2016
BIND_AND_EXEC='while [[ $1 != -- ]]; do mount --bind "$1" "$2" || exit 1; shift 2; done; shift; exec "$@"'

start_daemon() {
  local t0 b args=()
  t0=$(now)
  for b in "${BINDS[@]}"; do
    # The mount points must exist on the host (a fresh machine without systemd lacks /run/libvirt).
    mkdir -p "${b#*:}"
    args+=("$(bind_source "$b")" "${b#*:}")
  done
  command -v libvirtd >/dev/null || die "$WHO" "libvirtd not installed (apt: libvirt-daemon libvirt-daemon-driver-qemu)"
  rm -f "$SOCKET" "$SOCK_DIR/libvirt-sock-ro" "$SOCK_DIR/libvirt-admin-sock"
  unshare --mount --propagation private -- bash -c "$BIND_AND_EXEC" vmsnap-libvirtd "${args[@]}" -- \
    taskset -c 0 libvirtd --daemon -f "$CONF" -p "$PIDFILE" >>"$LOG" 2>&1 \
    || { tail -n 20 "$LOG" >&2; die "$WHO" "libvirtd failed to start"; }
  if ! wait_until 30 answers; then
    tail -n 20 "$LOG" >&2
    die "$WHO" "libvirtd does not answer on $SOCKET"
  fi
  say "$WHO" "libvirtd pid $(pidfile_pid "$PIDFILE") answers in $(elapsed "$t0") s ($URI)"
}

cmd_up() {
  ensure_user
  if running && answers; then
    say "$WHO" "libvirtd already running (pid $(pidfile_pid "$PIDFILE"))"
  else
    stop_pidfile "$PIDFILE" "$CONF" 10
    write_config
    start_daemon
  fi
  write_env libvirt <<ENV
LIBVIRT_SOCKET $SOCKET
LIBVIRT_DEFAULT_URI $URI
LIBVIRT_LAB_DIR $LV_DIR
VMSNAP_LIBVIRT_STATUS_DIR $LV_DIR/run/qemu
ENV
}

cmd_start() {
  running && answers && { say "$WHO" "libvirtd already running"; return 0; }
  [[ -f $CONF ]] || die "$WHO" "not configured: run lab/libvirt.sh up"
  stop_pidfile "$PIDFILE" "$CONF" 10
  start_daemon
}

cmd_kill() {
  running || die "$WHO" "libvirtd is not running"
  local pid
  pid=$(pidfile_pid "$PIDFILE")
  kill -KILL "$pid"
  # shellcheck disable=SC2016 # $1 is the child shell's argument, not ours
  wait_until 10 bash -c '! kill -0 "$1"' _ "$pid" || die "$WHO" "libvirtd $pid survived SIGKILL"
  say "$WHO" "killed libvirtd $pid (QEMU processes keep running)"
}

cmd_status() {
  if ! running; then echo "libvirt down: libvirtd not running"; return 1; fi
  if ! answers; then echo "libvirt down: libvirtd $(pidfile_pid "$PIDFILE") does not answer on $SOCKET"; return 1; fi
  echo "libvirt ok (pid $(pidfile_pid "$PIDFILE"), $URI)"
}

# QEMU processes libvirt started and left behind; libvirt keeps their pid files in run/qemu.
qemu_pids() {
  local f pid
  for f in "$LV_DIR"/run/qemu/*.pid; do
    [[ -s $f ]] || continue
    pid=$(tr -dc '0-9' <"$f")
    [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "guest=$(basename "$f" .pid)" \
      && echo "$pid"
  done
}

cmd_down() {
  if running && answers; then
    local dom
    for dom in $(virsh_q list --name 2>/dev/null); do virsh_q destroy "$dom" >/dev/null 2>&1 || true; done
  fi
  stop_pidfile "$PIDFILE" "$CONF" 15
  local pid
  for pid in $(qemu_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$LV_DIR" "$ENV_D/libvirt.env"
  say "$WHO" "down"
}

case "${1:-}" in
  up) cmd_up ;;
  status) cmd_status ;;
  down) cmd_down ;;
  kill) cmd_kill ;;
  start) cmd_start ;;
  *) echo "usage: $0 up|status|down|kill|start" >&2; exit 2 ;;
esac
