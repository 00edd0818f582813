#!/usr/bin/env bash
# The lab's guests: TCG QEMU guests under the lab's two libvirtds (lab/libvirt.sh), booted from the
# image that lab/guest-image.sh builds, with ext4 data disks as RBD images in the vms pool.
#
#   guest           starts on     data disks                  agent    memory
#   vmsnap-g1       host A hv-a   1 (vdb)                     yes      256 MiB
#   vmsnap-g3       host A hv-a   3 (vdb vdc vdd)             yes      256 MiB
#   vmsnap-noagent  host A hv-a   1 (vdb)                     no       256 MiB
#   vmsnap-g4       host B hv-b   1 (vdb)                     yes      128 MiB
# Disk images are <guest>-<target>, e.g. vms/vmsnap-g3-vdc (64 MiB, ext4 made on the host).
# Any guest can live-migrate between the hosts (lab/migrate.sh); the domain is defined on exactly
# one host at a time (migrations move the persistent definition).
#
# Every guest has a control channel (lab/guest-ctl.sh) and a serial console logged by QEMU to a
# file. Host paths that would clash between two QEMUs of one guest during a migration are per host:
# on host A $LAB_DIR/guests/<guest>/{serial.log,ctl.sock}, on host B
# $LAB_DIR/guests/<guest>/hv-b/{serial.log,ctl.sock}; <guest>/ctl.sock is always the control socket
# of the host the guest runs on (a symlink to hv-b/ctl.sock while on host B). A host "stamper"
# (tail -F of both serial logs | bash) copies each console line to <guest>/ticks.log prefixed with
# the host time it arrived (microseconds since the epoch). The freeze probe (support/lab/probe.ts)
# reads ticks.log, wherever the guest runs.
#
#   lab/guests.sh up                create what is missing, start what is not running, wait until
#                                   every guest is ready (idempotent: running guests are kept)
#   lab/guests.sh status            "guests ok ..." / "guests down: why" (exit 1 when down)
#   lab/guests.sh down              destroy and undefine the guests, remove their RBD images
#   lab/guests.sh recreate GUEST    destroy GUEST, its disks (with their snapshots) and its logs;
#                                   create it again from scratch and wait until ready
#   lab/guests.sh ready GUEST       wait until GUEST is ready (agent answers, probe ticks)
#   lab/guests.sh where GUEST       print the host id (hv-a, hv-b) GUEST runs on; exit 1 if none
#
# As a hypervisor has it (Nova's pattern), QEMU opens the RBD disks as client.qemu (rbd on the VM
# pool, read-only on the images pool) with its key in a libvirt secret of usage type ceph, defined
# with one UUID on both hosts so a migrated definition finds it there; no QEMU reads a keyring.
# Host B's QEMU runs as libvirt-qemu (lab/libvirt.sh): the guest image is staged from the cache
# (under /root, 0700) into $LAB_DIR/guest-image/.
#
# Ready = libvirt says running, guest-ping answers (agent guests), every data disk's probe ticks.
# Env in: LAB_DIR, and env.d/{ceph,libvirt}.env. GUEST_MEMORY_MIB (default 256; host B's small
# guest: GUEST_B_MEMORY_MIB, default 128). Sourced (lab/migrate.sh), it defines functions only.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WHO=guests
GUESTS_DIR="$LAB_DIR/guests"
GUESTS_A=(vmsnap-g1 vmsnap-g3 vmsnap-noagent)
GUESTS_B=(vmsnap-g4)
GUESTS=("${GUESTS_A[@]}" "${GUESTS_B[@]}")
MEMORY_MIB="${GUEST_MEMORY_MIB:-256}"
B_MEMORY_MIB="${GUEST_B_MEMORY_MIB:-128}"
DISK_SIZE_MIB=64
READY_TIMEOUT=90
CEPH_SECRET_UUID=9c3f4c1e-6a51-4d0e-9b7e-5f0d2a8c7e41
QEMU_CEPH_ID=qemu

