#!/usr/bin/env bash
# Installs the etcd binaries fastplane's local provider runs; idempotent, for root on Debian bookworm.
#  - etcd 3.4.23: Debian bookworm's etcd-server/etcd-client, through the system apt (/usr/bin/etcd).
#  - etcd 3.5.x: Debian trixie's (3.5.16) and testing's (3.5.30 or later) packages, unpacked with dpkg -x
#    into the cache folder ${FASTPLANE_ETCD_CACHE:-$HOME/.cache/fastplane/etcd}/<version>/usr/bin/etcd.
#    apt runs with private sources, lists and cache, so the system apt configuration never sees them.
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

install_34
# trixie: 3.5.16, the version the tests and figures have used; testing: 3.5.30 or later, whose add
# rule needs only a quorum of the resulting voters connected (docs/benchmarks.md).
install_from_suite trixie
install_from_suite testing
