#!/usr/bin/env bash
# Builds the lab guest's boot files from Debian packages (apt-get download + dpkg -x, nothing is
# installed on the host):
#   vmlinux         uncompressed ELF kernel cut out of linux-image-6.1's bzImage (PVH entry: QEMU
#                   boots it directly, skipping the XZ decompressor, which is slow under TCG)
#   initramfs.cpio  busybox-static + the real qemu-ga and e2fsprogs' chattr/lsattr (+ their shared
#                   libraries) + the virtio/ext4 modules + lab/guest/* (init, fsfreeze hook, probe
#                   writer, control loop)
# Cached in $VMSNAP_GUEST_IMAGE_CACHE/guest-<hash>/ (default $VMSNAP_CACHE, i.e. ~/.cache/vmsnap)
# where <hash> covers this script and lab/guest/*; a cache hit costs nothing. The downloaded .debs
# are kept in $VMSNAP_GUEST_DEBS (default $VMSNAP_CACHE/guest-debs), so a rebuild into an empty
# image cache (what CI does every run) needs no package mirror once they are there.
#
# Usage: lab/guest-image.sh [build]   build if missing; print the directory
#        lab/guest-image.sh dir       print the directory the current inputs map to
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# shellcheck disable=SC2034 # lib.sh's die and ERR trap name the script by it
WHO=guest-image
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${VMSNAP_GUEST_IMAGE_CACHE:-$VMSNAP_CACHE}
debs_dir=${VMSNAP_GUEST_DEBS:-$VMSNAP_CACHE/guest-debs}

# Loaded in this order by /init (no depmod in the guest); checked against each .ko's depends=.
modules=(crc32c_generic virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio virtio_pci
  virtio_blk virtio_console jbd2 mbcache crc16 ext4)

log() { echo "guest-image: $*" >&2; }

input_hash() {
  (cd "$here" && cat guest-image.sh && find guest -type f | LC_ALL=C sort | while read -r f; do
    echo "== $f"; cat "$f"; done) | sha256sum | cut -c1-16
}

out_dir() { echo "$cache_root/guest-$(input_hash)"; }

kernel_package() { # the linux-image-6.x package linux-image-amd64 currently points to
  # Nothing (not a failure) when apt has no package lists yet: apt-cache then exits 100.
  local deps
  deps=$(apt-cache depends linux-image-amd64 2>/dev/null) || return 0
  awk '/Depends: linux-image-[0-9]/ {print $2; exit}' <<<"$deps"
}

# Offset of the first XZ stream inside a bzImage (Debian builds CONFIG_KERNEL_XZ). -m1, not
# `| head -1`: head closing the pipe early would fail the pipeline under pipefail.
xz_offset() { LC_ALL=C grep -m1 -obUaP '\xfd7zXZ\x00' "$1" | cut -d: -f1; }

