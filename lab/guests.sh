#!/usr/bin/env bash
# The lab's guests: TCG QEMU guests under the lab's libvirtd, booted from the image that
# lab/guest-image.sh builds, with ext4 data disks as RBD images in the vms pool.
#
#   vmsnap-g1       1 data disk  (vdb)          agent channel
#   vmsnap-g3       3 data disks (vdb vdc vdd)  agent channel
#   vmsnap-noagent  1 data disk  (vdb)          no agent channel
# Disk images are <guest>-<target>, e.g. vms/vmsnap-g3-vdc (64 MiB, ext4 made on the host).
# Every guest has a control channel (lab/guest-ctl.sh) and a serial console logged by QEMU to
# $LAB_DIR/guests/<guest>/serial.log; a host "stamper" (tail -F | bash) copies each console line to
# ticks.log prefixed with the host time it arrived (microseconds since the epoch). The freeze
# probe (support/lab/probe.ts) reads ticks.log.
#
#   lab/guests.sh up                create what is missing, start what is not running, wait until
#                                   every guest is ready (idempotent: running guests are kept)
#   lab/guests.sh status            "guests ok ..." / "guests down: why" (exit 1 when down)
#   lab/guests.sh down              destroy and undefine the guests, remove their RBD images
#   lab/guests.sh recreate GUEST    destroy GUEST, its disks (with their snapshots) and its logs;
#                                   create it again from scratch and wait until ready
#   lab/guests.sh ready GUEST       wait until GUEST is ready (agent answers, probe ticks)
#
# Ready = libvirt says running, guest-ping answers (agent guests), every data disk's probe ticks.
# Env in: LAB_DIR, and env.d/{ceph,libvirt}.env. GUEST_MEMORY_MIB (default 256).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WHO=guests
GUESTS_DIR="$LAB_DIR/guests"
GUESTS=(vmsnap-g1 vmsnap-g3 vmsnap-noagent)
MEMORY_MIB="${GUEST_MEMORY_MIB:-256}"
DISK_SIZE_MIB=64
READY_TIMEOUT=90

disks_of() {
  case "$1" in
    vmsnap-g1 | vmsnap-noagent) echo vdb ;;
    vmsnap-g3) echo vdb vdc vdd ;;
    *) die "$WHO" "unknown guest: $1 (known: ${GUESTS[*]})" ;;
  esac
}
has_agent() { [[ "$1" != vmsnap-noagent ]]; }

load_env() {
  local f
  for f in "$ENV_D"/ceph.env "$ENV_D"/libvirt.env; do
    [[ -f "$f" ]] || die "$WHO" "$f missing: bring up ${f##*/} first (lab/lab.sh up)"
    # shellcheck disable=SC1090
    source "$f"
  done
  POOL="${VMSNAP_VM_POOL:-vms}"
  [[ "$LAB_DIR" =~ ^[A-Za-z0-9_./-]+$ ]] || die "$WHO" "LAB_DIR has characters unsafe in XML: $LAB_DIR"
}

virsh_q() { timeout 30 virsh -q -c "$LIBVIRT_DEFAULT_URI" "$@"; }
rbd_q() { timeout 60 rbd -c "$CEPH_CONF" --id "$CEPH_ID" --keyring "$CEPH_KEYRING" "$@"; }

dom_state() { virsh_q domstate "$1" 2>/dev/null | head -1 || true; }
dom_defined() { virsh_q dominfo "$1" >/dev/null 2>&1; }

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

