#!/usr/bin/env bash
# The lab's distribution guest, vmsnap-deb on host A: Debian 12 (lab/debian-image.sh) booted from
# an RBD root disk as Nova's images_type=rbd boots an instance: the image imported once into the
# images pool (images/vmsnap-debian-<hash>@snap, protected), the instance's root disk a clone of
# it, vms/<uuid>_disk, and an ephemeral data disk vms/<uuid>_disk.eph0 (ext4, label vmsnap-data,
# mounted at /data). 1 vCPU, 1 GiB, one NIC on QEMU's user-mode network. systemd, Debian's qemu-guest-agent (fsfreeze hook
# on), PostgreSQL 15, and the page-cache writer (lab/debian/writer) on the console.
# Console lines are stamped with host time like the busybox guests' ($LAB_DIR/guests/vmsnap-deb/
# ticks.log, lab/guests.sh's stamper).
#
# Not part of lab:up (its boot costs ~40 s of TCG and 1 GiB): the tests that need it run `up`,
# which keeps a running, ready guest; lab:down takes it down with the rest.
#
#   lab/debian.sh up       build/import what is missing, start it, wait until ready
#                                (agent answers, pg_isready through guest-exec, the writer and
#                                the commit client tick)
#   lab/debian.sh status   "debian ok" / "debian down: why"
#   lab/debian.sh down     destroy, undefine, remove its disks and the imported image
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/guests.sh"

WHO=debian
NAME=vmsnap-deb
UUID=5d1c0d2e-7b3a-4c61-9f0e-d3b1a9c20001
MEMORY_MIB=1024
DATA_MIB=256
DEB_READY_TIMEOUT=240

root_disk() { echo "$POOL/${UUID}_disk"; }
data_disk() { echo "$POOL/${UUID}_disk.eph0"; }
base_of() { echo "${VMSNAP_IMAGE_POOL:-images}/vmsnap-${1##*/}"; } # base_of IMAGE_DIR

