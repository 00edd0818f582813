#!/usr/bin/env bash
# Builds the lab's distribution guest: Debian 12 (bookworm) made by mmdebstrap from the apt
# registry, as an ext4 root image for an RBD root disk, the way Nova's images_type=rbd boots an
# instance from vms/<uuid>_disk. Packages: systemd, udev, Debian's qemu-guest-agent (its
# /etc/qemu/fsfreeze-hook and hook directory), postgresql-15 and postgresql-contrib (amcheck).
#
#   root.img        ext4 (label vmsnap-root, 3 GiB sparse), made with mkfs.ext4 -d from the tree
#   vmlinux         the busybox guest's kernel (lab/guest-image.sh): direct kernel boot, PVH entry
#   initramfs.cpio  the busybox guest's initramfs with lab/debian/init-root as /init: load the
#                   virtio/ext4 modules (and virtio-net), mount /dev/vda, switch_root to systemd
#   manifest        package versions
# lab/debian/customize sets up the tree (fstab, qemu-ga's hook, the writer, the console getty off).
# Cached in $VMSNAP_DEBIAN_IMAGE_CACHE/debian-<hash>/ (default $VMSNAP_CACHE) where <hash> covers
# this script, lab/debian/* and the busybox guest's inputs; the .debs in $VMSNAP_DEBIAN_DEBS
# (default $VMSNAP_CACHE/debian-debs), so a rebuild into an empty image cache downloads nothing
# but the package lists.
#
# Usage: lab/debian-image.sh [build]   build if missing; print the directory
#        lab/debian-image.sh dir       print the directory the current inputs map to
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# shellcheck disable=SC2034 # lib.sh's die and ERR trap name the script by it
WHO=debian-image
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Not VMSNAP_GUEST_IMAGE_CACHE, which CI empties every run (the busybox image builds in 5 s): this
# build takes a minute, so its cold path runs in `.ci/run --cold` (every cache empty).
cache_root=${VMSNAP_DEBIAN_IMAGE_CACHE:-$VMSNAP_CACHE}
debs_dir=${VMSNAP_DEBIAN_DEBS:-$VMSNAP_CACHE/debian-debs}
SUITE=bookworm
MIRROR=${VMSNAP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
ROOT_SIZE=3G
PACKAGES=systemd-sysv,udev,qemu-guest-agent,postgresql-15,postgresql-contrib,e2fsprogs,procps,kmod

# The PostgreSQL checkpoint hook operators get (deploy/guest/), installed switched off.
HOOK=$REPO/deploy/guest/fsfreeze-hook.d/postgresql-checkpoint

log() { echo "debian-image: $*" >&2; }

input_hash() {
  (cd "$here" && cat debian-image.sh && basename "$("$here/guest-image.sh" dir)" && cat "$HOOK" && find debian -type f | LC_ALL=C sort \
    | while read -r f; do echo "== $f"; cat "$f"; done) | sha256sum | cut -c1-16
}

out_dir() { echo "$cache_root/debian-$(input_hash)"; }

prune() { # keep the image just built and the newest other one
  local keep=$1 d others=()
  while IFS= read -r d; do
    [[ $d == "$keep/" ]] || others+=("$d")
  done < <(ls -dt "$cache_root"/debian-*/ 2>/dev/null)
  ((${#others[@]} <= 1)) || rm -rf -- "${others[@]:1}"
}

build() {
  local out tmp guest
  out=$(out_dir)
  if [[ -s $out/root.img && -s $out/initramfs.cpio ]]; then echo "$out"; return 0; fi
  for tool in mmdebstrap mkfs.ext4 cpio; do
    command -v "$tool" >/dev/null || { log "missing host tool: $tool"; exit 1; }
  done
  guest=$("$here/guest-image.sh" build)
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmsnap-debian-image.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$debs_dir" "$tmp/root"
  # The .debs go through apt's own archive dir: in from the cache before apt runs, back out after.
  # shellcheck disable=SC2016 # $1 is mmdebstrap's, expanded by the hook's shell
  mmdebstrap --variant=minbase --include="$PACKAGES" --skip=essential/unlink \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives' \
    --setup-hook="sync-in $debs_dir /var/cache/apt/archives" \
    --customize-hook="sync-out /var/cache/apt/archives $debs_dir" \
    --customize-hook="copy-in $here/debian /tmp" \
    --customize-hook="copy-in $HOOK /tmp/debian" \
    --customize-hook='chroot "$1" sh /tmp/debian/customize' \
    --customize-hook='rm -rf "$1"/tmp/debian "$1"/var/cache/apt/archives/*.deb' \
    "$SUITE" "$tmp/root" "$MIRROR" >"$tmp/mmdebstrap.log" 2>&1 \
    || { tail -n 40 "$tmp/mmdebstrap.log" >&2; exit 1; }

  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  {
    echo "debian=$(cat "$tmp/root/etc/debian_version")"
    for p in systemd qemu-guest-agent postgresql-15 linux-kernel; do
      [[ $p == linux-kernel ]] && { echo "kernel=$(sed -n 's/^kernel=//p' "$guest/manifest")"; continue; }
      # shellcheck disable=SC2016 # ${Version} is dpkg-query's own format field
      echo "$p=$(chroot "$tmp/root" dpkg-query -W -f='${Version}' "$p")"
    done
    echo "built=$(date -u +%FT%TZ)"
  } >"$out.tmp/manifest"
  truncate -s "$ROOT_SIZE" "$out.tmp/root.img"
  mkfs.ext4 -q -F -b 4096 -L vmsnap-root -E lazy_itable_init=0,lazy_journal_init=0 -d "$tmp/root" "$out.tmp/root.img"

  cp "$guest/vmlinux" "$out.tmp/"
  mkdir "$tmp/initrd"
  (cd "$tmp/initrd" && cpio -id --quiet <"$guest/initramfs.cpio")
  install -m 0755 "$here/debian/init-root" "$tmp/initrd/init"
  # virtio-net too (the busybox guests have no NIC): a copy restored with its NIC sees it, an
  # isolated one (vmsnap verify) must not. From the very kernel package the busybox image used.
  local kpkg m f
  kpkg=$(sed -n 's/^kernel=\([^ ]*\) .*/\1/p' "$guest/manifest")
  f=$(compgen -G "${VMSNAP_GUEST_DEBS:-$VMSNAP_CACHE/guest-debs}/${kpkg}_*.deb" | LC_ALL=C sort -V | tail -n 1)
  [[ -n $f ]] || { log "no $kpkg .deb in the guest image's deb cache"; exit 1; }
  dpkg -x "$f" "$tmp/kernel"
  for m in failover net_failover virtio_net; do
    cp "$(find "$tmp/kernel/lib/modules" -name "$m.ko" -print -quit)" "$tmp/initrd/lib/modules/"
    echo "$m" >>"$tmp/initrd/etc/modules-order"
  done
  (cd "$tmp/initrd" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$out.tmp/initramfs.cpio"
  rm -rf "$out" && mv "$out.tmp" "$out"
  log "built $out ($(du -sh "$out" | cut -f1) on disk)"
  prune "$out"
  echo "$out"
}

case ${1:-build} in
  build) build ;;
  dir) out_dir ;;
  *) echo "usage: $0 [build|dir]" >&2; exit 2 ;;
esac
