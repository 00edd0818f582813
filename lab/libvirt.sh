#!/usr/bin/env bash
# The lab's two hypervisor hosts: two private libvirtds (Debian 12 ships only the monolithic
# libvirtd), "host A" and "host B", on the one Ceph cluster, so a guest can live-migrate between them.
#
#   lab/libvirt.sh up         configure and start both (idempotent); write env.d/libvirt.env
#   lab/libvirt.sh status     "libvirt ok ..." / "libvirt down: why" (exit 1 when either is down)
#   lab/libvirt.sh down       stop both libvirtds and any QEMU they left (by pid), remove their dirs
#   lab/libvirt.sh kill [a|b] SIGKILL one libvirtd (default a): its QEMUs keep running (fault tests)
#   lab/libvirt.sh start [a|b] start it again after `kill`; it reconnects to the running QEMUs
#   lab/libvirt.sh scratch-up NAME AUTH   a third, guest-less libvirtd in $LAB_DIR/libvirt-NAME whose
#                             unix sockets use AUTH (none|polkit|sasl); prints its URI. For tests of
#                             auth schemes vmsnap refuses; seconds to start (copied capability cache)
#   lab/libvirt.sh scratch-down NAME      stop it and remove its dir
#
# Host A (host name hv-a) lives in $LAB_DIR/libvirt, host B (hv-b) in $LAB_DIR/libvirt-b. The host
# names are what a vmsnap worker for that host uses as its host id (task queue vmsnap-<host>).
#
# Isolation: a privileged libvirtd has its state directories compiled in (/etc/libvirt,
# /run/libvirt, /var/lib/libvirt, /var/cache/libvirt, /var/log/libvirt). Each one runs in its own
# mount namespace with those five bind-mounted from its dir's {etc,run,lib,log} and, for the cache,
# ~/.cache/vmsnap/libvirt-cache (host A) or a copy of it (host B): QEMU capabilities cost ~8-10 s
# to probe at a first start; libvirtd revalidates the cache against the QEMU binary. So neither
# reads or writes a system instance's files nor the other's; the client sockets are
# <dir>/sock/libvirt-sock (no TCP). QEMU children inherit the namespace.
#
# QEMU's user: host A runs its QEMUs as root, host B as `libvirt-qemu`, Debian's stock qemu.conf
# user, so every test that starts or migrates a guest onto host B meets an unprivileged QEMU: the
# guest's kernel, initrd and ceph.conf must be readable by it (libvirtd itself opens the console log
# and control socket and passes QEMU the descriptors), and its RBD disks open with a libvirt ceph
# secret, not a keyring file (lab/guests.sh). No security driver on either (no AppArmor or SELinux in this container).
#
# Authentication: host A keeps `auth_unix_rw = "none"`; host B runs Debian's stock setting,
# `auth_unix_ro/rw = "polkit"` with the stock socket permissions (0777: polkit decides), so every
# fleet and migration test reaches host B through polkit auth (REMOTE_PROC_AUTH_LIST, then
# REMOTE_PROC_AUTH_POLKIT; libvirtd lets root in without asking polkitd, so no polkitd or D-Bus has
# to run here). lab/migrate.sh's virsh goes through it the same way. The changes outside the lab
# dir are what a Debian hypervisor has (ensure_user): the `libvirt-qemu` user and group (libvirtd
# looks them up before reading qemu.conf and aborts without them), its membership of group `kvm`,
# and /dev/kvm as root:kvm 0660.
#
# Migration between the two (lab/migrate.sh): each libvirtd has its own `host_uuid` (libvirt refuses
# a migration between equal host UUIDs; without DMI data it picks a random one per start), and
# per-host port ranges for incoming migrations (two daemons do not know each other's allocations).
# Loopback only: see lab/migrate.sh (libvirt refuses a loopback migration_address in qemu.conf).
#
# Both libvirtds are pinned to CPU 0: the two vCPUs of this kind of machine report different CPUID,
# and unpinned libvirtd discards its QEMU capability cache and takes ~8 s to answer (lab notes).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WHO=libvirt
CACHE_DIR="${VMSNAP_CACHE:-$HOME/.cache/vmsnap}/libvirt-cache"

