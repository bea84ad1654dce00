#!/usr/bin/env bash
# Installs the etcd binaries fastplane's local provider runs; idempotent, for root on Debian bookworm.
#  - etcd 3.4.23: Debian bookworm's etcd-server/etcd-client, through the system apt (/usr/bin/etcd).
#  - etcd 3.5.x: Debian trixie's packages, unpacked with dpkg -x into the cache folder
#    ${FASTPLANE_ETCD_CACHE:-$HOME/.cache/fastplane/etcd}/<version>/usr/bin/etcd. apt runs with private
#    sources, lists and cache, so the system apt configuration never sees trixie.
# apt output is shown only on failure, with the mirror redacted: mirror host names must not end up in
# logs that get shared or committed.
set -euo pipefail

CACHE="${FASTPLANE_ETCD_CACHE:-$HOME/.cache/fastplane/etcd}"
MIRROR=""

LOG_PREFIX=install-etcd
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

etcd_version() { "$1" --version 2>/dev/null | awk '/^etcd Version:/ { print $3; exit }'; }

find_cached_35() {
  local bin
  for bin in "$CACHE"/3.5.*/usr/bin/etcd; do
    if [ -x "$bin" ] && [ -n "$(etcd_version "$bin")" ]; then echo "$bin"; return 0; fi
  done
  return 1
}

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

install_35() {
  local existing
  if existing=$(find_cached_35); then
    log "etcd $(etcd_version "$existing") already at $existing"
    return
  fi
  read_mirror
  mkdir -p "$CACHE"
  local work
  work=$(mktemp -d "$CACHE/.install.XXXXXX")
  # shellcheck disable=SC2064 # expand $work now: it is local
  trap "rm -rf '$work'" EXIT
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/root"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR trixie main" >"$work/sources.list"
  # Dir::Cache keeps apt's pkgcache.bin private, so the system cache is not rebuilt from trixie lists.
  local opts=(-o "Dir::Etc::sourcelist=$work/sources.list" -o "Dir::Etc::sourceparts=-"
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache")
  log "fetching the trixie package lists into a private apt folder"
  quiet apt-get "${opts[@]}" -o APT::Get::List-Cleanup=0 update
  log "downloading trixie etcd-server etcd-client"
  (cd "$work/debs" && quiet apt-get "${opts[@]}" download etcd-server etcd-client)
  local deb
  for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
  local version
  version=$(etcd_version "$work/root/usr/bin/etcd")
  case "$version" in
    3.5.*) ;;
    *) log "trixie's etcd-server is '${version:-unknown}', not 3.5.x"; exit 1 ;;
  esac
  rm -rf "${CACHE:?}/$version"
  mv "$work/root" "$CACHE/$version"
  log "installed etcd $version at $CACHE/$version/usr/bin/etcd"
}

install_34
install_35
