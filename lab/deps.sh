#!/usr/bin/env bash
# Install what the lab needs on a fresh Debian 12 machine, and nothing when it is all there:
#   - Debian packages (apt-get update runs only when one is missing);
#   - the Temporal CLI (dev server + Web UI), built once with `go install` and cached outside the
#     repository at ~/.cache/vmsnap/temporal-v1.5.1 (v1.5.1 is the newest release whose go.mod has
#     no `replace`, which `go install mod@version` refuses; it needs Go >= 1.25).
# Prints what it did. Environment: TEMPORAL_BIN overrides the cache path.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WHO=deps
TEMPORAL_BIN="${TEMPORAL_BIN:-$TEMPORAL_BIN_DEFAULT}"
TEMPORAL_MODULE="github.com/temporalio/cli/cmd/temporal@$TEMPORAL_VERSION"

PACKAGES=(
  # Ceph: mon, OSD, the ceph/rbd CLIs, librbd for the native addon
  ceph-mon ceph-osd ceph-common librbd-dev librados-dev
  # the DR site (lab/dr.sh): Ceph's mirroring daemon, pulling the lab's vms pool into a second cluster
  rbd-mirror
  # libvirt + QEMU (TCG) with the RBD block driver
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-dev
  qemu-system-x86 qemu-block-extra qemu-utils
  # guest image: busybox initramfs, ext4 tools
  busybox-static e2fsprogs cpio xz-utils
  # bench: the freeze-window plot, SVG → PNG
  librsvg2-bin
  # the lab scripts: uuidgen, pgrep/ps, fuser, ss, setsid/taskset, timeout/numfmt, curl
  uuid-runtime procps psmisc iproute2 util-linux coreutils curl ca-certificates
  # node-gyp for the librbd addon (headers from the node package, never downloaded)
  python3 make g++ pkg-config
  # the Web UI browser test (test/integration/web-ui.test.ts): Debian's headless Chromium, driven
  # by playwright-core with executablePath /usr/bin/chromium (Playwright never downloads a browser)
  chromium
  # the Temporal mTLS test (test/integration/temporal-tls.test.ts): its CA and certificates
  openssl
  # npm run lint: the lab, guest and CI shell scripts
  shellcheck
  # test/unit/cli-completion.test.ts runs `vmsnap completion zsh` in a real zsh (bash is always there)
  zsh
  # test/unit/service-unit.test.ts: systemd-analyze verify on deploy/vmsnap-worker.service
  systemd
  # test/integration/release-install.test.ts: the clean Debian 12 root the release installs into
  mmdebstrap
  # deploy/prometheus/: promtool checks and unit-tests the shipped rules
  # (test/unit/prometheus-rules.test.ts); test/integration/prometheus-alerts.test.ts runs a private
  # Prometheus with them against a lab worker
  prometheus
)

missing_packages() {
  local -A installed=()
  local pkg status
  while read -r pkg status; do
    [[ "$status" == installed ]] && installed[${pkg%%:*}]=1
  done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)
  for pkg in "${PACKAGES[@]}"; do
    [[ -n "${installed[$pkg]:-}" ]] || printf '%s\n' "$pkg"
  done
}

install_packages() {
  local t missing
  t="$(now)"
  mapfile -t missing < <(missing_packages)
  if ((${#missing[@]} == 0)); then
    say "$WHO" "apt: all ${#PACKAGES[@]} packages present"
    return 0
  fi
  local sudo=()
  ((EUID == 0)) || sudo=(sudo)
  say "$WHO" "apt: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
  say "$WHO" "apt: installed ${#missing[@]} packages in $(elapsed "$t") s"
  quiet_packaged_daemons "${missing[@]}"
}

# Debian's prometheus package starts its own daemon on :9090 at install (its init script where
# policy-rc.d allows it, or its systemd unit) and enables it at boot. vmsnap runs only private
# Prometheus processes on free ports, so that daemon would be a stray service on a port others may
# want: stopped and disabled here, only when this run installed the package (a Prometheus someone
# runs on purpose is not ours to stop).
quiet_packaged_daemons() {
  local pkg
  local sudo=()
  ((EUID == 0)) || sudo=(sudo)
  for pkg in "$@"; do
    [[ "$pkg" == prometheus ]] || continue
    if [[ -d /run/systemd/system ]]; then
      "${sudo[@]}" systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    else
      "${sudo[@]}" /etc/init.d/prometheus stop >/dev/null 2>&1 || true
      # Works without systemd running: removes the unit's link and the SysV rc links.
      "${sudo[@]}" systemctl disable prometheus.service >/dev/null 2>&1 ||
        "${sudo[@]}" update-rc.d prometheus disable >/dev/null 2>&1 || true
    fi
    say "$WHO" "apt: the packaged prometheus service is stopped and disabled (vmsnap runs its own)"
  done
}

find_go() {
  local go
  for go in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
    [[ -n "$go" && -x "$go" ]] && { echo "$go"; return 0; }
  done
  return 1
}

build_temporal() {
  local t go gobin version
  if [[ -x "$TEMPORAL_BIN" ]]; then
    say "$WHO" "temporal: cached at $TEMPORAL_BIN"
    return 0
  fi
  go="$(find_go)" || die "$WHO" "the Temporal CLI must be built with Go >= 1.25 and no go was found"
  version="$("$go" env GOVERSION)"
  say "$WHO" "temporal: building $TEMPORAL_MODULE with $go ($version); takes a few minutes"
  t="$(now)"
  gobin="$(mktemp -d)"
  CGO_ENABLED=0 GOBIN="$gobin" "$go" install "$TEMPORAL_MODULE"
  mkdir -p "$(dirname "$TEMPORAL_BIN")"
  mv -f "$gobin/temporal" "$TEMPORAL_BIN.tmp.$$"
  mv -f "$TEMPORAL_BIN.tmp.$$" "$TEMPORAL_BIN"
  rmdir "$gobin"
  say "$WHO" "temporal: built in $(elapsed "$t") s, cached at $TEMPORAL_BIN"
}

install_packages
build_temporal
