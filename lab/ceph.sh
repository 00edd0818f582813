#!/usr/bin/env bash
# A private single-node Ceph cluster for the lab: 1 mon (msgr2 only) and 1 bluestore OSD on a
# sparse file, all state in $LAB_DIR/ceph. No mgr: rbd snapshot/clone/flatten/group do not need one
# (`ceph -s` then shows zeros and `ceph pg ...` hangs; readiness is a real rbd operation).
#
#   lab/ceph.sh up            create (first time) or restart the cluster; write env.d/ceph.env
#   lab/ceph.sh status        "ceph ok" / "ceph down: why" (exit 1 when down)
#   lab/ceph.sh down          stop the daemons this lab started (by pid), remove $LAB_DIR/ceph
#   lab/ceph.sh stop-osd      stop the OSD (SIGTERM, the OSD tells the mon it goes down)
#   lab/ceph.sh kill-osd      SIGKILL the OSD (a crash; the mon is not told)
#   lab/ceph.sh start-osd     start the OSD again and wait until rbd I/O works
#   lab/ceph.sh set-paxos S   set paxos_propose_interval to S seconds on the running mon
#   lab/ceph.sh get-paxos     print the mon's paxos_propose_interval
#
# Environment: LAB_DIR, CEPH_MON_PORT (default 3300: a plain "127.0.0.1:3300" mon address, as
# libvirt's <host name port> gives to QEMU, is read as msgr2 only for port 3300),
# PAXOS_PROPOSE_INTERVAL (default 0.1; Ceph's own default is 1.0), CEPH_OSD_SIZE (sparse, 20G).
# CEPH_INSTANCE=NAME (lowercase letters and digits) makes a second cluster beside the lab's, as
# lab/dr.sh does for its DR cluster: its own fsid, state in $LAB_DIR/ceph-NAME, env keys
# CEPH_<NAME>_* in env.d/ceph-NAME.env, pools CEPH_POOLS (default "vms images"); the caller picks
# its CEPH_MON_PORT. Every subcommand then acts on that cluster only.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The daemons and CLIs below take everything from $CONF. Ceph's binaries also read CEPH_ARGS,
# CEPH_CONF and CEPH_KEYRING from the environment, and CEPH_KEYRING beats ceph.conf's `keyring`
# lines. The lab's own env file (.lab/env, meant to be sourced) exports CEPH_KEYRING=<admin
# keyring>, so a start-osd run from a shell or test that had sourced it gave ceph-osd a keyring
# without osd.0: it then sends the mon a CephXAuthenticate cut after its header and every restart
# fails ("failed to decode CephXAuthenticate: End of buffer", handle_auth_bad_method).
unset CEPH_ARGS CEPH_CONF CEPH_KEYRING

INSTANCE="${CEPH_INSTANCE:-}"
if [[ -z "$INSTANCE" ]]; then
  WHO=ceph
  ENV_PREFIX=CEPH_
  POOLS=(vms images other)
else
  [[ "$INSTANCE" =~ ^[a-z][a-z0-9]{0,15}$ ]] || die ceph "CEPH_INSTANCE must be lowercase letters and digits: $INSTANCE"
  WHO="ceph-$INSTANCE"
  ENV_PREFIX="CEPH_${INSTANCE^^}_"
  read -r -a POOLS <<<"${CEPH_POOLS:-vms images}"
fi
CEPH_DIR="$LAB_DIR/$WHO"
CONF="$CEPH_DIR/ceph.conf"
ADMIN_KEYRING="$CEPH_DIR/ceph.client.admin.keyring"
VMSNAP_KEYRING="$CEPH_DIR/ceph.client.vmsnap.keyring"
MON_ID=a
OSD_ID=0
MON_PIDFILE="$CEPH_DIR/run/mon.$MON_ID.pid"
OSD_PIDFILE="$CEPH_DIR/run/osd.$OSD_ID.pid"
OSD_LOG="$CEPH_DIR/log/osd.$OSD_ID.log"
MON_ASOK="$CEPH_DIR/run/mon.$MON_ID.asok"
BOOTSTRAPPED="$CEPH_DIR/.bootstrapped"
CLI_TIMEOUT=30

ceph_cli() { timeout "$CLI_TIMEOUT" ceph -c "$CONF" --id admin "$@"; }
rbd_cli() { timeout "$CLI_TIMEOUT" rbd -c "$CONF" --id admin "$@"; }

mon_port() {
  if [[ -s "$CEPH_DIR/port" ]]; then cat "$CEPH_DIR/port"; else echo "${CEPH_MON_PORT:-3300}"; fi
}

