#!/usr/bin/env bash
# cluster.sh runs a three-node Causeway site on loopback for development.
#
#   scripts/cluster.sh up       build bin/kvd, start n1, n2, n3, wait until ready
#                               (with some running: restart the missing ones)
#   scripts/cluster.sh down     stop them (SIGTERM, then wait)
#   scripts/cluster.sh status   show which nodes run
#
# Node nK (K = 1, 2, 3) listens on 127.0.0.1 ports B, B+1, B+2, B+3 (client,
# http, peer, gossip) with B = CLUSTER_PORT_BASE + 10*(K-1) (7379 by
# default); n2 and n3 join n1's gossip address. Node nK keeps its data in data/cluster/nK, its log in
# data/cluster/nK.log and its pid in data/cluster/nK.pid. The data survives
# down/up; delete data/cluster to start a new site.
#
# up returns once every node's /readyz answers 200 and every shard has its
# three replicas (or warns if the replicas are still moving after the ready
# timeout: the site serves meanwhile).
#
# Environment: CLUSTER_READY_TIMEOUT (seconds, default 60), CLUSTER_STOP_TIMEOUT
# (seconds, default 30), CLUSTER_NO_BUILD=1 to skip building bin/kvd,
# CLUSTER_DIR (default data/cluster), CLUSTER_PORT_BASE (n1's first port,
# default 7379: e.g. CLUSTER_PORT_BASE=20379 to run beside make run or another
# site; give down and status the same value), CLUSTER_KVD_ARGS (extra kvd
# flags, split on spaces, e.g. "--shards 256 --pprof").
set -euo pipefail

cd "$(dirname "$0")/.."

NAME=cluster
# shellcheck source=scripts/nodes.sh
source scripts/nodes.sh

DIR=${CLUSTER_DIR:-data/cluster}
KVD=bin/kvd
KVCTL=bin/kvctl
SITE=local
NODES=(n1 n2 n3)
PORT_BASE=${CLUSTER_PORT_BASE:-7379}
REPLICAS=3
READY_TIMEOUT=${CLUSTER_READY_TIMEOUT:-60}
STOP_TIMEOUT=${CLUSTER_STOP_TIMEOUT:-30}

die() {
	echo "cluster: $*" >&2
	exit 1
}

[[ $PORT_BASE =~ ^[1-9][0-9]*$ ]] && ((PORT_BASE + 23 < 65536)) || die "CLUSTER_PORT_BASE=$PORT_BASE: want a port below 65513"
JOIN=127.0.0.1:$((PORT_BASE + 3))

