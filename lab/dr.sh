#!/usr/bin/env bash
# The lab's DR site (docs/dr.md): a second single-node Ceph cluster beside the lab's (lab/ceph.sh
# with CEPH_INSTANCE=dr: its own fsid, mon on 127.0.0.1:$DR_MON_PORT, pools vms and images) and an
# rbd-mirror daemon on it that pulls the lab cluster's `vms` pool, one way, in snapshot mode. Both
# pools mirror in `image` mode: only the images someone enables (`rbd mirror image enable IMG
# snapshot`) are replicated, so the lab's own guests and every other test's images are left alone.
# Peered as Ceph documents it: `rbd mirror pool peer bootstrap create` on the lab cluster,
# `... bootstrap import --direction rx-only` here; the daemon then registers itself on the lab
# cluster as a tx-only peer, which every mirror snapshot taken there names.
#
# Not part of lab:up: `lab/lab.sh up --dr`, or the tests that need it, run `up`; lab:down takes it
# down with the rest.
#
#   lab/dr.sh up       start it (the first time: create the cluster and peer it); idempotent;
#                      writes env.d/dr.env (and env.d/ceph-dr.env, the cluster's keys CEPH_DR_*)
#   lab/dr.sh status   "dr ok" / "dr down: why" (exit 1 when down)
#   lab/dr.sh down     stop rbd-mirror and the DR cluster, remove their state, and remove the DR
#                      site's peer entry from the lab cluster's vms pool
#
# Environment: LAB_DIR, DR_MON_PORT (default 3301).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
unset CEPH_ARGS CEPH_CONF CEPH_KEYRING

WHO=dr
POOL=vms
SITE=lab-dr
PRIMARY_SITE=lab
PRIMARY_DIR="$LAB_DIR/ceph"
PRIMARY_CONF="$PRIMARY_DIR/ceph.conf"
DR_DIR="$LAB_DIR/ceph-dr"
DR_CONF="$DR_DIR/ceph.conf"
MIRROR_ID=rbd-mirror.a
MIRROR_PIDFILE="$DR_DIR/run/client.$MIRROR_ID.pid"
MIRROR_LOG="$DR_DIR/log/client.$MIRROR_ID.log"
MIRROR_ASOK="$DR_DIR/run/client.$MIRROR_ID.asok"
CLI_TIMEOUT=30

primary_rbd() { timeout "$CLI_TIMEOUT" rbd -c "$PRIMARY_CONF" --id admin "$@"; }
dr_rbd() { timeout "$CLI_TIMEOUT" rbd -c "$DR_CONF" --id admin "$@"; }
dr_ceph() { timeout "$CLI_TIMEOUT" ceph -c "$DR_CONF" --id admin "$@"; }
# 9>&-: the daemons must not inherit the lock (with_lock), or it would be held for their lifetime.
ceph_dr_sh() { CEPH_INSTANCE=dr CEPH_MON_PORT="${DR_MON_PORT:-3301}" CEPH_POOLS="vms images" bash "$REPO/lab/ceph.sh" "$@" 9>&-; }

# pool_mode CLI...: the pool's mirror mode (disabled, image, pool).
pool_mode() { "$@" mirror pool info "$POOL" --format json | sed -n 's/.*"mode": *"\([a-z]*\)".*/\1/p'; }

# peers CLI...: the pool's peers as "direction site_name uuid mirror_uuid" lines ("-": none yet).
peers() {
  "$@" mirror pool info "$POOL" --format json |
    python3 -c 'import json,sys; [print(p.get("direction") or "-", p.get("site_name") or "-", p.get("uuid") or "-", p.get("mirror_uuid") or "-") for p in json.load(sys.stdin).get("peers",[])]'
}

enable_image_mode() {
  local mode
  mode="$(pool_mode "$@")"
  [[ "$mode" == image ]] && return 0
  [[ "$mode" == disabled ]] || die "$WHO" "pool $POOL mirrors in mode '$mode'; the lab needs 'image' (per-image enable)"
  "$@" mirror pool enable "$POOL" image
}

# The daemon's own ping (rbd_mirror_pool_replayers) registers it on the lab cluster as a tx-only
# peer with its site's mirror uuid: until then a mirror snapshot taken there names no peer and
# rbd-mirror would not pull it.
registered_on_primary() { peers primary_rbd | grep -q "^tx-only $SITE [^ ]* [^-]"; }

peer() {
  local token
  enable_image_mode primary_rbd
  enable_image_mode dr_rbd
  if peers dr_rbd | grep -q "^rx-only $PRIMARY_SITE "; then
    return 0
  fi
  token="$DR_DIR/bootstrap.token"
  (umask 077 && primary_rbd mirror pool peer bootstrap create --site-name "$PRIMARY_SITE" "$POOL" >"$token")
  dr_rbd mirror pool peer bootstrap import --site-name "$SITE" --direction rx-only "$POOL" "$token"
  rm -f "$token"
  say "$WHO" "peered: $PRIMARY_SITE ($POOL) -> $SITE, rx-only"
}

