#!/usr/bin/env bash
# geo.sh runs three Causeway sites (s1, s2, s3) on loopback, with simulated
# WAN delay between them, for development and demos.
#
#   scripts/geo.sh up       build bin/kvd, start every node, wait until ready
#                           (with some running: restart the missing ones)
#   scripts/geo.sh down     stop them (SIGTERM, then wait)
#   scripts/geo.sh status   show which nodes run
#
# Site sI (I = 1, 2, 3) uses ports from B = 7379 + 1000*(I-1): 7379, 8379,
# 9379 (GEO_PORT_BASE replaces 7379). Node nK of a site listens on
# B + 10*(K-1) (client), +1 (http), +2 (peer), +3 (gossip). s1's n1 creates
# the cluster; the first node of s2 and s3 joins it (--join-cluster); the
# other nodes of a site join their site's n1 (--join). Data in data/geo/sI/nK, logs in data/geo/sI-nK.log. The data
# survives down/up; delete data/geo to start afresh.
#
# Environment: GEO_NODES (nodes per site, 1 or more, default 1), GEO_WAN
# (the --simulate-wan spec, default '*=40ms±5ms' one way; empty: none),
# GEO_DIR (data and logs, default data/geo), GEO_READY_TIMEOUT (seconds,
# default 90), GEO_STOP_TIMEOUT (seconds, default 30), GEO_PORT_BASE (s1's
# first port, default 7379), GEO_NO_BUILD=1 to skip building.
#
# The simulated WAN and --debug-faults (kvctl debug partition) are test and
# demo features: see docs/operations.md.
set -euo pipefail

cd "$(dirname "$0")/.."

NAME=geo
# shellcheck source=scripts/nodes.sh
source scripts/nodes.sh

DIR=${GEO_DIR:-data/geo}
KVD=bin/kvd
KVCTL=bin/kvctl
SITES=(s1 s2 s3)
NODES_PER_SITE=${GEO_NODES:-1}
PORT_BASE=${GEO_PORT_BASE:-7379}
WAN=${GEO_WAN-*=40ms±5ms}
READY_TIMEOUT=${GEO_READY_TIMEOUT:-90}
STOP_TIMEOUT=${GEO_STOP_TIMEOUT:-30}

die() {
	echo "geo: $*" >&2
	exit 1
}

[[ $NODES_PER_SITE =~ ^[1-9]$ ]] || die "GEO_NODES=$NODES_PER_SITE: want 1 to 9"
[[ $PORT_BASE =~ ^[1-9][0-9]*$ ]] && ((PORT_BASE + 2100 < 65536)) || die "GEO_PORT_BASE=$PORT_BASE: want a port below 63436"

NODES=()
for s in "${SITES[@]}"; do
	for ((k = 1; k <= NODES_PER_SITE; k++)); do NODES+=("$s-n$k"); done
done