# base NODE prints the node's first port.
base() {
	local k=${1#n}
	echo $((PORT_BASE + 10 * (k - 1)))
}

client_addr() { echo "127.0.0.1:$(base "$1")"; }
http_addr() { echo "127.0.0.1:$(($(base "$1") + 1))"; }

endpoints() {
	local eps=() n
	for n in "${NODES[@]}"; do eps+=("$(client_addr "$n")"); done
	(IFS=,; echo "${eps[*]}")
}

# pid_of NODE prints the pid of the node's running kvd, or fails (removing
# a stale pid file).
pid_of() {
	local f="$DIR/$1.pid" pid
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	if [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && ps -p "$pid" -o args= 2>/dev/null | grep -q -- "--node-id $1 "; then
		echo "$pid"
		return 0
	fi
	rm -f "$f"
	return 1
}

# start_node NODE [JOIN]: JOIN (a gossip address) overrides n1's.
start_node() {
	local n=$1 join=${2:-$JOIN} b
	b=$(base "$n")
	local args=(--site "$SITE" --node-id "$n" --data-dir "$DIR/$n"
		--client-addr "127.0.0.1:$b" --http-addr "127.0.0.1:$((b + 1))"
		--peer-addr "127.0.0.1:$((b + 2))" --gossip-addr "127.0.0.1:$((b + 3))")
	if [[ $n != n1 || $join != "$JOIN" ]]; then args+=(--join "$join"); fi
	# shellcheck disable=SC2206 # split on purpose
	args+=(${CLUSTER_KVD_ARGS:-})
	mkdir -p "$DIR/$n"
	echo "=== $(date '+%F %T') starting $n: $KVD ${args[*]}" >>"$DIR/$n.log"
	# A session of its own: the node outlives this script and the terminal's
	# Ctrl-C.
	if command -v setsid >/dev/null; then
		nohup setsid "$KVD" "${args[@]}" >>"$DIR/$n.log" 2>&1 </dev/null &
	else
		nohup "$KVD" "${args[@]}" >>"$DIR/$n.log" 2>&1 </dev/null &
	fi
	echo $! >"$DIR/$n.pid"
}

# placed succeeds once every shard has REPLICAS voting replicas.
placed() {
	local doc shards voters
	doc=$("$KVCTL" --endpoints "$(endpoints)" --session-file none --timeout 5s -o json cluster shards 2>/dev/null) || return 1
	shards=$(grep -c '"shard": [0-9]' <<<"$doc" || true)
	voters=$(grep -c '"role": "voter"' <<<"$doc" || true)
	((shards > 0 && voters == REPLICAS * shards)) && ! grep -q '"role": "learner"' <<<"$doc"
}

# wait_placement waits (with dots, until the ready deadline, at least 30s
# from now) for the shard replicas to reach every node.
wait_placement() {
	[[ -x $KVCTL ]] || return 0
	local end=$((deadline > SECONDS + 30 ? deadline : SECONDS + 30))
	printf 'waiting for %d replicas of every shard' "$REPLICAS"
	until placed; do
		if ((SECONDS >= end)); then
			echo
			echo "cluster: warning: replicas are still moving; the site serves meanwhile (see: $KVCTL cluster shards)" >&2
			return 0
		fi
		printf .
		sleep 1
	done
	echo " done"
}

# prepare NODE...: fail if a port of the nodes is taken; build bin/kvd.
prepare() {
	local n b p
	for n in "$@"; do
		b=$(base "$n")
		for p in "$b" $((b + 1)) $((b + 2)) $((b + 3)); do
			if port_busy "$p"; then
				die "port $p (for $n) is in use; is another kvd running (make run)?"
			fi
		done
	done
	if [[ ${CLUSTER_NO_BUILD:-} != 1 ]]; then
		"${MAKE:-make}" --no-print-directory build
	fi
	[[ -x $KVD ]] || die "$KVD not found; run make build"
}

# restart_missing RUNNING...: some nodes run (the others crashed or were
# killed): start the missing ones on their data, joining a running node,
# and wait until they are ready. A failure leaves the running nodes alone.
restart_missing() {
	local running=("$@") missing=() n
	for n in "${NODES[@]}"; do
		[[ " ${running[*]} " == *" $n "* ]] || missing+=("$n")
	done
	prepare "${missing[@]}"
	local join
	join="127.0.0.1:$(($(base "${running[0]}") + 3))"
	printf '%s running; restarting %s' "${running[*]}" "${missing[*]}"
	for n in "${missing[@]}"; do start_node "$n" "$join"; done
	deadline=$((SECONDS + READY_TIMEOUT))
	for n in "${missing[@]}"; do WAIT_FAIL=die wait_http "$n" /readyz; done
	echo " ready"
	cmd_status
}

cmd_up() {
	local n running=()
	for n in "${NODES[@]}"; do
		if pid_of "$n" >/dev/null; then running+=("$n"); fi
	done
	if ((${#running[@]} == ${#NODES[@]})); then
		echo "cluster: already running"
		cmd_status
		return 0
	fi
	if ((${#running[@]} > 0)); then
		restart_missing "${running[@]}"
		return
	fi
	prepare "${NODES[@]}"
	mkdir -p "$DIR"

	trap 'fail_up "interrupted"' INT TERM
	deadline=$((SECONDS + READY_TIMEOUT))
	printf 'starting n1'
	start_node n1
	wait_http n1 /healthz # gossip listens: the others can join
	for n in "${NODES[@]:1}"; do
		printf ' %s' "$n"
		start_node "$n"
	done
	printf '\nwaiting for /readyz'
	for n in "${NODES[@]}"; do
		wait_http "$n" /readyz
		printf ' %s' "$n"
	done
	trap - INT TERM
	echo " ready"
	wait_placement
	echo
	cmd_status
	echo
	echo "Try:"
	echo "  bin/kvctl --endpoints $(endpoints) cluster members"
	echo "  export CAUSEWAY_ENDPOINTS=$(endpoints)"
	echo "  bin/kvctl put greeting hello && bin/kvctl get greeting"
	if [ -n "${CLUSTER_DIR:-}" ]; then
		echo "Stop with: CLUSTER_DIR=$CLUSTER_DIR scripts/cluster.sh down (logs in $DIR/nN.log)"
	else
		echo "Stop with: make cluster-down (logs in $DIR/nN.log)"
	fi
}

cmd_down() {
	stop_all
}

cmd_status() {
	local n pid state ready up=0
	printf '%-4s %-8s %-8s %-16s %-16s %s\n' NODE STATE PID CLIENT HTTP READY
	for n in "${NODES[@]}"; do
		if pid=$(pid_of "$n"); then
			up=$((up + 1))
			state=running
			ready=$([[ $(http_status "http://$(http_addr "$n")/readyz") == 200 ]] && echo yes || echo no)
		else
			pid=- state=stopped ready=-
		fi
		printf '%-4s %-8s %-8s %-16s %-16s %s\n' "$n" "$state" "$pid" "$(client_addr "$n")" "$(http_addr "$n")" "$ready"
	done
	((up > 0)) || return 3
}

case ${1:-} in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
*)
	echo "usage: $0 up|down|status" >&2
	exit 2
	;;
esac
