#!/usr/bin/env bash
# Fetches Cluster API's KubeadmControlPlane CRD from its Go module (sigs.k8s.io/cluster-api, with the Go
# tool, checked against go.sum's database as every module download is) and keeps a copy in
# ${FASTPLANE_CLUSTER_API_CACHE:-$HOME/.cache/fastplane/cluster-api}/<version>/; prints that file's path.
#   bash scripts/install-cluster-api-crds.sh [VERSION]     default v1.14.2
#   npx fastplane install --kubeconfig FILE --kubeadm-control-plane-crd "$(bash scripts/install-cluster-api-crds.sh)"
# Idempotent: a version already in the cache is not fetched again. The CRD is never copied into this
# repository: it is Cluster API's, at the version asked for.
set -euo pipefail

CACHE="${FASTPLANE_CLUSTER_API_CACHE:-$HOME/.cache/fastplane/cluster-api}"
VERSION="${1:-v1.14.2}"
CRD=controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml

LOG_PREFIX=install-cluster-api-crds
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

case "$VERSION" in
  v1.1[1-9].*) ;; # KubeadmControlPlane v1beta2, the version fastplane reconciles, is stored from v1.11 on
  *) log "'$VERSION' is not a Cluster API release with KubeadmControlPlane v1beta2 (v1.11.0 or later, such as v1.14.2)"; exit 2 ;;
esac

dest="$CACHE/$VERSION/${CRD##*/}"
if [ -s "$dest" ]; then
  log "Cluster API $VERSION's KubeadmControlPlane CRD already at $dest"
  echo "$dest"
  exit 0
fi
if ! command -v go >/dev/null; then log "fetching Cluster API's module needs Go on PATH"; exit 1; fi
# Outside any module, so nothing here is changed; GOTOOLCHAIN=local: never fetch another Go.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && GOTOOLCHAIN=local GOFLAGS=-mod=mod quiet go mod download "sigs.k8s.io/cluster-api@$VERSION"); then
  log "go mod download sigs.k8s.io/cluster-api@$VERSION failed"
  exit 1
fi
dir=$(cd "$work" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/cluster-api@$VERSION" | awk -F'"' '$2 == "Dir" { print $4; exit }')
if [ ! -f "$dir/$CRD" ]; then log "sigs.k8s.io/cluster-api@$VERSION has no $CRD"; exit 1; fi
mkdir -p "$CACHE/$VERSION"
cp "$dir/$CRD" "$dest.tmp"
chmod 644 "$dest.tmp"
mv "$dest.tmp" "$dest"
log "Cluster API $VERSION's KubeadmControlPlane CRD at $dest"
echo "$dest"