# fetch_debs DIR PACKAGE...: DIR gets one .deb per package, from $debs_dir when it has them, else
# downloaded there first (apt-get download: nothing is installed).
fetch_debs() {
  local into=$1 pkg missing=()
  shift
  mkdir -p "$debs_dir"
  for pkg in "$@"; do
    compgen -G "$debs_dir/${pkg}_*.deb" >/dev/null || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    log "downloading ${missing[*]} into $debs_dir"
    # Into a private directory first: another build may be reading $debs_dir.
    mkdir -p "$into/dl"
    (cd "$into/dl" && apt-get download -q "${missing[@]}" >/dev/null 2>"$into/apt.err") \
      || { cat "$into/apt.err" >&2; exit 1; }
    mv -f "$into"/dl/*.deb "$debs_dir/"
  fi
  for pkg in "$@"; do
    cp "$(compgen -G "$debs_dir/${pkg}_*.deb" | LC_ALL=C sort -V | tail -n 1)" "$into/"
  done
}

# prune: keep the image just built and the two newest others (running guests keep their kernel
# in memory). Written without a `ls | grep -v | tail | xargs` pipeline: with no other image,
# grep -v selects nothing and exits 1, which pipefail turned into the script's failure.
prune() {
  local keep=$1 d others=()
  while IFS= read -r d; do
    [[ $d == "$keep/" ]] || others+=("$d")
  done < <(ls -dt "$cache_root"/guest-*/ 2>/dev/null)
  ((${#others[@]} <= 2)) || rm -rf -- "${others[@]:2}"
}

copy_with_libs() { # copy_with_libs ROOT BINARY: the ELF's shared libraries (ldd) go to ROOT/lib
  local root=$1 bin=$2 lib
  for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
    cp -L "$lib" "$root/lib/x86_64-linux-gnu/"
  done
}

build() {
  local out tmp kpkg kver
  out=$(out_dir)
  if [[ -s $out/vmlinux && -s $out/initramfs.cpio ]]; then echo "$out"; return 0; fi
  for tool in apt-get apt-cache dpkg xz cpio ldd sha256sum; do
    command -v "$tool" >/dev/null || { log "missing host tool: $tool"; exit 1; }
  done
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmsnap-guest-image.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  kpkg=$(kernel_package)
  if [[ -z $kpkg ]]; then # no package lists yet (fresh machine)
    log "apt-get update (package lists missing)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    kpkg=$(kernel_package)
  fi
  [[ -n $kpkg ]] || { log "cannot resolve linux-image-amd64 to a kernel package"; exit 1; }
  fetch_debs "$tmp" "$kpkg" qemu-guest-agent busybox-static e2fsprogs
  for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/x"; done
  kver=${kpkg#linux-image-}

  local root=$tmp/root
  mkdir -p "$root"/{bin,sbin,lib/x86_64-linux-gnu,lib/modules,lib64,dev,proc,sys,run,mnt,tmp,etc/qemu,usr/local/bin}
  cp "$tmp/x/bin/busybox" "$root/bin/busybox"
  cp "$tmp/x/usr/sbin/qemu-ga" "$root/bin/qemu-ga"
  copy_with_libs "$root" "$tmp/x/usr/sbin/qemu-ga"
  # chattr +S makes the probe's file synchronous (busybox has no chattr)
  cp "$tmp/x/usr/bin/chattr" "$tmp/x/usr/bin/lsattr" "$root/bin/"
  copy_with_libs "$root" "$tmp/x/usr/bin/chattr"
  # glib's thread code dlopens libgcc_s for pthread_cancel unwinding.
  cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$root/lib/x86_64-linux-gnu/"
  cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"

  local m f deps d seen=" "
  for m in "${modules[@]}"; do
    f=$(find "$tmp/x/lib/modules/$kver" -name "$m.ko" -print -quit)
    [[ -n $f ]] || { log "module $m not found in $kpkg"; exit 1; }
    deps=$(tr '\0' '\n' < "$f" | sed -n 's/^depends=//p' | tr ',' ' ')
    for d in $deps; do
      [[ $seen == *" $d "* ]] || { log "module order: $m needs $d first"; exit 1; }
    done
    seen+="$m "
    cp "$f" "$root/lib/modules/"
  done
  printf '%s\n' "${modules[@]}" > "$root/etc/modules-order"

  install -m 0755 "$here/guest/init" "$root/init"
  install -m 0755 "$here/guest/fsfreeze-hook" "$root/etc/qemu/fsfreeze-hook"
  install -m 0755 "$here/guest/probe" "$root/usr/local/bin/probe"
  install -m 0755 "$here/guest/ctl" "$root/usr/local/bin/ctl"

  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  local off
  off=$(xz_offset "$tmp/x/boot/vmlinuz-$kver")
  [[ -n $off ]] || { log "no XZ stream in vmlinuz-$kver"; exit 1; }
  # xz stops at the stream's end and tail then dies of SIGPIPE: expected, so not a pipe (pipefail)
  # and `|| true` (the ERR trap would report it).
  xz -dc --single-stream < <(tail -c +"$((off + 1))" "$tmp/x/boot/vmlinuz-$kver" || true) > "$out.tmp/vmlinux"
  [[ $(head -c 4 "$out.tmp/vmlinux" | od -An -c | tr -d ' ') == 177ELF ]] \
    || { log "extracted kernel is not an ELF"; exit 1; }
  (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$out.tmp/initramfs.cpio"
  {
    echo "kernel=$kpkg $(dpkg-deb -f "$tmp"/linux-image-*.deb Version)"
    echo "qemu-guest-agent=$(dpkg-deb -f "$tmp"/qemu-guest-agent_*.deb Version)"
    echo "busybox-static=$(dpkg-deb -f "$tmp"/busybox-static_*.deb Version)"
    echo "e2fsprogs=$(dpkg-deb -f "$tmp"/e2fsprogs_*.deb Version)"
    echo "built=$(date -u +%FT%TZ)"
  } > "$out.tmp/manifest"
  rm -rf "$out" && mv "$out.tmp" "$out"
  log "built $out ($(du -sh "$out" | cut -f1))"
  prune "$out"
  echo "$out"
}

case ${1:-build} in
  build) build ;;
  dir) out_dir ;;
  *) echo "usage: $0 [build|dir]" >&2; exit 2 ;;
esac
