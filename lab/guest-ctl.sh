#!/usr/bin/env bash
# Host side of a lab guest's control channel (no guest agent needed). See support/lab/guest-ctl.ts.
#
#   lab/guest-ctl.sh GUEST ping|status
#   lab/guest-ctl.sh GUEST hang-agent | resume-agent      kill -STOP / -CONT qemu-ga in the guest
#   lab/guest-ctl.sh GUEST slow-freeze SECONDS             fsfreeze hook sleeps SECONDS on freeze (0: off)
#   lab/guest-ctl.sh GUEST probe-start | probe-stop        start/stop the freeze probe writers
#
# Prints "ok <detail>" (exit 0), "err <detail>" (exit 1), or why there was no reply (exit 2).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(($# >= 2)) || { sed -n '4,8p' "${BASH_SOURCE[0]}" >&2; exit 2; }
guest="$1"
shift
[[ "$guest" =~ ^[A-Za-z0-9_.-]+$ ]] || die guest-ctl "bad guest name: $guest"
socket="${VMSNAP_PROBE_DIR:-$LAB_DIR/guests}/$guest/ctl.sock"
[[ -S "$socket" ]] || die guest-ctl "no control socket $socket (is $guest running?)"
cd "$REPO"
exec node --import tsx "$REPO/support/lab/guest-ctl.ts" "$socket" "$@"
