#!/usr/bin/env bash
# A network lab for the ssh provider: N hosts, each its own network namespace on one Linux bridge,
# each running its own sshd, with fastplane on the bridge side in the root namespace.
#
#   netlab.sh up N             create the lab (N hosts, 1..50)
#   netlab.sh down             remove every namespace, veth, the bridge, the sshds and the lab dir
#   netlab.sh manifest NAME    print a ControlPlane manifest (ssh provider) for the lab's hosts
#   netlab.sh status           the hosts as JSON (what the tests read)
#   netlab.sh partition A B    drop traffic both ways between host sets A and B (e.g. 1,2 3,4,5)
#   netlab.sh oneway A B       drop traffic from set A to set B only (B still reaches A)
#   netlab.sh loss PCT [A]     drop PCT% of the packets each host in A (default: all) receives
#   netlab.sh rate RATE [A]    limit what each host in A sends to RATE (tc tbf, e.g. 1mbit)
#   netlab.sh inrate RATE [A]  limit what each host in A receives to RATE (tc tbf on its bridge port,
#                              e.g. 100mbit), and only that: an asymmetric link (the bench's --asymmetric-lab)
#   netlab.sh link RATE [A]    limit what each host in A sends and what it receives, each to RATE: a
#                              host's own NIC, full duplex, as the bench's --host-bandwidth
#   netlab.sh heal             remove every fault
#
# A host set is a comma-separated list of host numbers (1..N) or `fp` for fastplane's side (the bridge
# address in the root namespace). Addresses come from 198.18.0.0/15 (benchmarking range), lab L uses
# 198.18.L.0/24: the bridge is .1, host i is .(10+i). No namespace has a route out of that subnet, and
# nothing outside the lab's own namespaces is ever a target. FPL_LAB (0..255, default 0) picks the
# lab, so tests and a demo can each have their own; every name starts with `fpl-L`.
#
# Each host's sshd runs in its own mount namespace with the host's private directory bind-mounted on
# /var/lib/fastplane, so the hosts look separate to the provider: its default baseDir is per host. Each
# host also has its own empty /root, so root's shell start-up files here never run on the hosts.
set -euo pipefail

LAB=${FPL_LAB:-0}
[[ $LAB =~ ^[0-9]+$ ]] && ((LAB <= 255)) || { echo "netlab: FPL_LAB must be 0..255, got $LAB" >&2; exit 2; }
DIR=${FPL_LAB_DIR:-/tmp/fpl-netlab-$LAB}
BRIDGE="fpl-br$LAB"
NET="198.18.$LAB"
BRIDGE_ADDR="$NET.1"
BASE_DIR=/var/lib/fastplane

die() { echo "netlab: $*" >&2; exit 2; }
ns() { echo "fpl-$LAB-h$1"; }
addr() { echo "$NET.$((10 + $1))"; }
count() { cat "$DIR/count" 2>/dev/null || echo 0; }

need_privileges() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, a bridge and nftables); run it as root"
  # In a container without CAP_SYS_ADMIN/CAP_NET_ADMIN this fails at once rather than hanging.
  timeout 5 unshare --net true 2>/dev/null || die "cannot create network namespaces here (no CAP_SYS_ADMIN/CAP_NET_ADMIN?)"
  for cmd in ip nft tc /usr/sbin/sshd ssh-keygen; do
    command -v "$cmd" >/dev/null || die "$cmd is missing; run scripts/install-test-tools.sh"
  done
}

# Hosts of a set: "1,3" -> "1 3", "fp" -> "fp", "" or "all" -> every host.
hosts_of() {
  local set=${1:-all} n
  n=$(count)
  if [ "$set" = all ]; then seq 1 "$n"; return; fi
  tr ',' '\n' <<<"$set" | while read -r h; do
    [ "$h" = fp ] || { [[ $h =~ ^[0-9]+$ ]] && ((h >= 1 && h <= n)); } || die "no host '$h' (hosts are 1..$n or fp)"
    echo "$h"
  done
}
addr_of() { if [ "$1" = fp ]; then echo "$BRIDGE_ADDR"; else addr "$1"; fi; }
addrs_of() { local out=() h; for h in $(hosts_of "$1"); do out+=("$(addr_of "$h")"); done; local IFS=,; echo "${out[*]}"; }

