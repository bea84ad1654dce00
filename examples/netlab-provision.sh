#!/usr/bin/env bash
# A provisioning hook for fastplane's ssh provider (spec.provider.provision), against the network lab
# (scripts/netlab.sh): "creating" a host hands out a free lab host after a delay that stands in for a
# cloud API, "deleting" it gives the host back.
#
#   provision: { create: "bash examples/netlab-provision.sh create", delete: "bash examples/netlab-provision.sh delete", timeout: 1m }
#
# The contract, the same for any hook: the request is JSON on stdin,
#   {"cluster":"demo","machine":"demo-3","failureDomain":"b","version":"3.4.23"}   (delete adds "address")
# create prints {"address":"198.18.0.13","port":22,"user":"root"} on stdout and exits 0; anything on
# stderr is what fastplane shows when the hook fails (non-zero exit, or stdout that is not that JSON).
# Environment: FPL_LAB (the lab, default 0), HOOK_DELAY ("min-max" seconds, default 2-6).
set -euo pipefail
LAB=${FPL_LAB:-0}
DIR=${FPL_LAB_DIR:-/tmp/fpl-netlab-$LAB}
request=$(cat)
field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p" <<<"$request"; }
owner="$(field cluster)/$(field machine)"
[ -d "$DIR/hosts" ] || { echo "lab $LAB is not up ($DIR): run scripts/netlab.sh up N" >&2; exit 1; }
mkdir -p "$DIR/taken"

case "${1:-}" in
  create)
    IFS=- read -r lo hi <<<"${HOOK_DELAY:-2-6}"
    sleep "$((lo + RANDOM % (hi - lo + 1)))"
    # The same machine asking again (fastplane retried after a crash) gets the host it has.
    for taken in "$DIR"/taken/*; do
      if [ -f "$taken/owner" ] && [ "$(cat "$taken/owner")" = "$owner" ]; then
        address=$(basename "$taken")
        printf '{"address":"%s","port":22,"user":"root"}\n' "$address"
        exit 0
      fi
    done
    for i in $(ls "$DIR/hosts" | sort -n); do
      address="198.18.$LAB.$((10 + i))"
      # mkdir is atomic: of hooks running at once, one gets each host.
      if mkdir "$DIR/taken/$address" 2>/dev/null; then
        echo "$owner" >"$DIR/taken/$address/owner"
        printf '{"address":"%s","port":22,"user":"root"}\n' "$address"
        exit 0
      fi
    done
    echo "no free host in lab $LAB: all $(ls "$DIR/hosts" | wc -l) are taken" >&2
    exit 1 ;;
  delete)
    address=$(field address)
    if [ -n "$address" ] && [ "$(cat "$DIR/taken/$address/owner" 2>/dev/null)" = "$owner" ]; then rm -rf "${DIR:?}/taken/$address"; fi ;;
  *) echo "usage: netlab-provision.sh create|delete (request JSON on stdin)" >&2; exit 2 ;;
esac