# select_host a|b: set the paths of one host (HOST_NAME, LV_DIR, CONF, PIDFILE, SOCKET, URI, ...).
select_host() {
  HOST="$1"
  AUTH="${2:-none}"
  if [[ $HOST == scratch-* ]]; then HOST_NAME="$HOST"; else HOST_NAME="$(lab_host_name "$HOST")"; fi
  case "$HOST" in
    a)
      LV_DIR="$LAB_DIR/libvirt"
      CACHE_SRC="$CACHE_DIR"
      MIGRATION_PORTS=(49152 49183)
      QEMU_USER=root
      ;;
    b)
      LV_DIR="$LAB_DIR/libvirt-b"
      CACHE_SRC="$LAB_DIR/libvirt-b/cache"
      MIGRATION_PORTS=(49184 49215)
      AUTH=polkit
      QEMU_USER=libvirt-qemu
      ;;
    scratch-*)
      LV_DIR="$LAB_DIR/libvirt-${HOST#scratch-}"
      CACHE_SRC="$LV_DIR/cache"
      MIGRATION_PORTS=(49216 49247)
      QEMU_USER=root
      ;;
  esac
  WHO="libvirt $HOST_NAME"
  CONF="$LV_DIR/libvirtd.conf"
  PIDFILE="$LV_DIR/libvirtd.pid"
  SOCK_DIR="$LV_DIR/sock"
  SOCKET="$SOCK_DIR/libvirt-sock"
  URI="qemu:///system?socket=$SOCKET"
  LOG="$LV_DIR/libvirtd.log"
  # private dir (relative to $LV_DIR, or absolute) -> the system path it stands in for inside
  # libvirtd's mount namespace
  BINDS=(etc:/etc/libvirt run:/run/libvirt lib:/var/lib/libvirt "$CACHE_SRC:/var/cache/libvirt" log:/var/log/libvirt)
}