write_conf() {
  local fsid="$1" port="$2" osd_size="$3"
  cat >"$CONF" <<EOF
# Private lab cluster, written by lab/ceph.sh. Clients: ceph -c $CONF --id admin
[global]
fsid = $fsid
mon_host = v2:127.0.0.1:$port
ms_bind_msgr1 = false
ms_bind_msgr2 = true
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
keyring = $CEPH_DIR/\$cluster.\$name.keyring
run_dir = $CEPH_DIR/run
client_mount_timeout = 10
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
osd_crush_chooseleaf_type = 0
mon_osd_initial_require_min_compat_client = mimic

[mon]
mon_data = $CEPH_DIR/mon/\$cluster-\$id
keyring = \$mon_data/keyring
log_file = $CEPH_DIR/log/\$name.log
pid_file = $CEPH_DIR/run/\$name.pid
admin_socket = $CEPH_DIR/run/\$name.asok
# paxos_propose_interval lives in the mon's config database (set at bootstrap and by set-paxos):
# a value in this file would take precedence over it and could not be changed at run time.

[osd]
osd_data = $CEPH_DIR/osd/\$cluster-\$id
keyring = \$osd_data/keyring
log_file = $CEPH_DIR/log/\$name.log
pid_file = $CEPH_DIR/run/\$name.pid
admin_socket = $CEPH_DIR/run/\$name.asok
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
osd_objectstore = bluestore
bluestore_block_create = true
bluestore_block_size = $osd_size
bluestore_fsck_on_mkfs = false
bdev_aio_poll_ms = 20
osd_memory_target = 1073741824
osd_fast_shutdown_notify_mon = true
# Every OSD start mounts BlueFS twice, and each mount replays BlueFS's whole metadata log, which
# grows with every write and restart until it is compacted (by default only past 16 MiB). At 10 MiB
# a mount took 0.8 s of CPU (20 s on this loaded machine); compacted to 0.4 MiB, 0.05 s.
bluefs_log_compact_min_size = 1048576
EOF
}

start_mon() {
  pid_running "$MON_PIDFILE" ceph-mon && return 0
  local port
  port="$(mon_port)"
  if port_in_use "$port"; then
    die "$WHO" "port $port is in use by another process (ss -ltnp 'sport = :$port'); set CEPH_MON_PORT"
  fi
  ceph-mon -c "$CONF" -i "$MON_ID" >>"$CEPH_DIR/log/mon.$MON_ID.stderr.log" 2>&1 ||
    die "$WHO" "ceph-mon failed to start, see $CEPH_DIR/log/mon.$MON_ID.log"
  wait_until 10 pid_running "$MON_PIDFILE" ceph-mon || die "$WHO" "ceph-mon did not start"
}

OSD_LOG_MARK=""
start_osd() {
  pid_running "$OSD_PIDFILE" ceph-osd && return 0
  # The previous OSD is gone (stop/kill wait for that), so all the log holds past here is the new one's.
  OSD_LOG_MARK="$(stat -c %s "$OSD_LOG" 2>/dev/null || echo 0)"
  ceph-osd -c "$CONF" -i "$OSD_ID" >>"$CEPH_DIR/log/osd.$OSD_ID.stderr.log" 2>&1 ||
    die "$WHO" "ceph-osd failed to start, see $CEPH_DIR/log/osd.$OSD_ID.log"
  wait_until 30 pid_running "$OSD_PIDFILE" ceph-osd || die "$WHO" "ceph-osd did not start"
}

# osd_booted: the ceph-osd that start_osd launched has seen itself up in an osdmap, i.e. the mon
# has published osd.0 up at the new process's address (the OSD logs "state: booting -> active"
# only then). Until then clients may still be sent to a killed instance and back off for ~10 s.
# Read from what the OSD logged since its launch rather than asked with `ceph osd dump`: on this
# shared 2-core machine one ceph CLI call took 4-6 s, past the 5 s such a poll allows. True when
# start_osd found the OSD already running.
osd_booted() {
  [[ -n "$OSD_LOG_MARK" ]] || return 0
  # grep without -q reads all its input, so tail never dies of SIGPIPE under pipefail.
  tail -c +"$((OSD_LOG_MARK + 1))" "$OSD_LOG" | grep -F 'state: booting -> active' >/dev/null
}

# rbd_works: the readiness check, a real rbd round trip in the vms pool.
rbd_works() {
  local image="lab-ready-$$-$RANDOM"
  rbd_cli create --size 1M "vms/$image" && rbd_cli rm --no-progress "vms/$image"
}