domain_xml() {
  local name="$1" image_dir="$2" dir="$GUESTS_DIR/$1" d agent=0
  has_agent "$name" && agent=1
  cat <<XML
<domain type='qemu'>
  <name>$name</name>
  <memory unit='MiB'>$MEMORY_MIB</memory>
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
  tail -n "$from" -s 0.02 -F "$dir/serial.log" 2>/dev/null | while IFS= read -r line; do
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
agent_answers() {
  virsh_q qemu-agent-command --timeout 5 "$1" '{"execute":"guest-ping"}' 2>/dev/null | grep -q '"return"'
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
  [[ "$(dom_state "$1")" == running ]] || return 1
  if has_agent "$1"; then agent_answers "$1" || return 1; fi
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

# --- lifecycle ------------------------------------------------------------------------------------
# ensure_guest GUEST IMAGE_DIR: define (with disks) if missing, start if not running. Prints the
# start time when it started the guest.
ensure_guest() {
  local name="$1" image_dir="$2" dir="$GUESTS_DIR/$1" d state
  mkdir -p "$dir"
  for d in $(disks_of "$name"); do
    image_exists "$name-$d" || { make_disk "$name-$d" "$d"; say "$WHO" "created $POOL/$name-$d"; }
  done
  domain_xml "$name" "$image_dir" >"$dir/domain.xml"
  state="$(dom_state "$name")"
  if [[ "$state" == running ]]; then
    if virsh_q dumpxml "$name" | grep -qF "<kernel>$image_dir/vmlinux</kernel>"; then
      start_stamper "$name" 0
      return 0
    fi
    say "$WHO" "$name runs an older guest image: restarting it on $image_dir (disks kept)"
  fi
  if dom_defined "$name"; then
    [[ "$state" == "shut off" ]] || virsh_q destroy "$name" >/dev/null 2>&1 || true
    virsh_q undefine "$name" >/dev/null
  fi
  virsh_q define "$dir/domain.xml" >/dev/null
  stop_stamper "$name"
  rm -f "$dir/serial.log" "$dir/ticks.log" "$dir/ctl.sock"
  start_stamper "$name" +1
  now
  virsh_q start "$name" >/dev/null || die "$WHO" "virsh start $name failed (see $LIBVIRT_LAB_DIR/log/qemu/$name.log)"
}

destroy_guest() {
  local name="$1" d
  if dom_defined "$name"; then
    virsh_q destroy "$name" >/dev/null 2>&1 || true
    virsh_q undefine "$name" >/dev/null 2>&1 || true
  fi
  stop_stamper "$name"
  for d in $(disks_of "$name"); do remove_image "$name-$d"; done
  rm -rf "${GUESTS_DIR:?}/$name"
}

write_guests_env() {
  write_env guests <<ENV
VMSNAP_GUEST_1DISK vmsnap-g1
VMSNAP_GUEST_3DISK vmsnap-g3
VMSNAP_GUEST_NOAGENT vmsnap-noagent
VMSNAP_GUESTS ${GUESTS[*]}
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
  say "$WHO" "guest image $image_dir ($(elapsed "$t0") s)"
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
  destroy_guest "$name"
  t0="$(ensure_guest "$name" "$image_dir")"
  cmd_ready "$name" "$t0"
}

cmd_status() {
  local name why=() st
  load_env 2>/dev/null || { echo "guests down: ceph/libvirt env missing"; return 1; }
  for name in "${GUESTS[@]}"; do
    st="$(dom_state "$name")"
    if [[ "$st" != running ]]; then why+=("$name ${st:-undefined}"); continue; fi
    if has_agent "$name" && ! agent_answers "$name"; then why+=("$name agent does not answer"); fi
    stamper_running "$name" || why+=("$name console stamper not running")
    probe_ticking "$name" || why+=("$name probe not ticking")
  done
  if ((${#why[@]})); then
    local IFS=';'
    echo "guests down: ${why[*]}"
    return 1
  fi
  echo "guests ok (${GUESTS[*]})"
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

case "${1:-}" in
  up) cmd_up ;;
  status) cmd_status ;;
  down) cmd_down ;;
  recreate) cmd_recreate "${2:?usage: $0 recreate GUEST}" ;;
  ready) load_env && cmd_ready "${2:?usage: $0 ready GUEST}" ;;
  _stamp) cmd_stamp "$2" "$3" "$4" ;;
  *) echo "usage: $0 up|status|down|recreate GUEST|ready GUEST" >&2; exit 2 ;;
esac