# Every fault lives in the host's own `fpl` table, so `heal` and `down` remove exactly what we added.
ensure_table() {
  ip netns exec "$(ns "$1")" nft -f - <<EOF
table inet fpl {
  chain input { type filter hook input priority 0; policy accept; }
  chain output { type filter hook output priority 0; policy accept; }
}
EOF
}
# Drops what each host of FROM sends to TO; fastplane's side (fp) is filtered in the hosts' namespaces,
# never in the root namespace.
drop_from_to() {
  local from=$1 to=$2 h t
  for h in $(hosts_of "$from"); do
    if [ "$h" = fp ]; then
      for t in $(hosts_of "$to"); do
        [ "$t" = fp ] && continue
        ensure_table "$t"
        ip netns exec "$(ns "$t")" nft add rule inet fpl input ip saddr "$BRIDGE_ADDR" drop
      done
    else
      ensure_table "$h"
      ip netns exec "$(ns "$h")" nft add rule inet fpl output ip daddr "{ $(addrs_of "$to") }" drop
    fi
  done
}

up() {
  local n=${1:-}
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 50)) || die "up needs a host count 1..50, got '${n}'"
  need_privileges
  [ -e "$DIR/count" ] && die "lab $LAB is already up ($DIR); run 'netlab.sh down' first"
  mkdir -p "$DIR" "$BASE_DIR" /run/sshd
  chmod 700 "$DIR"
  echo "$n" >"$DIR/count"
  ssh-keygen -q -t ed25519 -N '' -C fastplane-netlab -f "$DIR/id_ed25519"
  : >"$DIR/known_hosts"
  ip link add "$BRIDGE" type bridge
  ip addr add "$BRIDGE_ADDR/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  local i h
  for i in $(seq 1 "$n"); do
    h="$DIR/hosts/$i"
    mkdir -p "$h/base" "$h/home"
    chmod 700 "$h"
    ip netns add "$(ns "$i")"
    ip link add "fpl-$LAB-v$i" type veth peer name eth0 netns "$(ns "$i")"
    ip link set "fpl-$LAB-v$i" master "$BRIDGE" up
    ip netns exec "$(ns "$i")" ip addr add "$(addr "$i")/24" dev eth0
    ip netns exec "$(ns "$i")" ip link set eth0 up
    ip netns exec "$(ns "$i")" ip link set lo up
    ssh-keygen -q -t ed25519 -N '' -C "fpl-$LAB-h$i" -f "$h/ssh_host_ed25519_key"
    cp "$DIR/id_ed25519.pub" "$h/authorized_keys"
    cat >"$h/sshd_config" <<EOF
ListenAddress $(addr "$i"):22
HostKey $h/ssh_host_ed25519_key
AuthorizedKeysFile $h/authorized_keys
PidFile $h/sshd.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxSessions 64
MaxStartups 64
Subsystem sftp internal-sftp
EOF
    echo "$(addr "$i") $(cut -d' ' -f1,2 "$h/ssh_host_ed25519_key.pub")" >>"$DIR/known_hosts"
    # sshd in the host's network namespace and in a mount namespace of its own where the host's base
    # dir is /var/lib/fastplane; every command run over ssh inherits both.
    ip netns exec "$(ns "$i")" unshare --mount --propagation private \
      sh -c "mount --bind '$h/base' '$BASE_DIR' && mount --bind '$h/home' /root && exec /usr/sbin/sshd -D -e -f '$h/sshd_config'" \
      >"$h/sshd.log" 2>&1 &
    echo $! >"$h/pid"
  done
  for i in $(seq 1 "$n"); do
    local tries=0
    until ip netns exec "$(ns "$i")" bash -c "exec 3<>/dev/tcp/$(addr "$i")/22" 2>/dev/null; do
      tries=$((tries + 1))
      ((tries < 100)) || die "sshd of host $i did not start: $(tail -3 "$DIR/hosts/$i/sshd.log")"
      sleep 0.1
    done
  done
  status
}