disks_of() {
  case "$1" in
    vmsnap-g1 | vmsnap-noagent | vmsnap-g4) echo vdb ;;
    vmsnap-g3) echo vdb vdc vdd ;;
    *) die "$WHO" "unknown guest: $1 (known: ${GUESTS[*]})" ;;
  esac
}
has_agent() { [[ "$1" != vmsnap-noagent ]]; }
# home_of GUEST: the host (a|b) lab:up starts GUEST on.
home_of() { if [[ " ${GUESTS_B[*]} " == *" $1 "* ]]; then echo b; else echo a; fi; }
memory_of() { if [[ "$(home_of "$1")" == b ]]; then echo "$B_MEMORY_MIB"; else echo "$MEMORY_MIB"; fi; }

# host_dir GUEST HOST: the directory of GUEST's per-host paths (console log, control socket) on HOST.
host_dir() {
  if [[ "$2" == a ]]; then echo "$GUESTS_DIR/$1"; else echo "$GUESTS_DIR/$1/$(lab_host_name "$2")"; fi
}

# link_ctl GUEST HOST: make <guest>/ctl.sock name HOST's control socket (host A binds it there itself).
link_ctl() {
  [[ "$2" == a ]] || ln -sfn "$(lab_host_name "$2")/ctl.sock" "$GUESTS_DIR/$1/ctl.sock"
}

load_env() {
  local f
  for f in "$ENV_D"/ceph.env "$ENV_D"/libvirt.env; do
    [[ -f "$f" ]] || die "$WHO" "$f missing: bring up ${f##*/} first (lab/lab.sh up)"
    # shellcheck disable=SC1090
    source "$f"
  done
  POOL="${VMSNAP_VM_POOL:-vms}"
  LIBVIRT_B_URI="${LIBVIRT_B_URI:-}" # empty in a lab that lab/libvirt.sh brought up before host B existed
  [[ "$LAB_DIR" =~ ^[A-Za-z0-9_./-]+$ ]] || die "$WHO" "LAB_DIR has characters unsafe in XML: $LAB_DIR"
  [[ "$CEPH_CONF" =~ ^[A-Za-z0-9_./-]+$ ]] || die "$WHO" "CEPH_CONF has characters unsafe in XML: $CEPH_CONF"
}

uri_of() { if [[ "$1" == a ]]; then echo "$LIBVIRT_DEFAULT_URI"; else echo "$LIBVIRT_B_URI"; fi; }
# virsh_on HOST ARGS...: fails when the lab has no such host
virsh_on() {
  local uri
  uri="$(uri_of "$1")"
  shift
  [[ -n "$uri" ]] || { echo "the lab has no host B: lab/libvirt.sh up" >&2; return 1; }
  timeout 30 virsh -q -c "$uri" "$@"
}
rbd_q() { timeout 60 rbd -c "$CEPH_CONF" --id "$CEPH_ID" --keyring "$CEPH_KEYRING" "$@"; }

# dom_state GUEST [HOST]: libvirt's state of GUEST on HOST (default: where it runs).
dom_state() { virsh_on "${2:-$(where_or_home "$1")}" domstate "$1" 2>/dev/null | head -1 || true; }
dom_defined() { virsh_on "$2" dominfo "$1" >/dev/null 2>&1; }

# where GUEST: the host (a|b) on which GUEST is running (or paused); nothing when on neither.
where() {
  local h st
  for h in "${LAB_HOSTS[@]}"; do
    st="$(virsh_on "$h" domstate "$1" 2>/dev/null | head -1 || true)"
    [[ "$st" == running || "$st" == paused ]] && { echo "$h"; return 0; }
  done
  return 0
}
where_or_home() {
  local h
  h="$(where "$1")"
  echo "${h:-$(home_of "$1")}"
}

image_exists() { rbd_q info "$POOL/$1" >/dev/null 2>&1; }

# make_disk IMAGE LABEL: an ext4 filesystem made in a host temp file, imported into RBD (no kernel
# rbd module needed). Lazy init off, so the guest's ext4lazyinit adds no background writes.
make_disk() {
  local image="$1" label="$2" tmp
  tmp="$(mktemp "${TMPDIR:-/tmp}/vmsnap-disk.XXXXXX")"
  truncate -s "${DISK_SIZE_MIB}M" "$tmp"
  mkfs.ext4 -q -F -b 4096 -L "$label" -E lazy_itable_init=0,lazy_journal_init=0 "$tmp"
  rbd_q import --no-progress --image-format 2 "$tmp" "$POOL/$image" || { rm -f "$tmp"; die "$WHO" "rbd import $image failed"; }
  rm -f "$tmp"
}