start_mirror() {
  pid_running "$MIRROR_PIDFILE" rbd-mirror && return 0
  dr_ceph auth get-or-create "client.$MIRROR_ID" mon 'profile rbd-mirror' osd 'profile rbd' \
    -o "$DR_DIR/ceph.client.$MIRROR_ID.keyring" >/dev/null
  # The daemon opens its connection to the local cluster with a CephContext of its own that reads
  # only the default conf paths (/etc/ceph/ceph.conf), not -c; it does apply the command line's
  # options, so the local mon and keyring go there. For the remote connection rbd-mirror reverts
  # those two and takes the peer's mon_host and key that bootstrap import stored in this cluster.
  # Memory: rbd_mirror_memory_target caches journal entries (journal mode only); snapshot mode
  # does not need its 4 GiB default on a 24 GiB machine other engineers share.
  rbd-mirror -c "$DR_CONF" --id "$MIRROR_ID" --mon-host "v2:127.0.0.1:$(cat "$DR_DIR/port")" \
    --keyring "$DR_DIR/ceph.client.$MIRROR_ID.keyring" --pid-file "$MIRROR_PIDFILE" \
    --log-file "$MIRROR_LOG" --admin-socket "$MIRROR_ASOK" --rbd-mirror-memory-target 268435456 \
    --rbd-mirror-memory-cache-min 33554432 >>"$DR_DIR/log/client.$MIRROR_ID.stderr.log" 2>&1 9>&- ||
    die "$WHO" "rbd-mirror failed to start, see $MIRROR_LOG"
  wait_until 15 pid_running "$MIRROR_PIDFILE" rbd-mirror || die "$WHO" "rbd-mirror did not start, see $MIRROR_LOG"
}

write_dr_env() {
  write_env dr <<EOF
VMSNAP_DR_SITE $SITE
VMSNAP_DR_POOL $POOL
VMSNAP_DR_MIRROR_LOG $MIRROR_LOG
EOF
}

cmd_up() {
  local t0 t
  t0="$(now)"
  [[ -f "$PRIMARY_CONF" ]] || die "$WHO" "the lab's Ceph is not up ($PRIMARY_CONF missing): npm run lab:up"
  t="$(now)"
  ceph_dr_sh up
  say "$WHO" "cluster ceph-dr ready in $(elapsed "$t") s"
  t="$(now)"
  peer
  start_mirror
  wait_until 60 registered_on_primary ||
    die "$WHO" "rbd-mirror did not register on the lab cluster within 60 s, see $MIRROR_LOG"
  say "$WHO" "rbd-mirror up and registered as a tx-only peer of $PRIMARY_SITE in $(elapsed "$t") s"
  write_dr_env
  say "$WHO" "ready in $(elapsed "$t0") s (rbd-mirror pid $(pidfile_pid "$MIRROR_PIDFILE"))"
}

cmd_status() {
  local line why=()
  if ! line="$(ceph_dr_sh status 2>&1)"; then why+=("${line:-ceph-dr down}"); fi
  pid_running "$MIRROR_PIDFILE" rbd-mirror || why+=("rbd-mirror not running")
  if ((${#why[@]} == 0)); then
    echo "dr ok (rbd-mirror pid $(pidfile_pid "$MIRROR_PIDFILE"); $line)"
    return 0
  fi
  local IFS=';'
  echo "dr down: ${why[*]}"
  return 1
}

cmd_down() {
  local site uuid
  stop_pidfile "$MIRROR_PIDFILE" rbd-mirror 15
  ceph_dr_sh down
  # The DR site's entry on the lab cluster: a later `up` makes a new cluster under the same site name.
  if [[ -f "$PRIMARY_CONF" ]]; then
    while read -r _ site uuid _; do
      [[ "$site" == "$SITE" ]] || continue
      primary_rbd mirror pool peer remove "$POOL" "$uuid" || say "$WHO" "could not remove peer $uuid from the lab cluster"
    done < <(peers primary_rbd 2>/dev/null || true)
  fi
  rm -f "$ENV_D/dr.env"
  say "$WHO" "rbd-mirror and ceph-dr stopped, state removed"
}

# One up/down at a time per lab dir: tests of several engineers start it on the same lab. The lock
# lives outside $LAB_DIR (lab:down removes that) and is not lab.sh's, which holds its own around us.
with_lock() {
  exec 9>"${TMPDIR:-/tmp}/vmsnap-dr-$(printf '%s' "$LAB_DIR" | md5sum | cut -c1-12).lock"
  flock -w 300 9 || die "$WHO" "another lab/dr.sh up/down holds the lock"
  "$@"
}

case "${1:-}" in
  up) with_lock cmd_up ;;
  status) cmd_status ;;
  down) with_lock cmd_down ;;
  *)
    echo "usage: lab/dr.sh up|status|down" >&2
    exit 2
    ;;
esac