down() {
  local i pid
  if [ -d "$DIR/hosts" ]; then
    for i in $(ls "$DIR/hosts"); do
      pid=$(cat "$DIR/hosts/$i/pid" 2>/dev/null || true)
      # Only our own sshd: its command line names this host's config.
      if [ -n "$pid" ] && grep -qs "$DIR/hosts/$i/sshd_config" "/proc/$pid/cmdline"; then kill "$pid" 2>/dev/null || true; fi
    done
  fi
  # Whatever was started over ssh in a host (etcd) dies with its namespace only if we kill it: do so,
  # by PID, for every process inside our namespaces.
  for netns in $(ip netns list | awk '{print $1}' | grep "^fpl-$LAB-h" || true); do
    for pid in $(ip netns pids "$netns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$netns" 2>/dev/null || true
  done
  for link in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^fpl-$LAB-v" || true); do ip link del "$link" 2>/dev/null || true; done
  ip link del "$BRIDGE" 2>/dev/null || true
  rm -rf "$DIR"
}

status() {
  local n i sep=''
  n=$(count)
  ((n > 0)) || die "lab $LAB is not up"
  printf '{"lab":%s,"dir":"%s","bridgeAddress":"%s","identityFile":"%s","knownHostsFile":"%s","hosts":[' \
    "$LAB" "$DIR" "$BRIDGE_ADDR" "$DIR/id_ed25519" "$DIR/known_hosts"
  for i in $(seq 1 "$n"); do
    printf '%s{"index":%s,"namespace":"%s","address":"%s","baseDir":"%s","sshdPid":%s}' "$sep" "$i" "$(ns "$i")" "$(addr "$i")" "$DIR/hosts/$i/base" "$(cat "$DIR/hosts/$i/pid")"
    sep=,
  done
  echo ']}'
}

manifest() {
  local name=${1:-}
  [ -n "$name" ] || die "manifest needs a control plane name"
  local n i zones=(a b c)
  n=$(count)
  ((n > 0)) || die "lab $LAB is not up; run 'netlab.sh up N' first"
  local replicas
  # As many replicas as the hosts allow with one spare for a rollout's surge machine: odd, <= n - 1.
  replicas=$(( n - 1 ))
  ((replicas % 2 == 1)) || replicas=$((replicas - 1))
  ((replicas >= 1)) || replicas=1
  cat <<EOF
apiVersion: fastplane.dev/v1alpha1
kind: ControlPlane
metadata: { name: $name }
spec:
  replicas: $replicas
  version: 3.4.23
  rollout: { maxSurge: $((n > replicas ? 1 : 0)) }
  provider:
    name: ssh
    identityFile: $DIR/id_ed25519
    knownHostsFile: $DIR/known_hosts
    failureDomains: [a, b, c]
    hosts:
EOF
  for i in $(seq 1 "$n"); do
    echo "      - { address: $(addr "$i"), user: root, failureDomain: ${zones[$(((i - 1) % 3))]} }"
  done
}

heal() {
  local i
  for i in $(seq 1 "$(count)"); do
    ip netns exec "$(ns "$i")" nft delete table inet fpl 2>/dev/null || true
    ip netns exec "$(ns "$i")" tc qdisc del dev eth0 root 2>/dev/null || true
    tc qdisc del dev "fpl-$LAB-v$i" root 2>/dev/null || true
  done
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) up "$@" ;;
  down) down ;;
  status) status ;;
  manifest) manifest "$@" ;;
  partition) [ $# -eq 2 ] || die "partition needs two host sets"; drop_from_to "$1" "$2"; drop_from_to "$2" "$1" ;;
  oneway) [ $# -eq 2 ] || die "oneway needs two host sets"; drop_from_to "$1" "$2" ;;
  loss)
    [[ ${1:-} =~ ^[0-9]+$ ]] && (($1 <= 100)) || die "loss needs a percentage 0..100"
    for h in $(hosts_of "${2:-all}"); do
      [ "$h" = fp ] && die "loss applies to hosts, not fp"
      ensure_table "$h"
      ip netns exec "$(ns "$h")" nft add rule inet fpl input numgen random mod 100 "<" "$1" drop
    done ;;
  rate)
    [ -n "${1:-}" ] || die "rate needs a rate such as 1mbit"
    for h in $(hosts_of "${2:-all}"); do
      [ "$h" = fp ] && die "rate applies to hosts, not fp"
      ip netns exec "$(ns "$h")" tc qdisc replace dev eth0 root tbf rate "$1" burst 32kbit latency 400ms
    done ;;
  inrate | link)
    [ -n "${1:-}" ] || die "$cmd needs a rate such as 100mbit"
    for h in $(hosts_of "${2:-all}"); do
      [ "$h" = fp ] && die "$cmd applies to hosts, not fp"
      # The bridge port's egress is the host's ingress. The burst covers a timer tick at 1gbit, so
      # the rate is reached; the latency bounds the queue.
      tc qdisc replace dev "fpl-$LAB-v$h" root tbf rate "$1" burst 4mbit latency 100ms
      # Egress on the host's own interface, inside its namespace, with the same shape: what it sends.
      if [ "$cmd" = link ]; then ip netns exec "$(ns "$h")" tc qdisc replace dev eth0 root tbf rate "$1" burst 4mbit latency 100ms; fi
    done ;;
  heal) heal ;;
  *) sed -n '2,24p' "$0" >&2; exit 2 ;;
esac