remove_image() {
  local image="$1"
  image_exists "$image" || return 0
  rbd_q snap purge --no-progress "$POOL/$image" >/dev/null 2>&1 || true
  rbd_q rm --no-progress "$POOL/$image" >/dev/null 2>&1 \
    || say "$WHO" "warning: could not remove $POOL/$image (clones or watchers left?)"
}

# domain_xml GUEST IMAGE_DIR HOST: the domain as defined on HOST (its per-host paths).
domain_xml() {
  local name="$1" image_dir="$2" dir d agent=0
  dir="$(host_dir "$1" "$3")"
  has_agent "$name" && agent=1
  cat <<XML
<domain type='qemu'>
  <name>$name</name>
  <memory unit='MiB'>$(memory_of "$name")</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$image_dir/vmlinux</kernel>
    <initrd>$image_dir/initramfs.cpio</initrd>
    <cmdline>console=ttyS0 quiet 8250.nr_uarts=1 vmsnap.agent=$agent</cmdline>
  </os>
  <features><acpi/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
XML
  for d in $(disks_of "$name"); do
    cat <<XML
    <disk type='network' device='disk'>
      <driver name='qemu' type='raw' cache='writeback'/>
      <source protocol='rbd' name='$POOL/$name-$d'>
        <config file='$CEPH_CONF'/>
        <auth username='$QEMU_CEPH_ID'><secret type='ceph' uuid='$CEPH_SECRET_UUID'/></auth>
      </source>
      <target dev='$d' bus='virtio'/>
      <serial>$d</serial>
    </disk>
XML
  done
  if has_agent "$name"; then
    cat <<XML
    <channel type='unix'>
      <source mode='bind'/>
      <target type='virtio' name='org.qemu.guest_agent.0'/>
    </channel>
XML
  fi
  cat <<XML
    <channel type='unix'>
      <source mode='bind' path='$dir/ctl.sock'/>
      <target type='virtio' name='org.vmsnap.ctl.0'/>
    </channel>
    <serial type='file'>
      <source path='$dir/serial.log' append='off'/>
      <target port='0'/>
    </serial>
    <console type='file'>
      <source path='$dir/serial.log' append='off'/>
      <target type='serial' port='0'/>
    </console>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
XML
}

# --- the stamper: host arrival time for every console line ------------------------------------
stamper_pidfile() { echo "$GUESTS_DIR/$1/stamper.pid"; }
# (the pid file is the lab's own; the marker guards against a recycled pid)
stamper_running() { pid_running "$(stamper_pidfile "$1")" "guests.sh _stamp $1 "; }

# _stamp GUEST DIR FROM: run as its own process group (setsid); FROM is "+1" (whole log, a new
# guest) or "0" (only new lines, when restarting the stamper of a running guest).
cmd_stamp() {
  local name="$1" dir="$2" from="$3" line
  echo $$ >"$dir/stamper.pid"
  # -s bounds tail's poll interval if inotify is unavailable.
  # Both hosts' console logs (a migrated guest writes the other one); -q: no file name headers.
  tail -q -n "$from" -s 0.02 -F "$dir/serial.log" "$dir/$(lab_host_name b)/serial.log" 2>/dev/null | while IFS= read -r line; do
    printf '%s %s\n' "${EPOCHREALTIME/./}" "${line%$'\r'}"
  done >>"$dir/ticks.log"
}

start_stamper() {
  local name="$1" from="$2"
  stamper_running "$name" && return 0
  setsid bash "$REPO/lab/guests.sh" _stamp "$name" "$GUESTS_DIR/$name" "$from" </dev/null >/dev/null 2>&1 &
  wait_until 5 stamper_running "$name" || die "$WHO" "the console stamper of $name did not start"
}