deb_xml() {
  local image_dir="$1" dir="$GUESTS_DIR/$NAME" d spec
  cat <<XML
<domain type='qemu'>
  <name>$NAME</name>
  <uuid>$UUID</uuid>
  <memory unit='MiB'>$MEMORY_MIB</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$image_dir/vmlinux</kernel>
    <initrd>$image_dir/initramfs.cpio</initrd>
    <cmdline>console=ttyS0 root=/dev/vda ro quiet 8250.nr_uarts=1</cmdline>
  </os>
  <features><acpi/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
XML
  for d in vda vdb; do
    if [[ $d == vda ]]; then spec="$(root_disk)"; else spec="$(data_disk)"; fi
    cat <<XML
    <disk type='network' device='disk'>
      <driver name='qemu' type='raw' cache='writeback' discard='unmap'/>
      <source protocol='rbd' name='$spec'>
        <config file='$CEPH_CONF'/>
        <auth username='$QEMU_CEPH_ID'><secret type='ceph' uuid='$CEPH_SECRET_UUID'/></auth>
      </source>
      <target dev='$d' bus='virtio'/>
    </disk>
XML
  done
  # One NIC, QEMU's user-mode network (no host set-up): what restore --as keeps and verify drops.
  cat <<XML
    <interface type='user'>
      <model type='virtio'/>
    </interface>
    <channel type='unix'>
      <source mode='bind'/>
      <target type='virtio' name='org.qemu.guest_agent.0'/>
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

# ensure_disks IMAGE_DIR: the base image in the images pool, the root clone and the data disk.
ensure_disks() {
  local image_dir="$1" base t0 tmp
  base="$(base_of "$image_dir")"
  if ! rbd_q info "$base@snap" >/dev/null 2>&1; then
    t0="$(now)"
    rbd_q rm --no-progress "$base" >/dev/null 2>&1 || true # a half-done import
    timeout 600 rbd -c "$CEPH_CONF" --id "$CEPH_ID" --keyring "$CEPH_KEYRING" import --no-progress \
      --image-format 2 "$image_dir/root.img" "$base"
    rbd_q snap create "$base@snap" && rbd_q snap protect "$base@snap"
    say "$WHO" "imported $base ($(elapsed "$t0") s)"
  fi
  # A root disk cloned from an older image is the older guest: it goes, with its data disk.
  if image_exists "${UUID}_disk" && ! rbd_q info "$(root_disk)" | grep -qF "parent: $base@snap"; then
    say "$WHO" "$(root_disk) is not a clone of $base@snap: recreating the guest's disks"
    remove_image "${UUID}_disk"
    remove_image "${UUID}_disk.eph0"
    remove_bases_except "$base"
  fi
  image_exists "${UUID}_disk" || rbd_q clone "$base@snap" "$(root_disk)"
  if ! image_exists "${UUID}_disk.eph0"; then
    tmp="$(mktemp "${TMPDIR:-/tmp}/vmsnap-disk.XXXXXX")"
    truncate -s "${DATA_MIB}M" "$tmp"
    mkfs.ext4 -q -F -b 4096 -L vmsnap-data -E lazy_itable_init=0,lazy_journal_init=0 "$tmp"
    rbd_q import --no-progress --image-format 2 "$tmp" "$(data_disk)" || { rm -f "$tmp"; die "$WHO" "rbd import $(data_disk) failed"; }
    rm -f "$tmp"
  fi
}

# remove_bases_except BASE: imported Debian images other than BASE (all when BASE is empty).
remove_bases_except() {
  local img pool="${VMSNAP_IMAGE_POOL:-images}"
  for img in $(rbd_q ls "$pool" 2>/dev/null | grep '^vmsnap-debian-' || true); do
    [[ "$pool/$img" == "$1" ]] && continue
    rbd_q snap unprotect "$pool/$img@snap" >/dev/null 2>&1 || true
    rbd_q snap purge --no-progress "$pool/$img" >/dev/null 2>&1 || true
    rbd_q rm --no-progress "$pool/$img" >/dev/null 2>&1 || say "$WHO" "warning: could not remove $pool/$img (clones left?)"
  done
}

# guest_exec_ok ARGV...: the command exits 0 in the guest (guest-exec, 20 s).
guest_exec_ok() {
  local args="" a out pid i
  for a in "${@:2}"; do args+="${args:+,}\"$a\""; done
  out="$(virsh_on a qemu-agent-command --timeout 5 "$NAME" "{\"execute\":\"guest-exec\",\"arguments\":{\"path\":\"$1\",\"arg\":[$args]}}" 2>/dev/null)" || return 1
  pid="$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' <<<"$out")"
  [[ -n $pid ]] || return 1
  for ((i = 0; i < 100; i++)); do
    out="$(virsh_on a qemu-agent-command --timeout 5 "$NAME" "{\"execute\":\"guest-exec-status\",\"arguments\":{\"pid\":$pid}}" 2>/dev/null)" || return 1
    if [[ $out == *'"exited":true'* ]]; then [[ $out == *'"exitcode":0'* ]]; return; fi
    sleep 0.2
  done
  return 1
}

# ticking WHAT: a console line "WHAT N" (the writer's, the commit client's) stamped in the last 3 s.
ticking() {
  local last now_us
  now_us="${EPOCHREALTIME/./}"
  last="$(tail -n 400 "$GUESTS_DIR/$NAME/ticks.log" 2>/dev/null | awk -v w="$1" '$2 == w { t = $1 } END { print (t == "" ? 0 : t) }')"
  ((now_us - last < 3000000))
}

deb_ready() {
  [[ "$(dom_state "$NAME" a)" == running ]] && agent_answers "$NAME" a \
    && guest_exec_ok /usr/bin/pg_isready -q && ticking WRITER && ticking COMMIT
}

write_deb_env() {
  local image_dir="$1"
  write_env debian <<ENV
VMSNAP_GUEST_DEBIAN $NAME
VMSNAP_GUEST_DEBIAN_UUID $UUID
VMSNAP_GUEST_DEBIAN_ROOT $(root_disk)
VMSNAP_GUEST_DEBIAN_DATA $(data_disk)
VMSNAP_GUEST_DEBIAN_BASE $(base_of "$image_dir")
VMSNAP_GUEST_DEBIAN_MANIFEST $image_dir/manifest
ENV
}

cmd_up() {
  load_env
  local t0 image_dir staged dir="$GUESTS_DIR/$NAME"
  t0="$(now)"
  image_dir="$("$REPO/lab/debian-image.sh" build)"
  staged="$(stage_image "$image_dir")"
  cp -f "$image_dir/manifest" "$staged/manifest"
  mkdir -p "$dir"
  if [[ "$(dom_state "$NAME" a)" == running ]] && virsh_on a dumpxml "$NAME" | grep -qF "<kernel>$staged/vmlinux</kernel>"; then
    start_stamper "$NAME" 0
    wait_until "$DEB_READY_TIMEOUT" deb_ready || die "$WHO" "$NAME is running but not ready"
    write_deb_env "$staged"
    say "$WHO" "$NAME already running and ready"
    return 0
  fi
  ensure_qemu_identity
  undefine_everywhere "$NAME"
  ensure_disks "$image_dir"
  deb_xml "$staged" >"$dir/domain.xml"
  virsh_on a define "$dir/domain.xml" >/dev/null
  stop_stamper "$NAME"
  rm -f "$dir/serial.log" "$dir/ticks.log"
  start_stamper "$NAME" +1
  local t1
  t1="$(now)"
  virsh_on a start "$NAME" >/dev/null || die "$WHO" "virsh start $NAME failed"
  if ! wait_until "$DEB_READY_TIMEOUT" deb_ready; then
    tail -n 30 "$dir/serial.log" >&2 2>/dev/null || true
    die "$WHO" "$NAME not ready after $DEB_READY_TIMEOUT s"
  fi
  write_deb_env "$staged"
  say "$WHO" "$NAME ready: boot $(elapsed "$t1") s, up $(elapsed "$t0") s"
}

cmd_status() {
  load_env 2>/dev/null || { echo "debian down: ceph/libvirt env missing"; return 1; }
  [[ "$(dom_state "$NAME" a)" == running ]] || { echo "debian down: $NAME not running"; return 1; }
  deb_ready || { echo "debian down: $NAME not ready"; return 1; }
  echo "debian ok ($NAME)"
}

cmd_down() {
  stop_stamper "$NAME" 2>/dev/null || true
  if [[ -f "$ENV_D/ceph.env" && -f "$ENV_D/libvirt.env" ]]; then
    load_env
    undefine_everywhere "$NAME"
    remove_image "${UUID}_disk"
    remove_image "${UUID}_disk.eph0"
    remove_bases_except ""
  fi
  rm -rf "${GUESTS_DIR:?}/$NAME" "$ENV_D/debian.env"
  say "$WHO" "down"
}

case "${1:-}" in
  up) cmd_up ;;
  status) cmd_status ;;
  down) cmd_down ;;
  *) echo "usage: $0 up|status|down" >&2; exit 2 ;;
esac
