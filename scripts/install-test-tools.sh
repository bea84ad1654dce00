#!/usr/bin/env bash
# Installs the tools the tests need besides etcd; idempotent, for root on Debian bookworm.
#  - chromium: test/e2e/report.test.ts renders the timeline report headless (--dump-dom, --screenshot)
#    to check that the HTML really renders and to refresh docs/timeline.png.
#  - prometheus: test/e2e/controller.test.ts scrapes `fastplane controller`'s /metrics with a real
#    Prometheus and queries its HTTP API.
#  - sshd, nft: scripts/netlab.sh, the network lab of the ssh provider's tests: one sshd per host in its
#    own network namespace, and network faults (partitions, packet loss) as nftables rules.
#  - faketime: test/e2e/lease-clock.test.ts runs a controller replica whose clock runs ahead of the
#    others', to show that a lease is judged on the store's clock only.
#  - haproxy: a Kubernetes control plane's endpoint (src/adapters/endpoint/), in front of the
#    apiservers, as kubeadm's HA guide builds it; test/e2e/kubernetes-control-plane.test.ts runs it.
#  - python3: scripts/run-tests.ts measures each test file's CPU through it where it cannot make a
#    cgroup (scripts/test-cpu.ts).
#  - Cluster API's KubeadmControlPlane CRD (scripts/install-cluster-api-crds.sh, from Cluster API's Go
#    module): test/e2e/management-kcp.test.ts installs it on a management cluster.
# Each tool is a command the tests run and the Debian packages that provide it; only missing ones are
# installed. apt output is shown only on failure, with the mirror redacted (same rule as install-etcd.sh).
set -euo pipefail
LOG_PREFIX=install-test-tools
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

# "command package..." per line.
TOOLS=(
  "chromium chromium fonts-dejavu-core"
  "prometheus prometheus"
  "sshd openssh-server"
  "nft nftables"
  "faketime faketime"
  "haproxy haproxy"
  "python3 python3"
)

missing=()
for entry in "${TOOLS[@]}"; do
  read -r cmd packages <<<"$entry"
  if command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ]; then
    log "$cmd already installed"
  else
    # shellcheck disable=SC2206
    missing+=($packages)
  fi
done
bash "$(dirname "$0")/install-cluster-api-crds.sh" >/dev/null
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi

log "installing ${missing[*]} from the system apt sources"
export DEBIAN_FRONTEND=noninteractive
quiet apt-get update
quiet apt-get install -y --no-install-recommends "${missing[@]}"
log "installed ${missing[*]}"
