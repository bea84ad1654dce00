#!/usr/bin/env bash
# Installs the tools the tests need besides etcd; idempotent, for root on Debian bookworm.
#  - chromium: test/e2e/report.test.ts renders the timeline report headless (--dump-dom, --screenshot)
#    to check that the HTML really renders and to refresh docs/timeline.png.
# apt output is shown only on failure, with the mirror redacted (same rule as install-etcd.sh).
set -euo pipefail
LOG_PREFIX=install-test-tools
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

if command -v chromium >/dev/null 2>&1; then
  log "chromium already installed: $(chromium --version 2>/dev/null || echo unknown version)"
  exit 0
fi
log "installing chromium from the system apt sources"
export DEBIAN_FRONTEND=noninteractive
quiet apt-get update
quiet apt-get install -y --no-install-recommends chromium fonts-dejavu-core
log "installed $(chromium --version 2>/dev/null || echo chromium)"
