#!/usr/bin/env bash
# Builds the lab guest's boot files from Debian packages (apt-get download + dpkg -x, nothing is
# installed on the host):
#   vmlinux         uncompressed ELF kernel cut out of linux-image-6.1's bzImage (PVH entry: QEMU
#                   boots it directly, skipping the XZ decompressor, which is slow under TCG)
#   initramfs.cpio  busybox-static + the real qemu-ga and e2fsprogs' chattr/lsattr (+ their shared
#                   libraries) + the virtio/ext4 modules + lab/guest/* (init, fsfreeze hook, probe
#                   writer, control loop)
# Cached in $VMSNAP_CACHE/guest-<hash>/ where <hash> covers this script and lab/guest/*; a
# cache hit costs nothing.
#
# Usage: lab/guest-image.sh [build]   build if missing; print the directory
#        lab/guest-image.sh dir       print the directory the current inputs map to
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${VMSNAP_CACHE:-$HOME/.cache/vmsnap}

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
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}

# Offset of the first XZ stream inside a bzImage (Debian builds CONFIG_KERNEL_XZ).
xz_offset() { LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$1" | head -1 | cut -d: -f1; }

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
  log "downloading $kpkg qemu-guest-agent busybox-static e2fsprogs"
  (cd "$tmp" && apt-get download -q "$kpkg" qemu-guest-agent busybox-static e2fsprogs >/dev/null 2>"$tmp/apt.err") \
    || { cat "$tmp/apt.err" >&2; exit 1; }
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
    f=$(find "$tmp/x/lib/modules/$kver" -name "$m.ko" | head -1)
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
  # (xz stops at the stream's end; a pipe from tail would then die of SIGPIPE under pipefail)
  xz -dc --single-stream < <(tail -c +"$((off + 1))" "$tmp/x/boot/vmlinuz-$kver") > "$out.tmp/vmlinux"
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
  # keep this build and the two newest others (running guests keep their kernel in memory)
  ls -dt "$cache_root"/guest-*/ 2>/dev/null | grep -vF "$out/" | tail -n +3 | xargs -r rm -rf
  echo "$out"
}

case ${1:-build} in
  build) build ;;
  dir) out_dir ;;
  *) echo "usage: $0 [build|dir]" >&2; exit 2 ;;
esac
