#!/usr/bin/env bash
# A vmsnap worker for one of the lab's hypervisor hosts, in the foreground (SIGINT/SIGTERM stop it).
#
#   lab/worker.sh a|b|hv-a|hv-b [more `vmsnap worker` flags]
#
# It serves task queue vmsnap-<host id> (vmsnap-hv-a, vmsnap-hv-b) with that host's libvirtd
# (lab/libvirt.sh), the lab's Temporal and Ceph (restricted client.vmsnap key), state dir
# $LAB_DIR/workers/<host id> (kept until lab:down) and no metrics port. Its pid is in
# $LAB_DIR/workers/<host id>/worker.pid: lab:down stops a worker left running.
# Tests start their own workers (test/helpers/harness.ts startHarness({ labHost: 'b' }),
# WorkerProcess with labHostWorkerEnv(vars, 'b')).
set -euo pipefail
LAB_DIR="${LAB_DIR:-${VMSNAP_LAB_DIR:-}}" # tests name another lab with VMSNAP_LAB_DIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
WHO=worker

(($# >= 1)) || { sed -n '4,4p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2; exit 2; }
host="$(lab_host "$1")"
shift
[[ -f "$LAB_DIR/env" ]] || die "$WHO" "the lab is not up (no $LAB_DIR/env): npm run lab:up"
# shellcheck disable=SC1091
source "$LAB_DIR/env"
if [[ "$host" == a ]]; then
  uri="$LIBVIRT_DEFAULT_URI" status_dir="$VMSNAP_LIBVIRT_STATUS_DIR"
else
  uri="${LIBVIRT_B_URI:?the lab has no host B}" status_dir="$VMSNAP_LIBVIRT_B_STATUS_DIR"
fi
name="$(lab_host_name "$host")"
state="$LAB_DIR/workers/$name"
mkdir -p "$state"
echo $$ >"$state/worker.pid"
say "$WHO" "vmsnap worker for $name: task queue vmsnap-$name, $uri, state $state"
cd "$REPO"
VMSNAP_TEMPORAL_ADDRESS="$TEMPORAL_ADDRESS" VMSNAP_TEMPORAL_NAMESPACE="$TEMPORAL_NAMESPACE" \
  VMSNAP_LIBVIRT_URI="$uri" VMSNAP_LIBVIRT_STATUS_DIR="$status_dir" \
  VMSNAP_CEPH_CONF="$CEPH_CONF" VMSNAP_CEPH_ID="$CEPH_VMSNAP_ID" VMSNAP_CEPH_KEYRING="$CEPH_VMSNAP_KEYRING" \
  VMSNAP_RESTORE_KEY_FILE="${VMSNAP_RESTORE_KEY_FILE:?the lab has no restore key: npm run lab:up}" \
  VMSNAP_HOST="$name" VMSNAP_STATE_DIR="$state" VMSNAP_METRICS_PORT=0 \
  exec node "$REPO/bin/vmsnap.js" worker "$@"