stop_stamper() {
  local pidfile pid
  pidfile="$(stamper_pidfile "$1")"
  if stamper_running "$1"; then
    pid="$(pidfile_pid "$pidfile")"
    kill -TERM -- "-$pid" 2>/dev/null || true # its process group: bash, tail, the read loop
  fi
  rm -f "$pidfile"
}

# --- readiness ------------------------------------------------------------------------------------
# agent_answers GUEST [HOST]: guest-ping through HOST's libvirtd (default: where GUEST runs).
agent_answers() {
  virsh_on "${2:-$(where_or_home "$1")}" qemu-agent-command --timeout 5 "$1" '{"execute":"guest-ping"}' 2>/dev/null | grep -q '"return"'
}

# probe_ticking GUEST: every data disk has a PROBE line stamped within the last 3 s.
probe_ticking() {
  local name="$1" d last now_us
  now_us="${EPOCHREALTIME/./}"
  [[ -f "$GUESTS_DIR/$name/ticks.log" ]] || return 1
  for d in $(disks_of "$name"); do
    last="$(tail -n 400 "$GUESTS_DIR/$name/ticks.log" | awk -v d="$d" '$2 == "PROBE" && $3 == d { t = $1 } END { print (t == "" ? 0 : t) }')"
    ((now_us - last < 3000000)) || return 1
  done
}

guest_ready() {
  local h
  h="$(where "$1")"
  [[ -n "$h" && "$(dom_state "$1" "$h")" == running ]] || return 1
  if has_agent "$1"; then agent_answers "$1" "$h" || return 1; fi
  probe_ticking "$1"
}

cmd_ready() {
  local name="$1" t0="${2:-$(now)}"
  if ! wait_until "$READY_TIMEOUT" guest_ready "$name"; then
    tail -n 15 "$GUESTS_DIR/$name/serial.log" >&2 2>/dev/null || true
    die "$WHO" "$name not ready after ${READY_TIMEOUT} s (state: $(dom_state "$name"))"
  fi
  say "$WHO" "$name ready $(elapsed "$t0") s after start"
}

# --- what an unprivileged QEMU needs ----------------------------------------------------------------
# ensure_qemu_identity: client.qemu in Ceph and its key as the ceph secret on every lab host
# (idempotent; the key goes through a 0600 file, never argv).
ensure_qemu_identity() {
  local h keyfile xml
  keyfile="$(umask 077 && mktemp "${TMPDIR:-/tmp}/vmsnap-qemu-key.XXXXXX")"
  xml="$(mktemp "${TMPDIR:-/tmp}/vmsnap-secret.XXXXXX")"
  if ! timeout 60 ceph -c "$CEPH_CONF" --id "$CEPH_ID" --keyring "$CEPH_KEYRING" auth get-or-create-key \
    "client.$QEMU_CEPH_ID" mon 'profile rbd' \
    osd "profile rbd pool=$POOL, profile rbd-read-only pool=${VMSNAP_IMAGE_POOL:-images}" >"$keyfile"; then
    rm -f "$keyfile" "$xml"
    die "$WHO" "could not create client.$QEMU_CEPH_ID (its caps changed? ceph auth rm client.$QEMU_CEPH_ID)"
  fi
  cat >"$xml" <<XML
<secret ephemeral='no' private='yes'>
  <uuid>$CEPH_SECRET_UUID</uuid>
  <usage type='ceph'><name>client.$QEMU_CEPH_ID (vmsnap lab)</name></usage>
</secret>
XML
  for h in "${LAB_HOSTS[@]}"; do
    [[ -n "$(uri_of "$h")" ]] || continue
    if ! { virsh_on "$h" secret-define "$xml" >/dev/null && virsh_on "$h" secret-set-value "$CEPH_SECRET_UUID" --file "$keyfile" >/dev/null; }; then
      rm -f "$keyfile" "$xml"
      die "$WHO" "could not set the ceph secret on $(lab_host_name "$h")"
    fi
  done
  rm -f "$keyfile" "$xml"
}

