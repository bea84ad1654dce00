#!/usr/bin/env bash
# Builds the Kubernetes control-plane programs (kube-apiserver, kube-controller-manager, kube-scheduler)
# and kubectl from Kubernetes' own Go modules, one wrapper module per minor in tools/kubernetes/v1.N,
# into ${FASTPLANE_KUBERNETES_CACHE:-$HOME/.cache/fastplane/kubernetes}/<version>/usr/bin/.
#   bash scripts/install-kubernetes.sh [MINOR...]     e.g. 1.36; default: every wrapper's minor
# Idempotent: a version whose four programs are in the cache and report it is not built again.
# One `go build` per minor, so the four programs share one compilation of Kubernetes' packages; static
# (CGO off), without local paths (-trimpath), with the version stamped in so `--version` and the
# apiserver's /version report the release rather than v0.0.0-master. Extra build flags (say -p=1 on a
# busy machine) come through GOFLAGS.
set -euo pipefail

CACHE="${FASTPLANE_KUBERNETES_CACHE:-$HOME/.cache/fastplane/kubernetes}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PROGRAMS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

LOG_PREFIX=install-kubernetes
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

# The version a component reports: `kube-apiserver --version` prints "Kubernetes v1.36.3".
component_version() { "$1" --version 2>/dev/null | awk '$1 == "Kubernetes" { print $2; exit }'; }

# kubectl's client version: `kubectl version --client` prints "Client Version: v1.36.3".
kubectl_version() { "$1" version --client 2>/dev/null | awk '/^Client Version:/ { print $3; exit }'; }

# The k8s.io/kubernetes version a wrapper module requires.
pinned_version() { awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ { print $2; exit }' "$1/go.mod"; }

# True when every program in $1 reports version $2.
installed() {
  local dir=$1 version=$2 program
  for program in kube-apiserver kube-controller-manager kube-scheduler; do
    [ "$(component_version "$dir/$program")" = "$version" ] || return 1
  done
  [ "$(kubectl_version "$dir/kubectl")" = "$version" ]
}

build_minor() {
  local minor=$1 module="$ROOT/tools/kubernetes/v$1" version
  if [ ! -f "$module/go.mod" ]; then
    log "no wrapper module for Kubernetes $minor (tools/kubernetes/v$minor); there are: $(cd "$ROOT/tools/kubernetes" && echo v1.*)"
    exit 1
  fi
  version=$(pinned_version "$module")
  if [ -z "$version" ]; then log "$module/go.mod requires no k8s.io/kubernetes v1.N.P"; exit 1; fi
  local dest="$CACHE/$version/usr/bin"
  if installed "$dest" "$version"; then
    log "Kubernetes $version already installed at $dest (nothing to build)"
    return
  fi
  if ! command -v go >/dev/null; then log "building Kubernetes $version needs Go on PATH"; exit 1; fi
  mkdir -p "$CACHE"
  local work start
  work=$(mktemp -d "$CACHE/.build.XXXXXX")
  # shellcheck disable=SC2064 # expand $work now: it is local
  trap "rm -rf '$work'" EXIT
  mkdir -p "$work/usr/bin"
  local major=${version#v} minor_number
  minor_number=${major#*.}
  minor_number=${minor_number%%.*}
  major=${major%%.*}
  local ldflags="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor_number -X $pkg.gitTreeState=clean"
  done
  local packages=() program
  for program in "${PROGRAMS[@]}"; do packages+=("k8s.io/kubernetes/cmd/$program"); done
  log "building Kubernetes $version (${PROGRAMS[*]}) from tools/kubernetes/v$minor; this takes minutes"
  start=$SECONDS
  # GOTOOLCHAIN=local: build with the Go installed here, never fetch another toolchain; -mod=readonly:
  # go.mod and go.sum as committed, so the build is the one that was reviewed.
  if ! (cd "$module" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly ${GOFLAGS:-}" \
    quiet go build -trimpath -ldflags "${ldflags# }" -o "$work/usr/bin/" "${packages[@]}"); then
    log "building Kubernetes $version failed"
    exit 1
  fi
  if ! installed "$work/usr/bin" "$version"; then
    log "the programs built from tools/kubernetes/v$minor do not all report $version"
    exit 1
  fi
  rm -rf "${CACHE:?}/$version"
  mv "$work" "$CACHE/$version"
  trap - EXIT
  log "built Kubernetes $version at $dest in $((SECONDS - start))s"
}

minors=("$@")
if [ ${#minors[@]} -eq 0 ]; then
  for module in "$ROOT"/tools/kubernetes/v1.*; do minors+=("${module##*/v}"); done
fi
for minor in "${minors[@]}"; do
  case "$minor" in
    1.[0-9]*) build_minor "$minor" ;;
    *) log "'$minor' is not a Kubernetes minor such as 1.36"; exit 2 ;;
  esac
done
