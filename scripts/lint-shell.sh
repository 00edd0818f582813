#!/usr/bin/env bash
# `npm run lint`'s shell half: shellcheck of the lab, guest and CI scripts (.shellcheckrc lets it
# follow lab/lib.sh). shellcheck is a Debian package like the lab's others, so lab/deps.sh
# installs it on first use.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v shellcheck >/dev/null || bash lab/deps.sh
exec shellcheck -x lab/*.sh lab/guest/* lab/debian/customize lab/debian/init-root lab/debian/writer \
  lab/debian/committer lab/debian/pg-check .ci/run scripts/*.sh deploy/libvirt-hook-qemu deploy/guest/fsfreeze-hook.d/*