bind_source() { # bind_source SRC:DST -> the directory on the host
  local src="${1%%:*}"
  if [[ $src == /* ]]; then echo "$src"; else echo "$LV_DIR/$src"; fi
}

virsh_q() { timeout 20 virsh -q -c "$URI" "$@"; }

# ensure_user: the user, groups and /dev/kvm mode a Debian hypervisor has (libvirt-daemon-system's
# postinst puts libvirt-qemu in group kvm; udev's 50-udev-default.rules makes /dev/kvm root:kvm
# 0660). Without the last two, libvirtd finds /dev/kvm unusable for host B's QEMU user while its
# capability cache says KVM, discards the cache and re-probes QEMU (~60 s here) on every define.
ensure_user() {
  getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu
  getent passwd libvirt-qemu >/dev/null \
    || useradd --system --gid libvirt-qemu --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin libvirt-qemu
  getent group kvm >/dev/null || groupadd --system kvm
  id -nG libvirt-qemu | tr ' ' '\n' | grep -qx kvm || usermod -aG kvm libvirt-qemu
  if [[ -c /dev/kvm && "$(stat -c %G:%a /dev/kvm)" != kvm:660 ]]; then chgrp kvm /dev/kvm && chmod 0660 /dev/kvm; fi
}

# ensure_reserved_ports: the lab hosts' incoming-migration ports (49152-49247) out of the kernel's
# ephemeral range (32768-60999), which contains them: an outgoing connection (gRPC, librados,
# QEMU's librbd) that happens to get one of them makes the destination QEMU's listen fail,
# "migrate-incoming: Failed to find an available port: Address already in use" (seen in CI,
# right after a lab crash's recreate). The same reservation serves a real hypervisor.
ensure_reserved_ports() {
  local f=/proc/sys/net/ipv4/ip_local_reserved_ports cur
  cur="$(cat "$f" 2>/dev/null || true)"
  [[ ",$cur," == *",49152-49247,"* ]] && return 0
  if ! echo "${cur:+$cur,}49152-49247" >"$f" 2>/dev/null; then
    say "$WHO" "warning: could not reserve ports 49152-49247 ($f): a migration may fail with 'Address already in use'"
  fi
}

write_config() {
  local b
  mkdir -p "$SOCK_DIR"
  for b in "${BINDS[@]}"; do mkdir -p "$(bind_source "$b")"; done
  mkdir -p "$LV_DIR/log/qemu" "$LV_DIR/lib/qemu" "$LV_DIR/run/qemu"
  cat >"$CONF" <<CONF
# written by lab/libvirt.sh (host $HOST_NAME)
unix_sock_dir = "$SOCK_DIR"
$(auth_config)
listen_tls = 0
listen_tcp = 0
log_outputs = "3:file:$LOG"
host_uuid = "$(cat /proc/sys/kernel/random/uuid)"
CONF
  # read by libvirtd as /etc/libvirt/qemu.conf inside its namespace
  cat >"$LV_DIR/etc/qemu.conf" <<CONF
# written by lab/libvirt.sh (host $HOST_NAME)
user = "$QEMU_USER"
group = "$QEMU_USER"
dynamic_ownership = 0
remember_owner = 0
stdio_handler = "file"
cgroup_controllers = [ ]
security_driver = "none"
namespaces = [ ]
# incoming migrations: a port range of its own. libvirt 9 refuses a loopback migration_address or
# migration_host here ("must not be the address of the local machine"): lab/migrate.sh passes
# --listen-address 127.0.0.1 and --migrateuri tcp://127.0.0.1 per migration instead.
migration_port_min = ${MIGRATION_PORTS[0]}
migration_port_max = ${MIGRATION_PORTS[1]}
CONF
}

# install_hook: vmsnap's QEMU hook (deploy/libvirt-hook-qemu) as this libvirtd's
# /etc/libvirt/hooks/qemu, as an operator installs it, with the arrival guard's settings beside it
# (a stock host reads them from /etc/vmsnap/vmsnap.env). Before the daemon starts: libvirtd looks for
# hook scripts only then. The guard's log: $LV_DIR/vmsnap/guard.log.
install_hook() {
  local ceph_conf keyring
  # shellcheck disable=SC1090 # the lab's env file, written by lab.sh
  ceph_conf="$(source "$VMSNAP_LAB_ENV" && echo "${CEPH_CONF:-}")"
  # shellcheck disable=SC1090
  keyring="$(source "$VMSNAP_LAB_ENV" && echo "${CEPH_VMSNAP_KEYRING:-}")"
  [[ -n "$ceph_conf" ]] || die "$WHO" "no Ceph in the lab env: the arrival guard needs it (LAB_COMPONENTS must list ceph before libvirt)"
  mkdir -p "$LV_DIR/etc/hooks" "$LV_DIR/vmsnap"
  install -m 0755 "$REPO/deploy/libvirt-hook-qemu" "$LV_DIR/etc/hooks/qemu"
  cat >"$LV_DIR/etc/hooks/vmsnap.env" <<ENV
# written by lab/libvirt.sh (host $HOST_NAME): the arrival guard's settings
VMSNAP_BIN=$REPO/bin/vmsnap.js
VMSNAP_HOST=$HOST_NAME
VMSNAP_LIBVIRT_URI=$URI
VMSNAP_STATE_DIR=$LV_DIR/vmsnap/state
VMSNAP_CEPH_CONF=$ceph_conf
VMSNAP_CEPH_ID=vmsnap
VMSNAP_CEPH_KEYRING=$keyring
VMSNAP_IMAGE_POOL=images
VMSNAP_HOOK_LOG=$LV_DIR/vmsnap/guard.log
VMSNAP_HOOK_DISABLE_FILE=$LV_DIR/vmsnap/hook-off
ENV
}

# auth_config: libvirtd.conf's socket auth lines for $AUTH. polkit is Debian's stock setting (its
# libvirtd.conf leaves these commented; the compiled-in defaults are polkit with 0777 sockets).
auth_config() {
  case "$AUTH" in
    none) printf '%s\n' 'unix_sock_ro_perms = "0700"' 'unix_sock_rw_perms = "0700"' 'auth_unix_ro = "none"' 'auth_unix_rw = "none"' ;;
    polkit) printf '%s\n' 'unix_sock_ro_perms = "0777"' 'unix_sock_rw_perms = "0777"' 'auth_unix_ro = "polkit"' 'auth_unix_rw = "polkit"' ;;
    sasl) printf '%s\n' 'unix_sock_ro_perms = "0700"' 'unix_sock_rw_perms = "0700"' 'auth_unix_ro = "sasl"' 'auth_unix_rw = "sasl"' ;;
    *) die "$WHO" "unknown auth scheme $AUTH (none|polkit|sasl)" ;;
  esac
}

host_uuid() { [[ -f "$CONF" ]] && sed -n 's/^host_uuid = "\(.*\)"$/\1/p' "$CONF"; return 0; }

# seed_cache: host B starts from a copy of host A's QEMU capability cache (answers in ~1 s instead
# of probing QEMU for ~8-10 s). A copy, not the same directory: two daemons would rewrite one file.
seed_cache() {
  [[ "$HOST" != a ]] || return 0
  mkdir -p "$CACHE_SRC"
  [[ -d "$CACHE_DIR/qemu" && ! -e "$CACHE_SRC/qemu" ]] && cp -a "$CACHE_DIR/qemu" "$CACHE_SRC/"
  return 0
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
  say "$WHO" "libvirtd pid $(pidfile_pid "$PIDFILE") answers in $(elapsed "$t0") s ($URI, host_uuid $(host_uuid))"
}

host_up() {
  select_host "$1"
  if running && answers && [[ -n "$(host_uuid)" ]] && grep -qxF "user = \"$QEMU_USER\"" "$LV_DIR/etc/qemu.conf"; then
    say "$WHO" "libvirtd already running (pid $(pidfile_pid "$PIDFILE"))"
  else
    # (a libvirtd configured by an older lab/libvirt.sh, without host_uuid or with another QEMU user,
    # restarts: its QEMUs keep running as they were started)
    stop_pidfile "$PIDFILE" "$CONF" 10
    write_config
    install_hook
    seed_cache
    start_daemon
  fi
}

# host_env PREFIX: this host's env lines; host A keeps the names it had before host B existed.
host_env() {
  local key="LIBVIRT${1:+_$1}" status="VMSNAP_LIBVIRT${1:+_$1}"
  cat <<ENV
${key}_SOCKET $SOCKET
${key}_URI $URI
${key}_LAB_DIR $LV_DIR
${key}_HOST_UUID $(host_uuid)
${key}_QEMU_USER $QEMU_USER
${status}_STATUS_DIR $LV_DIR/run/qemu
${key}_GUARD_LOG $LV_DIR/vmsnap/guard.log
${key}_HOOK_OFF $LV_DIR/vmsnap/hook-off
VMSNAP_LAB_HOST_${1:-A} $HOST_NAME
ENV
}

cmd_up() {
  ensure_user
  ensure_reserved_ports
  local h
  for h in "${LAB_HOSTS[@]}"; do host_up "$h"; done
  {
    select_host a
    host_env ""
    echo "LIBVIRT_DEFAULT_URI $URI"
    select_host b
    host_env B
    echo "VMSNAP_LAB_HOSTS $(lab_host_name a) $(lab_host_name b)"
  } | write_env libvirt
}

cmd_start() {
  select_host "$(lab_host "${1:-a}")"
  running && answers && { say "$WHO" "libvirtd already running"; return 0; }
  [[ -f $CONF ]] || die "$WHO" "not configured: run lab/libvirt.sh up"
  stop_pidfile "$PIDFILE" "$CONF" 10
  start_daemon
}

cmd_kill() {
  select_host "$(lab_host "${1:-a}")"
  running || die "$WHO" "libvirtd is not running"
  local pid
  pid=$(pidfile_pid "$PIDFILE")
  kill -KILL "$pid"
  # shellcheck disable=SC2016 # $1 is the child shell's argument, not ours
  wait_until 10 bash -c '! kill -0 "$1"' _ "$pid" || die "$WHO" "libvirtd $pid survived SIGKILL"
  say "$WHO" "killed libvirtd $pid (QEMU processes keep running)"
}

# host_status: one host's part of the status line; false when it is down.
host_status() {
  if ! running; then echo "$HOST_NAME: libvirtd not running"; return 1; fi
  if ! answers; then echo "$HOST_NAME: libvirtd $(pidfile_pid "$PIDFILE") does not answer on $SOCKET"; return 1; fi
  echo "$HOST_NAME pid $(pidfile_pid "$PIDFILE") host_uuid $(host_uuid) $URI"
}

cmd_status() {
  local h parts=() rc=0 line
  for h in "${LAB_HOSTS[@]}"; do
    select_host "$h"
    line="$(host_status)" || rc=1
    parts+=("$line")
  done
  local IFS=';'
  if ((rc)); then echo "libvirt down: ${parts[*]}"; else echo "libvirt ok (${parts[*]})"; fi
  return "$rc"
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
  return 0
}

host_down() {
  select_host "$1"
  if running && answers; then
    local dom
    for dom in $(virsh_q list --name 2>/dev/null || true); do virsh_q destroy "$dom" >/dev/null 2>&1 || true; done
  fi
  stop_pidfile "$PIDFILE" "$CONF" 15
  local pid
  for pid in $(qemu_pids); do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$LV_DIR"
  say "$WHO" "down"
}

cmd_down() {
  local i
  for ((i = ${#LAB_HOSTS[@]} - 1; i >= 0; i--)); do host_down "${LAB_HOSTS[i]}"; done
  rm -f "$ENV_D/libvirt.env"
}

# scratch-up NAME AUTH: a guest-less libvirtd whose sockets want AUTH; prints its URI.
cmd_scratch_up() {
  [[ ${1:-} =~ ^[a-z0-9]{1,16}$ ]] || die libvirt "scratch-up: NAME must be 1-16 of [a-z0-9], got '${1:-}'"
  select_host "scratch-$1" "${2:-}"
  auth_config >/dev/null
  ensure_user
  ensure_reserved_ports
  stop_pidfile "$PIDFILE" "$CONF" 10
  write_config
  seed_cache
  # answers() asks virsh, which cannot authenticate to a SASL socket without credentials: wait for
  # the socket instead.
  if [[ $AUTH == sasl ]]; then answers() { [[ -S $SOCKET ]]; }; fi
  start_daemon >&2
  echo "$URI"
}

cmd_scratch_down() {
  [[ ${1:-} =~ ^[a-z0-9]{1,16}$ ]] || die libvirt "scratch-down: NAME must be 1-16 of [a-z0-9], got '${1:-}'"
  select_host "scratch-$1"
  stop_pidfile "$PIDFILE" "$CONF" 10
  rm -rf "$LV_DIR"
  say "$WHO" "down"
}

case "${1:-}" in
  up) cmd_up ;;
  scratch-up) cmd_scratch_up "${2:-}" "${3:-}" ;;
  scratch-down) cmd_scratch_down "${2:-}" ;;
  status) cmd_status ;;
  down) cmd_down ;;
  kill) cmd_kill "${2:-a}" ;;
  start) cmd_start "${2:-a}" ;;
  *) echo "usage: $0 up|status|down|kill [a|b]|start [a|b]|scratch-up NAME AUTH|scratch-down NAME" >&2; exit 2 ;;
esac
