#!/usr/bin/env bash
# npm run test:asan: the Ceph binding tests (test/unit/ceph-*, test/integration/ceph-*, including
# the forced-failure tests in ceph-handle-lifetime) against an AddressSanitizer + UBSan build of
# the addon (build-asan/, scripts/build-addon.mjs --asan). Needs the lab's Ceph (npm run lab:up).
# Fails on a failing test and on any sanitizer report, from any process the tests start.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started="$(date +%s)"

node scripts/build-addon.mjs --asan
addon="$PWD/build-asan/build/Release/vmsnap_rbd.node"
# Node itself is not instrumented, so the ASan runtime must be loaded first, before libc's malloc.
libasan="$(gcc -print-file-name=libasan.so)"
[[ -f "$libasan" ]] || { echo "test:asan: gcc's libasan.so not found (apt: gcc)" >&2; exit 1; }

# Tests find Ceph through CEPH_CONF when the lab runs without Temporal (its env file is partial).
env_file="${VMSNAP_LAB_ENV:-$PWD/.lab/env}"
if [[ -z "${CEPH_CONF:-}" && -f "$env_file" ]]; then
  CEPH_CONF="$(source "$env_file" && echo "${CEPH_CONF:-}")"
  export CEPH_CONF
fi

logs="$(mktemp -d "${TMPDIR:-/tmp}/vmsnap-asan.XXXXXX")"
# Reports go to files (one per process) so none is lost in a child's stderr; the run checks them.
# detect_leaks=0: LeakSanitizer at exit lists what V8, Node and librados deliberately never free
# at process exit; the addon's own resources are checked exactly instead (addonHandleCounts in
# ceph-handle-lifetime, RSS growth in ceph-leak). No other check is relaxed.
export ASAN_OPTIONS="log_path=$logs/asan:halt_on_error=1:abort_on_error=1:detect_leaks=0"
export UBSAN_OPTIONS="log_path=$logs/ubsan:halt_on_error=1:print_stacktrace=1"
export VMSNAP_RBD_ADDON="$addon"

rc=0
# libstdc++ right after the ASan runtime: the tests' children inherit LD_PRELOAD, and in a program
# that loads libstdc++ only later (the python `ceph` CLI) ASan's __cxa_throw interceptor finds no
# real symbol and aborts ("CHECK failed: real___cxa_throw != 0") before the command runs.
libstdcxx="$(gcc -print-file-name=libstdc++.so.6)"
# ceph-leak is not run here: it bounds RSS growth, and ASan's allocator quarantines freed memory by
# design. Timing bounds in the files that run scale by VMSNAP_ASAN_SLOWDOWN.
export VMSNAP_ASAN_SLOWDOWN=3
LD_PRELOAD="$libasan:$libstdcxx${LD_PRELOAD:+:$LD_PRELOAD}" \
  npx vitest run test/unit/ceph- test/integration/ceph- --exclude test/integration/ceph-leak.test.ts || rc=$?

if compgen -G "$logs/*" >/dev/null; then
  for f in "$logs"/*; do
    printf '\n==== %s\n' "$f" >&2
    cat "$f" >&2
  done
  echo "test:asan: sanitizer report(s) above (${logs})" >&2
  ((rc != 0)) || rc=1
else
  echo "test:asan: no sanitizer report"
  rm -rf "$logs"
fi
echo "test:asan: took $(($(date +%s) - started)) s (exit $rc)"
exit "$rc"