bootstrap() {
  local fsid port paxos osd_size uuid secret t
  port="${CEPH_MON_PORT:-3300}"
  if port_in_use "$port"; then
    die "$WHO" "port $port is in use by another process (ss -ltnp 'sport = :$port'); set CEPH_MON_PORT"
  fi
  paxos="${PAXOS_PROPOSE_INTERVAL:-0.1}"
  osd_size="${CEPH_OSD_SIZE:-20G}"
  osd_size="$(numfmt --from=iec "$osd_size")"
  rm -rf "$CEPH_DIR"
  mkdir -p "$CEPH_DIR"/{run,log,mon,osd/ceph-$OSD_ID}
  fsid="$(uuidgen)"
  echo "$port" >"$CEPH_DIR/port"
  write_conf "$fsid" "$port" "$osd_size"

  say "$WHO" "bootstrapping fsid $fsid, mon v2:127.0.0.1:$port, paxos_propose_interval $paxos"
  t="$(now)"
  ceph-authtool --create-keyring "$CEPH_DIR/mon.keyring" --gen-key -n "mon." \
    --cap mon 'allow *' >/dev/null
  ceph-authtool --create-keyring "$ADMIN_KEYRING" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
  ceph-authtool "$CEPH_DIR/mon.keyring" --import-keyring "$ADMIN_KEYRING" >/dev/null
  monmaptool --create --fsid "$fsid" --addv "$MON_ID" "[v2:127.0.0.1:$port]" \
    "$CEPH_DIR/monmap" >/dev/null
  ceph-mon -c "$CONF" -i "$MON_ID" --mkfs --monmap "$CEPH_DIR/monmap" \
    --keyring "$CEPH_DIR/mon.keyring"
  start_mon
  cmd_set_paxos "$paxos"
  say "$WHO" "mon up in $(elapsed "$t") s"

  t="$(now)"
  uuid="$(uuidgen)"
  secret="$(ceph-authtool --gen-print-key)"
  printf '{"cephx_secret": "%s"}\n' "$secret" >"$CEPH_DIR/osd-new.json"
  local id
  id="$(ceph_cli osd new "$uuid" -i "$CEPH_DIR/osd-new.json")"
  rm -f "$CEPH_DIR/osd-new.json"
  [[ "$id" == "$OSD_ID" ]] || die "$WHO" "expected osd id $OSD_ID, the mon gave '$id'"
  ceph-authtool --create-keyring "$CEPH_DIR/osd/ceph-$OSD_ID/keyring" --name "osd.$OSD_ID" \
    --add-key "$secret" >/dev/null
  ceph-osd -c "$CONF" -i "$OSD_ID" --mkfs --osd-uuid "$uuid" >>"$CEPH_DIR/log/osd-mkfs.log" 2>&1 ||
    die "$WHO" "ceph-osd --mkfs failed, see $CEPH_DIR/log/osd-mkfs.log"
  start_osd
  say "$WHO" "osd up (bluestore on a sparse $(numfmt --to=iec "$osd_size") file) in $(elapsed "$t") s"

  t="$(now)"
  local pool
  for pool in "${POOLS[@]}"; do
    ceph_cli osd pool create "$pool" 8 8 replicated --size 1 >/dev/null 2>&1 ||
      ceph_cli osd pool create "$pool" 8 8 replicated >/dev/null
  done
  for pool in "${POOLS[@]}"; do
    wait_until 60 rbd_cli pool init "$pool" || die "$WHO" "rbd pool init $pool did not succeed in 60 s"
  done
  ceph_cli auth get-or-create client.vmsnap \
    mon 'profile rbd' \
    osd 'profile rbd pool=vms, profile rbd pool=images' \
    -o "$VMSNAP_KEYRING" 2>/dev/null
  say "$WHO" "pools ${POOLS[*]} initialised, client.vmsnap key written, in $(elapsed "$t") s"
  touch "$BOOTSTRAPPED"
}

write_ceph_env() {
  {
    sed "s/^/$ENV_PREFIX/" <<EOF
CONF $CONF
ID admin
KEYRING $ADMIN_KEYRING
VMSNAP_ID vmsnap
VMSNAP_KEYRING $VMSNAP_KEYRING
MON_HOST 127.0.0.1
MON_PORT $(mon_port)
LOG_DIR $CEPH_DIR/log
EOF
    # Only the lab's own cluster names the pools (a second one mirrors them under the same names).
    [[ -n "$INSTANCE" ]] || printf '%s\n' 'VMSNAP_VM_POOL vms' 'VMSNAP_IMAGE_POOL images' 'VMSNAP_OTHER_POOL other'
  } | write_env "$WHO"
}

