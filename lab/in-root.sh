#!/usr/bin/env bash
# in-root.sh ROOT [DIR...] -- COMMAND [ARG...]: runs COMMAND as root inside the chroot ROOT (made
# by release-root.sh), in a mount namespace of its own, so nothing stays mounted when it exits.
# /dev, /proc and /sys come from the host; each DIR (e.g. the lab's directory: Ceph conf and keys,
# libvirt sockets) is bind-mounted at the same path; /tmp is a fresh tmpfs. The network is the
# host's, so 127.0.0.1 reaches the lab's Temporal and Ceph monitor. COMMAND is exec'd with a
# minimal environment plus the VMSNAP_*/TEMPORAL_* variables of the caller (not npm_config_*:
# the caller's npm settings describe the host, e.g. a CA file path that means another file there).
set -euo pipefail

if [[ -z "${VMSNAP_IN_ROOT_NS:-}" ]]; then
  # --kill-child: the command gets SIGTERM when unshare dies, so a killed caller never leaves a
  # worker running inside a root nobody watches. unshare itself ignores SIGTERM: stop it with SIGKILL.
  exec unshare --mount --propagation private --fork --kill-child=SIGTERM -- env VMSNAP_IN_ROOT_NS=1 bash "${BASH_SOURCE[0]}" "$@"
fi

root="$1"
shift
dirs=()
while (($# > 0)) && [[ "$1" != -- ]]; do
  dirs+=("$1")
  shift
done
[[ "${1:-}" == -- ]] || { echo "usage: in-root.sh ROOT [DIR...] -- COMMAND [ARG...]" >&2; exit 2; }
shift
[[ -e "$root/.complete" ]] || { echo "in-root.sh: $root is not a root made by release-root.sh" >&2; exit 2; }

mount --rbind /dev "$root/dev"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount -t tmpfs tmpfs "$root/tmp"
cp /etc/resolv.conf "$root/etc/resolv.conf"
for d in "${dirs[@]}"; do
  mkdir -p "$root$d"
  mount --rbind "$d" "$root$d"
done

envs=(PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8)
# The network's trust, not the root's: a machine whose egress re-signs TLS (this one) hands its CA
# bundle to Node as NODE_EXTRA_CA_CERTS; the root gets a copy in its /tmp, nothing else changes.
if [[ -n "${NODE_EXTRA_CA_CERTS:-}" && -r "$NODE_EXTRA_CA_CERTS" ]]; then
  cp "$NODE_EXTRA_CA_CERTS" "$root/tmp/host-ca.crt"
  envs+=(NODE_EXTRA_CA_CERTS=/tmp/host-ca.crt)
fi
while IFS= read -r -d '' kv; do
  case "$kv" in VMSNAP_IN_ROOT_NS=*) ;; VMSNAP_* | TEMPORAL_*) envs+=("$kv") ;; esac
done < <(env -0)
exec chroot "$root" /usr/bin/env -i "${envs[@]}" "$@"