# stage_image CACHE_DIR: the guest image copied into the lab dir (world-readable, as an
# unprivileged QEMU must read it); prints the staged directory.
stage_image() {
  local src="$1" dst="$LAB_DIR/guest-image/${1##*/}"
  if [[ ! -s "$dst/initramfs.cpio" ]]; then
    rm -rf "$dst.tmp" && mkdir -p "$dst.tmp"
    cp "$src/vmlinux" "$src/initramfs.cpio" "$dst.tmp/"
    chmod 0755 "$dst.tmp" && chmod 0644 "$dst.tmp"/*
    mv "$dst.tmp" "$dst"
  fi
  echo "$dst"
}

# check_readable_by USER PATH...: fail with the path an unprivileged QEMU could not open.
check_readable_by() {
  local user="$1" p
  shift
  [[ "$user" == root ]] && return 0
  for p in "$@"; do
    runuser -u "$user" -- test -r "$p" \
      || die "$WHO" "$user (host B's QEMU user) cannot read $p: LAB_DIR and its parents must be world-searchable"
  done
}

# --- lifecycle ------------------------------------------------------------------------------------
# ensure_guest GUEST IMAGE_DIR: define (with disks) on its home host if it runs nowhere, start it.
# Prints the start time when it started the guest. A guest running on either host is kept.
ensure_guest() {
  local name="$1" image_dir="$2" dir="$GUESTS_DIR/$1" d h home
  home="$(home_of "$name")"
  # (root-owned is fine for host B's unprivileged QEMU: libvirtd opens chardev files and sockets
  # itself and passes QEMU the descriptors)
  mkdir -p "$dir" "$(host_dir "$name" b)"
  for d in $(disks_of "$name"); do
    image_exists "$name-$d" || { make_disk "$name-$d" "$d"; say "$WHO" "created $POOL/$name-$d"; }
  done
  domain_xml "$name" "$image_dir" "$home" >"$dir/domain.xml"
  h="$(where "$name")"
  if [[ -n "$h" ]]; then
    if virsh_on "$h" dumpxml "$name" | grep -qF "<kernel>$image_dir/vmlinux</kernel>"; then
      start_stamper "$name" 0
      link_ctl "$name" "$h"
      return 0
    fi
    say "$WHO" "$name runs an older guest image: restarting it on $image_dir (disks kept)"
  fi
  undefine_everywhere "$name"
  virsh_on "$home" define "$dir/domain.xml" >/dev/null
  stop_stamper "$name"
  rm -f "$dir/serial.log" "$dir/ticks.log" "$dir/ctl.sock" "$(host_dir "$name" b)"/{serial.log,ctl.sock}
  link_ctl "$name" "$home"
  start_stamper "$name" +1
  now
  virsh_on "$home" start "$name" >/dev/null \
    || die "$WHO" "virsh start $name failed on $(lab_host_name "$home") (see its libvirt dir, log/qemu/$name.log)"
}

undefine_everywhere() {
  local name="$1" h
  for h in "${LAB_HOSTS[@]}"; do
    dom_defined "$name" "$h" || continue
    virsh_on "$h" destroy "$name" >/dev/null 2>&1 || true
    virsh_on "$h" undefine "$name" >/dev/null 2>&1 || true
  done
}

destroy_guest() {
  local name="$1" d
  undefine_everywhere "$name"
  stop_stamper "$name"
  for d in $(disks_of "$name"); do remove_image "$name-$d"; done
  rm -rf "${GUESTS_DIR:?}/$name"
}

write_guests_env() {
  write_env guests <<ENV
VMSNAP_GUEST_1DISK vmsnap-g1
VMSNAP_GUEST_3DISK vmsnap-g3
VMSNAP_GUEST_NOAGENT vmsnap-noagent
VMSNAP_GUEST_HOSTB ${GUESTS_B[0]}
VMSNAP_GUESTS ${GUESTS_A[*]}
VMSNAP_GUESTS_A ${GUESTS_A[*]}
VMSNAP_GUESTS_B ${GUESTS_B[*]}
VMSNAP_LAB_MIGRATE $REPO/lab/migrate.sh
VMSNAP_PROBE_DIR $GUESTS_DIR
VMSNAP_GUEST_CTL $REPO/lab/guest-ctl.sh
VMSNAP_GUESTS_SH $REPO/lab/guests.sh
ENV
}

cmd_up() {
  load_env
  local image_dir name t0 started=()
  t0="$(now)"
  image_dir="$("$REPO/lab/guest-image.sh" build)"
  image_dir="$(stage_image "$image_dir")"
  check_readable_by "${LIBVIRT_B_QEMU_USER:-root}" "$image_dir/vmlinux" "$image_dir/initramfs.cpio" "$CEPH_CONF"
  ensure_qemu_identity
  say "$WHO" "guest image $image_dir, client.$QEMU_CEPH_ID secret on both hosts ($(elapsed "$t0") s)"
  for name in "${GUESTS[@]}"; do
    t0="$(ensure_guest "$name" "$image_dir")"
    if [[ -n "$t0" ]]; then started+=("$name:$t0"); else say "$WHO" "$name already running"; fi
  done
  for name in "${GUESTS[@]}"; do
    t0=""
    for s in "${started[@]}"; do [[ "${s%%:*}" == "$name" ]] && t0="${s#*:}"; done
    if [[ -n "$t0" ]]; then cmd_ready "$name" "$t0"; else
      wait_until "$READY_TIMEOUT" guest_ready "$name" || die "$WHO" "$name is running but not ready"
    fi
  done
  write_guests_env
}

cmd_recreate() {
  local name="$1" image_dir t0
  disks_of "$name" >/dev/null
  load_env
  image_dir="$("$REPO/lab/guest-image.sh" build)"
  image_dir="$(stage_image "$image_dir")"
  ensure_qemu_identity
  destroy_guest "$name"
  t0="$(ensure_guest "$name" "$image_dir")"
  cmd_ready "$name" "$t0"
}

cmd_status() {
  local name why=() st
  load_env 2>/dev/null || { echo "guests down: ceph/libvirt env missing"; return 1; }
  local h where_list=()
  for name in "${GUESTS[@]}"; do
    h="$(where "$name")"
    if [[ -z "$h" ]]; then why+=("$name runs on neither host"); continue; fi
    where_list+=("$name@$(lab_host_name "$h")")
    st="$(dom_state "$name" "$h")"
    if [[ "$st" != running ]]; then why+=("$name $st on $(lab_host_name "$h")"); continue; fi
    if has_agent "$name" && ! agent_answers "$name" "$h"; then why+=("$name agent does not answer"); fi
    stamper_running "$name" || why+=("$name console stamper not running")
    probe_ticking "$name" || why+=("$name probe not ticking")
  done
  if ((${#why[@]})); then
    local IFS=';'
    echo "guests down: ${why[*]}"
    return 1
  fi
  echo "guests ok (${where_list[*]})"
}

cmd_down() {
  local name
  if [[ -f "$ENV_D/ceph.env" && -f "$ENV_D/libvirt.env" ]]; then
    load_env
    for name in "${GUESTS[@]}"; do destroy_guest "$name"; done
  else
    for name in "${GUESTS[@]}"; do stop_stamper "$name"; done
    say "$WHO" "ceph/libvirt env missing: only stopped the stampers"
  fi
  rm -rf "$GUESTS_DIR" "$ENV_D/guests.env"
  say "$WHO" "down"
}

cmd_where() {
  local h
  h="$(where "$1")"
  [[ -n "$h" ]] || { echo "$1 runs on neither host" >&2; return 1; }
  lab_host_name "$h"
}

[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0 # sourced: functions only

case "${1:-}" in
  up) cmd_up ;;
  where) load_env && cmd_where "${2:?usage: $0 where GUEST}" ;;
  status) cmd_status ;;
  down) cmd_down ;;
  recreate) cmd_recreate "${2:?usage: $0 recreate GUEST}" ;;
  ready) load_env && cmd_ready "${2:?usage: $0 ready GUEST}" ;;
  _stamp) cmd_stamp "$2" "$3" "$4" ;;
  *) echo "usage: $0 up|status|down|recreate GUEST|ready GUEST|where GUEST" >&2; exit 2 ;;
esac
