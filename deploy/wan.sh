#!/usr/bin/env bash
# wan.sh adds real network delay between the sites of the compose cluster
# with Linux netem, on top of (or instead of) kvd's simulated WAN
# (deploy/wan.env). It shapes each node's interface on the network between
# sites (causeway_wan), from the host, inside the node's network namespace.
#
#   sudo deploy/wan.sh on [DELAY [JITTER]]   (default 40ms 5ms)
#   sudo deploy/wan.sh off
#
# Needs root, the tc and nsenter commands, and a kernel with the netem
# qdisc (sch_netem); it says which is missing. Many CI and cloud kernels
# lack netem: then use kvd's simulated WAN, which the compose file turns
# on by default.
set -euo pipefail

NODES=(s1-n1 s1-n2 s1-n3 s2-n1 s2-n2 s2-n3 s3-n1 s3-n2 s3-n3)
WAN_SUBNET=172.28.100.

die() {
	echo "wan.sh: $*" >&2
	exit 1
}

[[ $(id -u) == 0 ]] || die "needs root (tc changes the nodes' interfaces): run it with sudo"
command -v tc >/dev/null || die "tc not found: apt-get install iproute2"
command -v nsenter >/dev/null || die "nsenter not found: apt-get install util-linux"

# iface PID prints the interface of the node's network namespace that
# holds its address on the network between sites.
iface() {
	nsenter -t "$1" -n ip -o -4 addr show | awk -v s="$WAN_SUBNET" 'index($4, s) == 1 { print $2; exit }'
}

each() {
	local n pid dev
	for n in "${NODES[@]}"; do
		pid=$(docker inspect -f '{{.State.Pid}}' "causeway-$n" 2>/dev/null) || die "container causeway-$n is not running (make compose-up)"
		dev=$(iface "$pid")
		[[ -n $dev ]] || die "causeway-$n has no address on ${WAN_SUBNET}0/24"
		"$@" "$n" "$pid" "$dev"
	done
}

on_node() {
	local n=$1 pid=$2 dev=$3
	if ! out=$(nsenter -t "$pid" -n tc qdisc replace dev "$dev" root netem delay "$DELAY" "$JITTER" 2>&1); then
		if grep -qi "no such file\|unknown qdisc\|not supported\|Specified qdisc kind is unknown" <<<"$out"; then
			die "this kernel has no netem qdisc (modprobe sch_netem failed or is not possible here): use the simulated WAN in deploy/wan.env instead"
		fi
		die "tc on causeway-$n ($dev): $out"
	fi
	echo "causeway-$n $dev: netem delay $DELAY $JITTER"
}

off_node() {
	local n=$1 pid=$2 dev=$3
	nsenter -t "$pid" -n tc qdisc del dev "$dev" root 2>/dev/null || true
	echo "causeway-$n $dev: no netem"
}

case ${1:-} in
on)
	DELAY=${2:-40ms} JITTER=${3:-5ms}
	modprobe sch_netem 2>/dev/null || true
	each on_node
	;;
off) each off_node ;;
*) die "usage: $0 on [DELAY [JITTER]] | off" ;;
esac
