#!/usr/bin/env bash
# Installs the etcd binaries fastplane's local provider runs; idempotent, for root on Debian bookworm.
#  - etcd 3.4.23: Debian bookworm's etcd-server/etcd-client, through the system apt (/usr/bin/etcd).
#  - etcd 3.5.x: Debian trixie's (3.5.16) and testing's (3.5.30 or later) packages, unpacked with dpkg -x
#    into the cache folder ${FASTPLANE_ETCD_CACHE:-$HOME/.cache/fastplane/etcd}/<version>/usr/bin/etcd.
#    apt runs with private sources, lists and cache, so the system apt configuration never sees them.
#  - etcd 3.5 (newest patch), 3.6 and 3.7: built with Go from etcd's own modules, pinned by the wrapper
#    modules in tools/etcd/v3.N, into the same cache layout (<version>/usr/bin/{etcd,etcdctl,etcdutl}).
# apt output is shown only on failure, with the mirror redacted: mirror host names must not end up in
# logs that get shared or committed.
set -euo pipefail

CACHE="${FASTPLANE_ETCD_CACHE:-$HOME/.cache/fastplane/etcd}"
MIRROR=""

LOG_PREFIX=install-etcd
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

etcd_version() { "$1" --version 2>/dev/null | awk '/^etcd Version:/ { print $3; exit }'; }

# The first URIs: line of the system's deb822 sources (bookworm's default), else the first deb line.
read_mirror() {
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    MIRROR=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$MIRROR" ] && [ -f /etc/apt/sources.list ]; then
    MIRROR=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }' /etc/apt/sources.list)
  fi
  if [ -z "$MIRROR" ]; then log "no Debian mirror found in /etc/apt sources"; exit 1; fi
}

install_34() {
  if [ -x /usr/bin/etcd ]; then
    log "etcd $(etcd_version /usr/bin/etcd) already at /usr/bin/etcd"
    return
  fi
  log "installing etcd-server etcd-client from the system apt sources"
  export DEBIAN_FRONTEND=noninteractive
  quiet apt-get update
  quiet apt-get install -y etcd-server etcd-client
  log "installed etcd $(etcd_version /usr/bin/etcd) at /usr/bin/etcd"
}

# Debian's package version (3.5.30-1, 1:3.5.30-1+b1) without epoch and revision: etcd's own version.
upstream_version() { sed -E 's/^[0-9]+://; s/-[^-]*$//; s/\+.*$//'; }

# Installs etcd-server/etcd-client from a Debian suite into $CACHE/<version>, the version read from the
# suite's package index (never a hard-coded file name). A marker per suite remembers what it gave, so a
# second run needs no network; a version already in the cache (from another suite) is not fetched again.
install_from_suite() {
  local suite=$1 marker="$CACHE/.suite-$1" version
  if [ -f "$marker" ]; then
    version=$(cat "$marker")
    if [ -n "$(etcd_version "$CACHE/$version/usr/bin/etcd")" ]; then
      log "etcd $version from Debian $suite already at $CACHE/$version/usr/bin/etcd"
      return
    fi
  fi
  read_mirror
  mkdir -p "$CACHE"
  local work
  work=$(mktemp -d "$CACHE/.install.XXXXXX")
  # shellcheck disable=SC2064 # expand $work now: it is local
  trap "rm -rf '$work'" EXIT
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/root"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $suite main" >"$work/sources.list"
  # Dir::Cache keeps apt's pkgcache.bin private, so the system cache is not rebuilt from these lists.
  local opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-"
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache")
  log "fetching the $suite package lists into a private apt folder"
  quiet apt-get "${opts[@]}" -o APT::Get::List-Cleanup=0 update
  version=$(apt-cache "${opts[@]}" show etcd-server 2>/dev/null | awk '/^Version:/ && v == "" { v = $2 } END { print v }' | upstream_version)
  case "$version" in
    3.5.*) ;;
    *) log "Debian $suite's etcd-server is '${version:-missing}', not 3.5.x"; exit 1 ;;
  esac
  if [ -n "$(etcd_version "$CACHE/$version/usr/bin/etcd")" ]; then
    log "etcd $version (Debian $suite) already at $CACHE/$version/usr/bin/etcd"
  else
    log "downloading $suite etcd-server etcd-client ($version)"
    (cd "$work/debs" && quiet apt-get "${opts[@]}" download etcd-server etcd-client)
    local deb
    for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
    local reported
    reported=$(etcd_version "$work/root/usr/bin/etcd")
    if [ "$reported" != "$version" ]; then log "the $suite etcd binary reports '${reported:-nothing}', not $version"; exit 1; fi
    rm -rf "${CACHE:?}/$version"
    mv "$work/root" "$CACHE/$version"
    log "installed etcd $version at $CACHE/$version/usr/bin/etcd"
  fi
  echo "$version" >"$marker"
  rm -rf "$work"
  trap - EXIT
}

# The etcd version a wrapper module pins: its go.etcd.io/etcd/server/v3 requirement, without the v.
pinned_version() { awk '$1 == "go.etcd.io/etcd/server/v3" { sub(/^v/, "", $2); print $2; exit }' "$1/go.mod"; }

# Builds etcd, etcdctl and etcdutl from one wrapper module in a single `go build`, so the three share
# one compilation of etcd's packages; static (CGO off) and without local paths (-trimpath).
build_from_module() {
  local module=$1 version
  version=$(pinned_version "$module")
  if [ -z "$version" ]; then log "$module/go.mod pins no go.etcd.io/etcd/server/v3"; exit 1; fi
  local dest="$CACHE/$version/usr/bin"
  if [ "$(etcd_version "$dest/etcd")" = "$version" ] && [ -x "$dest/etcdctl" ] && [ -x "$dest/etcdutl" ]; then
    log "etcd $version (built from Go modules) already at $dest/etcd"
    return
  fi
  if ! command -v go >/dev/null; then log "building etcd $version needs Go on PATH"; exit 1; fi
  mkdir -p "$CACHE"
  local work start
  work=$(mktemp -d "$CACHE/.build.XXXXXX")
  # shellcheck disable=SC2064 # expand $work now: it is local
  trap "rm -rf '$work'" EXIT
  mkdir -p "$work/usr/bin"
  log "building etcd $version from $module"
  start=$SECONDS
  # GOTOOLCHAIN=local: build with the Go installed here, never fetch another toolchain; -mod=readonly:
  # go.sum as committed, so the build is the one that was reviewed.
  (cd "$module" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
    quiet go build -trimpath -o "$work/usr/bin/" ./etcd ./etcdctl ./etcdutl)
  local reported
  reported=$(etcd_version "$work/usr/bin/etcd")
  if [ "$reported" != "$version" ]; then log "the etcd built from $module reports '${reported:-nothing}', not $version"; exit 1; fi
  rm -rf "${CACHE:?}/$version"
  mv "$work" "$CACHE/$version"
  trap - EXIT
  log "built etcd $version at $dest/etcd in $((SECONDS - start))s"
}

install_34
# trixie: 3.5.16, the version the tests and figures have used; testing: 3.5.30 or later, whose add
# rule needs only a quorum of the resulting voters connected (docs/benchmarks.md).
install_from_suite trixie
install_from_suite testing
for module in "$(cd "$(dirname "$0")/.." && pwd)"/tools/etcd/v3.*; do build_from_module "$module"; done