cmd_up() {
  local t0
  t0="$(now)"
  if [[ -f "$BOOTSTRAPPED" ]]; then
    if pid_running "$MON_PIDFILE" ceph-mon && pid_running "$OSD_PIDFILE" ceph-osd; then
      say "$WHO" "already running (mon pid $(pidfile_pid "$MON_PIDFILE"), osd pid $(pidfile_pid "$OSD_PIDFILE"))"
    else
      say "$WHO" "restarting the daemons on the existing state in $CEPH_DIR"
      start_mon
      start_osd
      wait_until 60 osd_booted || die "$WHO" "the osdmap does not show osd.$OSD_ID up after 60 s"
    fi
    if [[ -n "${PAXOS_PROPOSE_INTERVAL:-}" ]]; then
      cmd_set_paxos "$PAXOS_PROPOSE_INTERVAL"
    fi
  else
    bootstrap
  fi
  wait_until 60 rbd_works || die "$WHO" "rbd create/remove in pool vms does not work after 60 s"
  write_ceph_env
  say "$WHO" "ready (rbd create+remove works) in $(elapsed "$t0") s; conf $CONF"
}

cmd_status() {
  local why=()
  pid_running "$MON_PIDFILE" ceph-mon || why+=("mon not running")
  pid_running "$OSD_PIDFILE" ceph-osd || why+=("osd not running")
  if ((${#why[@]} == 0)); then
    CLI_TIMEOUT=15
    if rbd_works >/dev/null 2>&1; then
      echo "$WHO ok (mon v2:127.0.0.1:$(mon_port), paxos_propose_interval $(cmd_get_paxos 2>/dev/null || echo '?'))"
      return 0
    fi
    why+=("rbd create/remove in vms failed")
  fi
  local IFS=';'
  echo "$WHO down: ${why[*]}"
  return 1
}

cmd_down() {
  stop_pidfile "$OSD_PIDFILE" ceph-osd 30
  stop_pidfile "$MON_PIDFILE" ceph-mon 15
  rm -rf "$CEPH_DIR" "$ENV_D/$WHO.env"
  say "$WHO" "stopped and removed $CEPH_DIR"
}

cmd_stop_osd() {
  local signal="$1" t
  t="$(now)"
  if [[ "$signal" == KILL ]]; then
    if pid_running "$OSD_PIDFILE" ceph-osd; then
      kill -KILL "$(pidfile_pid "$OSD_PIDFILE")"
      wait_until 10 osd_gone || die "$WHO" "osd.$OSD_ID survived SIGKILL"
    fi
    rm -f "$OSD_PIDFILE"
  else
    stop_pidfile "$OSD_PIDFILE" ceph-osd 30
  fi
  say "$WHO" "osd.$OSD_ID stopped ($signal) in $(elapsed "$t") s"
}

osd_gone() { ! pid_running "$OSD_PIDFILE" ceph-osd; }

cmd_start_osd() {
  local t t_proc t_boot
  t="$(now)"
  start_osd
  t_proc="$(elapsed "$t")"
  wait_until 60 osd_booted || die "$WHO" "osd restarted but the osdmap does not show it up after 60 s"
  t_boot="$(elapsed "$t")"
  wait_until 60 rbd_works || die "$WHO" "osd restarted but rbd I/O does not work after 60 s"
  say "$WHO" "osd.$OSD_ID started, rbd I/O works, in $(elapsed "$t") s (process up $t_proc s, in the osdmap $t_boot s)"
}

cmd_get_paxos() {
  timeout 10 ceph --admin-daemon "$MON_ASOK" config get paxos_propose_interval |
    sed -n 's/.*"paxos_propose_interval": *"\([^"]*\)".*/\1/p'
}

cmd_set_paxos() {
  local seconds="${1:?usage: ceph.sh set-paxos SECONDS}" got
  [[ "$seconds" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "$WHO" "not a number of seconds: $seconds"
  # The mon's config database overrides ceph.conf and survives a mon restart.
  ceph_cli config set mon paxos_propose_interval "$seconds"
  # shellcheck disable=SC2016 # $1 and $2 are the child shell's arguments
  wait_until 10 bash -c '[[ "$("$1" get-paxos)" == "$2" ]]' _ "${BASH_SOURCE[0]}" \
    "$(printf '%.6f' "$seconds")" ||
    die "$WHO" "paxos_propose_interval did not take effect (mon reports $(cmd_get_paxos))"
  got="$(cmd_get_paxos)"
  say "$WHO" "paxos_propose_interval = $got on mon.$MON_ID"
}

main() {
  local cmd="${1:-}"
  shift || true
  case "$cmd" in
    up) cmd_up ;;
    status) cmd_status ;;
    down) cmd_down ;;
    stop-osd) cmd_stop_osd TERM ;;
    kill-osd) cmd_stop_osd KILL ;;
    start-osd) cmd_start_osd ;;
    set-paxos) cmd_set_paxos "$@" ;;
    get-paxos) cmd_get_paxos ;;
    *)
      echo "usage: lab/ceph.sh up|status|down|stop-osd|kill-osd|start-osd|set-paxos SECONDS|get-paxos" >&2
      exit 2
      ;;
  esac
}

main "$@"