# base SITE-NODE prints the node's first port.
base() {
	local site=${1%-*} node=${1#*-}
	local i=${site#s} k=${node#n}
	echo $((PORT_BASE + 1000 * (i - 1) + 10 * (k - 1)))
}

client_addr() { echo "127.0.0.1:$(base "$1")"; }
http_addr() { echo "127.0.0.1:$(($(base "$1") + 1))"; }
peer_addr() { echo "127.0.0.1:$(($(base "$1") + 2))"; }
gossip_addr() { echo "127.0.0.1:$(($(base "$1") + 3))"; }

site_endpoints() {
	local eps=() k
	for ((k = 1; k <= NODES_PER_SITE; k++)); do eps+=("$(client_addr "$1-n$k")"); done
	(IFS=,; echo "${eps[*]}")
}

pid_of() {
	local f="$DIR/$1.pid" pid
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && ps -p "$pid" -o args= 2>/dev/null | grep -q -- "--data-dir $DIR/${1%-*}/${1#*-} "; then
		echo "$pid"
		return 0
	fi
	rm -f "$f"
	return 1
}

start_node() {
	local n=$1 site=${1%-*} node=${1#*-} b
	b=$(base "$n")
	local args=(--site "$site" --node-id "$node" --data-dir "$DIR/$site/$node"
		--client-addr "127.0.0.1:$b" --http-addr "127.0.0.1:$((b + 1))"
		--peer-addr "127.0.0.1:$((b + 2))" --gossip-addr "127.0.0.1:$((b + 3))" --debug-faults)
	if [[ -n $WAN ]]; then args+=(--simulate-wan "$WAN"); fi
	if [[ $node != n1 ]]; then
		args+=(--join "$(gossip_addr "$site-n1")")
	elif [[ $site != s1 ]]; then
		args+=(--join-cluster "$(peer_addr s1-n1)")
	fi
	mkdir -p "$DIR/$site/$node"
	echo "=== $(date '+%F %T') starting $n: $KVD ${args[*]}" >>"$DIR/$n.log"
	if command -v setsid >/dev/null; then
		nohup setsid "$KVD" "${args[@]}" >>"$DIR/$n.log" 2>&1 </dev/null &
	else
		nohup "$KVD" "${args[@]}" >>"$DIR/$n.log" 2>&1 </dev/null &
	fi
	echo $! >"$DIR/$n.pid"
}

# all_sites succeeds once a node of every site lists the three sites.
all_sites() {
	local s doc
	for s in "${SITES[@]}"; do
		doc=$("$KVCTL" --endpoints "$(client_addr "$s-n1")" --session-file none --timeout 5s -o json cluster sites 2>/dev/null) || return 1
		for t in "${SITES[@]}"; do grep -q "\"name\": \"$t\"" <<<"$doc" || return 1; done
	done
}

cmd_up() {
	local n running=() b p
	for n in "${NODES[@]}"; do
		if pid_of "$n" >/dev/null; then running+=("$n"); fi
	done
	if ((${#running[@]} == ${#NODES[@]})); then
		echo "geo: already running"
		cmd_status
		return 0
	fi
	if ((${#running[@]} > 0)); then
		# Some nodes run (the others crashed or were killed): start the
		# missing ones on their data, as they were started, and wait
		# until they are ready.
		local missing=()
		for n in "${NODES[@]}"; do
			[[ " ${running[*]} " == *" $n "* ]] || missing+=("$n")
		done
		[[ -x $KVD ]] || die "$KVD not found; run make build"
		printf '%s running; restarting %s' "${running[*]}" "${missing[*]}"
		deadline=$((SECONDS + READY_TIMEOUT))
		# Every missing node's ports first: a busy one stops the restart
		# before any node starts.
		for n in "${missing[@]}"; do
			b=$(base "$n")
			for p in "$b" $((b + 1)) $((b + 2)) $((b + 3)); do
				port_busy "$p" && die "port $p (for $n) is in use"
			done
		done
		for n in "${missing[@]}"; do start_node "$n"; done
		for n in "${missing[@]}"; do WAIT_FAIL=die wait_http "$n" /readyz; done
		echo " ready"
		cmd_status
		return 0
	fi
	for n in "${NODES[@]}"; do
		b=$(base "$n")
		for p in "$b" $((b + 1)) $((b + 2)) $((b + 3)); do
			port_busy "$p" && die "port $p (for $n) is in use; is another kvd running (make run, make cluster)?"
		done
	done
	if [[ ${GEO_NO_BUILD:-} != 1 ]]; then
		"${MAKE:-make}" --no-print-directory build
	fi
	[[ -x $KVD ]] || die "$KVD not found; run make build"
	mkdir -p "$DIR"
	trap 'fail_up "interrupted"' INT TERM
	deadline=$((SECONDS + READY_TIMEOUT))
	for s in "${SITES[@]}"; do
		printf 'starting %s: n1' "$s"
		if [[ -n $(ls -A "$DIR/$s/n1" 2>/dev/null) ]]; then
			# On its data, n1 is ready only once a quorum of its site's
			# nodes runs: start the others as soon as its gossip listens.
			start_node "$s-n1"
			wait_http "$s-n1" /healthz
		else
			start_node "$s-n1"
			wait_http "$s-n1" /readyz
		fi
		for ((k = 2; k <= NODES_PER_SITE; k++)); do
			printf ' n%d' "$k"
			start_node "$s-n$k"
		done
		echo
	done
	printf 'waiting for /readyz'
	for n in "${NODES[@]}"; do
		wait_http "$n" /readyz
		printf ' %s' "$n"
	done
	echo
	printf 'waiting until every site knows the three sites'
	until all_sites; do
		((SECONDS < deadline)) || fail_up "the sites did not learn each other within ${READY_TIMEOUT}s"
		printf .
		sleep 1
	done
	trap - INT TERM
	echo " ready"
	echo
	cmd_status
	echo
	"$KVCTL" --endpoints "$(client_addr s1-n1)" --session-file none cluster sites || true
	echo
	echo "Simulated WAN: ${WAN:-off} (one way, between sites; GEO_WAN to change)"
	echo "Try:"
	echo "  bin/kvctl --endpoints $(site_endpoints s1) put greeting hello"
	echo "  bin/kvctl --endpoints $(site_endpoints s3) get greeting"
	echo "  bin/kvctl --endpoints $(site_endpoints s1) cluster sites"
	echo "  bin/kvctl --endpoints $(site_endpoints s2) debug partition --site s1   # then: debug heal"
	if [[ $DIR == data/geo && $PORT_BASE == 7379 ]]; then
		echo "Stop with: make geo-down (logs in $DIR/SITE-NODE.log)"
	else
		# make geo-down looks in data/geo: name this run's directory.
		echo "Stop with: GEO_DIR=$DIR GEO_PORT_BASE=$PORT_BASE scripts/geo.sh down (logs in $DIR/SITE-NODE.log)"
	fi
}

cmd_status() {
	local n pid state ready up=0
	printf '%-6s %-8s %-8s %-16s %-16s %s\n' NODE STATE PID CLIENT HTTP READY
	for n in "${NODES[@]}"; do
		if pid=$(pid_of "$n"); then
			up=$((up + 1))
			state=running
			ready=$([[ $(http_status "http://$(http_addr "$n")/readyz") == 200 ]] && echo yes || echo no)
		else
			pid=- state=stopped ready=-
		fi
		printf '%-6s %-8s %-8s %-16s %-16s %s\n' "$n" "$state" "$pid" "$(client_addr "$n")" "$(http_addr "$n")" "$ready"
	done
	((up > 0)) || return 3
}

case ${1:-} in
up) cmd_up ;;
down)
	# Stop every node that has a pid file, whatever GEO_NODES says now
	# (the site may have been started with more nodes than the default).
	for f in "$DIR"/s*-n*.pid; do
		[[ -e $f ]] || continue
		n=$(basename "$f" .pid)
		[[ " ${NODES[*]} " == *" $n "* ]] || NODES+=("$n")
	done
	stop_all
	;;
status) cmd_status ;;
*)
	echo "usage: $0 up|down|status" >&2
	exit 2
	;;
esac
