#!/usr/bin/env bash
# shards.sh measures what shards cost a 3-node site (make bench-shards): for
# each shard count per node it starts a fresh site (scripts/cluster.sh,
# kvd's defaults, 3 replicas of every shard, so every node holds every
# shard) with the default keyspace (16 shards) and, above 16, four more
# keyspaces (ks1..ks4) holding the rest, created once the three nodes are up,
# waits until every replica is placed and the site is idle, then records
#   - idle CPU: the CPU seconds the three kvd processes use over
#     SHARDS_IDLE_SECONDS with no traffic, divided by the wall time (cores);
#   - memory: the three processes' resident set sizes (sum);
#   - YCSB-B throughput on the default keyspace (16 and 64 clients, CAUSAL
#     reads) with bin/ycsb.
# The table goes to stdout and bench/results/shards.md.
#
# Environment: SHARDS_COUNTS [16,256,1024] shards per node,
# SHARDS_IDLE_SECONDS [30], SHARDS_YCSB_DURATION [10s], SHARDS_RECORDS [10000],
# SHARDS_PLACE_TIMEOUT [600] seconds to wait for every replica to be placed
# and shard leadership to stop moving
# (the row then says how many were), SHARDS_OUT [bench/results/shards.md].
set -euo pipefail
cd "$(dirname "$0")/.."

COUNTS=${SHARDS_COUNTS:-16,256,1024}
IDLE=${SHARDS_IDLE_SECONDS:-30}
DURATION=${SHARDS_YCSB_DURATION:-10s}
RECORDS=${SHARDS_RECORDS:-10000}
OUT=${SHARDS_OUT:-bench/results/shards.md}
PLACE_TIMEOUT=${SHARDS_PLACE_TIMEOUT:-600}
export CLUSTER_DIR=data/bench-shards
EPS=127.0.0.1:7379,127.0.0.1:7389,127.0.0.1:7399
HZ=$(getconf CLK_TCK)

log() { echo "shards: $*" >&2; }
# shellcheck source=bench/lib.sh
source bench/lib.sh
down() { scripts/cluster.sh down >/dev/null 2>&1 || true; }
cleanup() {
	down
	rm -rf "$CLUSTER_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

make --no-print-directory build >/dev/null
go build -o bin/ycsb ./bench/cmd/ycsb

pids() { cat "$CLUSTER_DIR"/n{1,2,3}.pid; }
# cpu_ticks PID... sums user+system clock ticks.
cpu_ticks() {
	local t=0 p
	for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
	echo "$t"
}
rss_mb() {
	local k=0 p
	for p in "$@"; do k=$((k + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status"))); done
	echo $((k / 1024))
}
# ycsb_b prints the YCSB-B throughput at 16 and 64 clients ("a b").
ycsb_b() {
	local j=$CLUSTER_DIR/ycsb.json
	if ! bin/ycsb run --modes causeway-causal --causeway-endpoints "$EPS" --workloads B --clients 16,64 \
		--records "$RECORDS" --duration "$DURATION" --warmup 2s --progress 0 --json "$j" >"$CLUSTER_DIR/ycsb.log" 2>&1; then
		log "ycsb failed: $(tail -3 "$CLUSTER_DIR/ycsb.log")"
		echo "- -"
		return
	fi
	# The run phases' throughputs, in client order (the load phase and the
	# aggregated points also carry one).
	python3 -c 'import json, sys; print(" ".join(str(round(r["throughput_ops"])) for r in json.load(open(sys.argv[1]))["results"]))' "$j"
}

ROWS=()
IFS=, read -r -a counts <<<"$COUNTS"
for n in "${counts[@]}"; do
	down
	rm -rf "$CLUSTER_DIR"
	log "site with $n shards per node (default keyspace: 16, ks1..ks4: $(((n > 16 ? n - 16 : 0) / 4)) each)"
	CLUSTER_NO_BUILD=1 CLUSTER_READY_TIMEOUT=120 scripts/cluster.sh up >/dev/null
	want=$(add_keyspaces "$EPS" "$n")
	start=$SECONDS
	end=$((SECONDS + PLACE_TIMEOUT))
	placed=0
	while :; do
		placed=$(voters "$EPS")
		((placed < want)) || break
		((SECONDS < end)) || {
			log "only $placed of $want replicas placed after ${PLACE_TIMEOUT}s"
			break
		}
		sleep 2
	done
	took=$((SECONDS - start))
	# The catalog leader then evens out shard leadership (a few transfers
	# a round): wait until no node logged a move for 15 s, within the
	# same bound.
	log "$placed of $want replicas placed in ${took}s; waiting for shard leadership to settle"
	settled=1
	leaders_settle "$CLUSTER_DIR" "$end" || settled=0
	balanced=$((SECONDS - start))
	((settled)) || log "shard leadership still moving after ${PLACE_TIMEOUT}s"
	log "leadership settled ${balanced}s after the start; waiting 10s more"
	sleep 10
	mapfile -t P < <(pids)
	t0=$(cpu_ticks "${P[@]}")
	sleep "$IDLE"
	t1=$(cpu_ticks "${P[@]}")
	cpu=$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v s="$IDLE" 'BEGIN { printf "%.3f", d / hz / s }')
	mem=$(rss_mb "${P[@]}")
	log "idle: $cpu cores, $mem MB resident; YCSB-B"
	read -r o16 o64 < <(ycsb_b)
	ROWS+=("| $n | $placed / $want in ${took}s, leaders settled at ${balanced}s | $cpu | $mem | $o16 | $o64 |")
	log "$n shards: idle $cpu cores, $mem MB, YCSB-B $o16 / $o64 ops/s"
done

{
	echo "# Shards per node: idle cost and YCSB-B"
	echo
	echo "bench/shards.sh, $(date -u +%FT%TZ), $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)."
	echo "A 3-node site (kvd defaults, 3 replicas: every node holds every shard): the default keyspace (16 shards) and 4 more keyspaces with the rest;"
	echo "idle CPU over ${IDLE}s with no traffic (the three processes together); YCSB-B on the default keyspace"
	echo "($RECORDS records, $DURATION per point, CAUSAL reads)."
	echo
	echo "| shards per node | replicas placed | idle CPU (cores) | memory (MB, 3 nodes) | YCSB-B 16 clients (ops/s) | YCSB-B 64 clients (ops/s) |"
	echo "|---|---|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
} | tee "$OUT"
