#!/usr/bin/env bash
# geo-compare.sh compares Causeway's three sites with an etcd cluster
# stretched over the same three sites, at the same one-way delay between
# any two sites (make bench-geo).
#
#   Causeway: scripts/geo.sh with GEO_WAN='*=DELAY' (kvd's simulated WAN),
#     one node per site, client ports 27379 (s1), 28379 (s2), 29379 (s3)
#     (GEO_PORT_BASE=27379, clear of make geo and make cluster).
#   etcd: three bin/etcd-embed members (etcd 3.7.3, bench/etcd), e1 at s1,
#     e2 at s2, e3 at s3, etcd's defaults (fsync on). Each member's peer port
#     sits behind bin/delayproxy (bench/delayproxy), which delays each
#     direction by DELAY, and the member advertises the proxy's address as
#     its peer URL, so every member-to-member connection crosses one proxy:
#     DELAY one way, 2 x DELAY round trip between any two members. Clients
#     are local: a client at site i talks to member i directly.
#     Ports: member ei client 22379+10(i-1), peer +1, its proxy +2.
#
# One system at a time, on the same machine, measured with the same tools:
#   1. put latency at each site (bin/geobench: 1 client, GEO_COMPARE_PUTS
#      puts 10 ms apart; Causeway LOCAL puts, also into a keyspace held by
#      that site only) and, for the same puts, remote visibility at the
#      other sites (one reader per site asks every 1 ms, in one request,
#      for the keys not seen yet: Causeway a BatchGet in its own CAUSAL
#      session, etcd serializable gets at the site's member);
#   2. YCSB-B (bin/ycsb, GEO_COMPARE_CLIENTS clients, records loaded at s1)
#      at each site alone, then at every site at once.
# bin/georeport writes $OUT/$NAME.md (tables and targets) and $OUT/$NAME.png;
# geobench's own lines go to $OUT/$NAME-run.txt. Everything started here is
# stopped on exit, Ctrl-C included, and the data directories are removed.
#
# Environment (defaults in brackets):
#   GEO_COMPARE_DELAY [50ms]      one-way delay between two sites
#   GEO_COMPARE_PUTS [200]        puts per site and system
#   GEO_COMPARE_SECONDS [8]       measured seconds of each YCSB-B run (+1 s warm-up)
#   GEO_COMPARE_CLIENTS [16]      YCSB-B clients per site
#   GEO_COMPARE_RECORDS [1000]    YCSB records
#   GEO_COMPARE_ALL [1]           0: skip YCSB-B at every site at once
#   GEO_COMPARE_ETCD_MODE [etcd-ser]  etcd-lin for linearizable reads
#   GEO_COMPARE_SETTLE [5]        seconds between the load and the first run
#   GEO_COMPARE_STEP_TIMEOUT [300] bound on each measuring command (seconds)
#   GEO_COMPARE_WAIT_QUIET [60]   seconds to wait for a 1-minute load average
#                                 below half the CPUs before starting
#   GEO_COMPARE_DIR [data/geo-compare]  data, logs and raw results
#   GEO_COMPARE_OUT [bench/results]     GEO_COMPARE_NAME [geo-compare]
#   GEO_COMPARE_KEEP_DATA=1       keep the data directories and logs
set -euo pipefail

cd "$(dirname "$0")/.."

DELAY=${GEO_COMPARE_DELAY:-50ms}
PUTS=${GEO_COMPARE_PUTS:-200}
SECS=${GEO_COMPARE_SECONDS:-8}
CLIENTS=${GEO_COMPARE_CLIENTS:-16}
RECORDS=${GEO_COMPARE_RECORDS:-1000}
ALL=${GEO_COMPARE_ALL:-1}
ETCD_MODE=${GEO_COMPARE_ETCD_MODE:-etcd-ser}
SETTLE=${GEO_COMPARE_SETTLE:-5}
STEP_TIMEOUT=${GEO_COMPARE_STEP_TIMEOUT:-300}
DIR=${GEO_COMPARE_DIR:-data/geo-compare}
OUT=${GEO_COMPARE_OUT:-bench/results}
NAME=${GEO_COMPARE_NAME:-geo-compare}
WAIT_QUIET=${GEO_COMPARE_WAIT_QUIET:-60}
READY_TIMEOUT=60
STOP_TIMEOUT=20

CW_PORT_BASE=27379
CW_SITES=(127.0.0.1:27379 127.0.0.1:28379 127.0.0.1:29379)
ETCD_SITES=()
RES=$DIR/results
RUNLOG=$OUT/$NAME-run.txt
PIDS=()   # processes started here (etcd members, the proxy)
CHILD=    # the measuring command in the foreground
GEO_UP=0  # scripts/geo.sh up ran

log() { echo "geo-compare: $*" >&2; }
die() {
	log "$*"
	exit 1
}

[[ $DELAY =~ ^[0-9]+(\.[0-9]+)?(ms|s)$ ]] || die "GEO_COMPARE_DELAY=$DELAY: want a delay such as 50ms"

# shellcheck source=bench/lib.sh
source bench/lib.sh

# run CMD... runs a command in the background, bounded by STEP_TIMEOUT, and
# waits for it, so that a signal to this script is handled at once.
run() {
	local rc=0
	timeout "$STEP_TIMEOUT" "$@" &
	CHILD=$!
	wait "$CHILD" || rc=$?
	CHILD=
	((rc != 124)) || log "timed out after ${STEP_TIMEOUT}s: $*"
	return "$rc"
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -z $CHILD ]] || stop_pids "$CHILD"
	if ((${#PIDS[@]} > 0)); then
		log "stopping ${#PIDS[@]} processes"
		stop_pids "${PIDS[@]}"
	fi
	if ((GEO_UP)); then
		log "stopping the Causeway sites"
		GEO_DIR=$DIR/causeway GEO_PORT_BASE=$CW_PORT_BASE scripts/geo.sh down >/dev/null 2>&1 || true
	fi
	if [[ ${GEO_COMPARE_KEEP_DATA:-} != 1 && -d $DIR ]]; then
		rm -rf "${DIR:?}/causeway" "${DIR:?}/etcd" "${DIR:?}/results" "$DIR"/*.log "$DIR/measure.out"
		rmdir "$DIR" 2>/dev/null || true
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# rotated I ADDR... prints the addresses as a comma-separated list starting
# at the I-th (0-based): the writing site first, then the others in order.
rotated() {
	local i=$1
	shift
	local a=("$@") out=() k
	for ((k = 0; k < ${#a[@]}; k++)); do out+=("${a[$(((i + k) % ${#a[@]}))]}"); done
	(IFS=,; echo "${out[*]}")
}

# measure LABEL CMD... runs a geobench command; its lines go to stderr and
# to the run log under LABEL.
measure() {
	local label=$1 tmp=$DIR/measure.out
	shift
	log "$label"
	run "$@" >"$tmp"
	{
		echo "## $label"
		cat "$tmp"
	} >>"$RUNLOG"
	cat "$tmp" >&2
}

# ycsb_b SYSTEM MODE ENDPOINTS-FLAG LABEL: YCSB-B at each site alone, then at
# every site at once, after loading the records at the first site.
ycsb_b() {
	local sys=$1 mode=$2 flag=$3 i pids=() p rc=0
	shift 3
	local eps=("$@")
	log "$sys: loading $RECORDS records at ${eps[0]}"
	run bin/ycsb run --modes "$mode" "$flag" "${eps[0]}" --workloads B --clients 1 --records "$RECORDS" \
		--duration 0 --operations 1 --warmup 0 --progress 0 --timeout "$((STEP_TIMEOUT - 10))s" --out /dev/null \
		2>"$DIR/$sys-load.log" || {
		tail -n 5 "$DIR/$sys-load.log" >&2
		die "$sys: load failed"
	}
	grep '^load' "$DIR/$sys-load.log" >&2 || true
	sleep "$SETTLE"
	for i in "${!eps[@]}"; do
		log "$sys: YCSB-B, $CLIENTS clients at s$((i + 1)) alone, ${SECS}s"
		run bin/ycsb run --modes "$mode" "$flag" "${eps[$i]}" --workloads B --load=false --clients "$CLIENTS" \
			--records "$RECORDS" --duration "${SECS}s" --warmup 1s --progress 0 --timeout "$((STEP_TIMEOUT - 10))s" \
			--json "$RES/$sys-ycsb-s$((i + 1)).json" --out /dev/null
	done
	[[ $ALL == 1 ]] || return 0
	log "$sys: YCSB-B, $CLIENTS clients at every site at once, ${SECS}s"
	for i in "${!eps[@]}"; do
		timeout "$STEP_TIMEOUT" bin/ycsb run --modes "$mode" "$flag" "${eps[$i]}" --workloads B --load=false --clients "$CLIENTS" \
			--records "$RECORDS" --duration "${SECS}s" --warmup 1s --progress 0 --timeout "$((STEP_TIMEOUT - 10))s" \
			--json "$RES/$sys-ycsb-all-s$((i + 1)).json" --out /dev/null 2>"$DIR/ycsb-all-s$((i + 1)).log" &
		pids+=($!)
		PIDS+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=$?; done
	PIDS=("${PIDS[@]:0:${#PIDS[@]}-${#pids[@]}}")
	((rc == 0)) || die "YCSB-B at every site at once failed (logs: $DIR/ycsb-all-s*.log)"
}

# ---- etcd

etcd_client_port() { echo $((22379 + 10 * ($1 - 1))); }

start_etcd() {
	local i c maps=() cluster=() p
	for i in 1 2 3; do
		c=$(etcd_client_port "$i")
		for p in "$c" $((c + 1)) $((c + 2)); do
			! port_busy "$p" || die "port $p (etcd e$i) is in use"
		done
		maps+=("127.0.0.1:$((c + 2))=127.0.0.1:$((c + 1))")
		cluster+=("e$i=http://127.0.0.1:$((c + 2))")
		ETCD_SITES+=("127.0.0.1:$c")
	done
	mkdir -p "$DIR/etcd"
	bin/delayproxy -delay "$DELAY" "${maps[@]}" >"$DIR/etcd/delayproxy.log" 2>&1 </dev/null &
	PIDS+=($!)
	for i in 1 2 3; do
		c=$(etcd_client_port "$i")
		bin/etcd-embed --name "e$i" --data-dir "$DIR/etcd/e$i" \
			--listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
			--listen-peer-urls "http://127.0.0.1:$((c + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((c + 2))" \
			--initial-cluster "$(IFS=,; echo "${cluster[*]}")" --initial-cluster-token "geo-compare-$$" \
			>"$DIR/etcd/e$i.log" 2>&1 </dev/null &
		PIDS+=($!)
	done
	local deadline=$((SECONDS + READY_TIMEOUT)) ok
	while :; do
		ok=0
		for i in 1 2 3; do
			[[ $(http_status "http://127.0.0.1:$(etcd_client_port "$i")/health") != 200 ]] || ok=$((ok + 1))
		done
		((ok < 3)) || break
		for p in "${PIDS[@]}"; do
			kill -0 "$p" 2>/dev/null || {
				tail -n 5 "$DIR"/etcd/*.log >&2
				die "an etcd member or the proxy exited during start"
			}
		done
		((SECONDS < deadline)) || die "etcd not healthy after ${READY_TIMEOUT}s (logs in $DIR/etcd)"
		sleep 0.5
	done
	log "etcd healthy: ${ETCD_SITES[*]}, peers through bin/delayproxy ($DELAY each way)"
}

# ---- main

log "building bin/kvd, bin/kvctl, bin/geobench, bin/ycsb, bin/delayproxy, bin/georeport, bin/etcd-embed"
mkdir -p bin
run "${MAKE:-make}" --no-print-directory build >/dev/null
for c in geobench ycsb delayproxy georeport; do run go build -o "bin/$c" "./bench/cmd/$c"; done
(cd bench/etcd && go build -o ../../bin/etcd-embed .)

rm -rf "${DIR:?}/causeway" "${DIR:?}/etcd" "${DIR:?}/results"
mkdir -p "$RES" "$OUT"
wait_quiet
STARTED=$(date -u '+%F %T UTC')
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
CW_VERSION=$(git describe --always --dirty 2>/dev/null || echo unknown)
ETCD_VERSION=$(bin/etcd-embed --version)
echo "# bench/geo-compare.sh, $STARTED, one way $DELAY, load average $LOAD, $(nproc) CPUs" >"$RUNLOG"

log "Causeway $CW_VERSION: three sites, simulated WAN *=$DELAY"
GEO_UP=1
GEO_DIR=$DIR/causeway GEO_WAN="*=$DELAY" GEO_NO_BUILD=1 GEO_NODES=1 GEO_PORT_BASE=$CW_PORT_BASE scripts/geo.sh up >"$DIR/geo-up.log" 2>&1 ||
	{
		tail -n 20 "$DIR/geo-up.log" >&2
		die "scripts/geo.sh up failed"
	}
for i in 0 1 2; do
	measure "Causeway: puts at s$((i + 1)), visibility at the other sites" \
		bin/geobench -sites "$(rotated "$i" "${CW_SITES[@]}")" -n "$PUTS" -json "$RES/causeway-put-s$((i + 1)).json"
done
# The same puts with no reader at the other sites: the conditions of the
# single-site puts below (the readers' requests share this machine's CPUs).
for i in 0 1 2; do
	measure "Causeway: puts at s$((i + 1)), no readers" \
		bin/geobench -sites "${CW_SITES[$i]}" -n "$PUTS" -json "$RES/causeway-local-s$((i + 1)).json"
done
ycsb_b causeway causeway-causal --causeway-endpoints "${CW_SITES[@]}"
# Last, as each adds a keyspace of 16 shards at its site.
for i in 0 1 2; do
	measure "Causeway: puts at s$((i + 1)), keyspace held by s$((i + 1)) only" \
		bin/geobench -sites "${CW_SITES[$i]}" -single-site -n "$PUTS" -json "$RES/causeway-single-s$((i + 1)).json"
done
log "stopping the Causeway sites"
GEO_DIR=$DIR/causeway GEO_PORT_BASE=$CW_PORT_BASE scripts/geo.sh down >/dev/null 2>&1 || true
GEO_UP=0

log "$ETCD_VERSION: three members, one per site"
start_etcd
for i in 0 1 2; do
	measure "etcd: puts at e$((i + 1)) (s$((i + 1))), visibility at the other members" \
		bin/geobench -system etcd -sites "$(rotated "$i" "${ETCD_SITES[@]}")" -n "$PUTS" -json "$RES/etcd-put-s$((i + 1)).json"
done
ycsb_b etcd "$ETCD_MODE" --etcd-endpoints "${ETCD_SITES[@]}"
stop_pids "${PIDS[@]}"
PIDS=()

run bin/georeport -dir "$RES" -sites 3 -delay "$DELAY" -out "$OUT/$NAME.md" -plot "$OUT/$NAME.png" \
	-note "run $STARTED by bench/geo-compare.sh (make bench-geo) on $(nproc) CPUs, load average $LOAD at the start; raw output: [$NAME-run.txt]($NAME-run.txt)" \
	-note "three sites, $DELAY one way between any two; one system at a time on the same machine (Causeway first, then etcd), unpinned: all servers and clients share the CPUs" \
	-note "Causeway $CW_VERSION: scripts/geo.sh, one kvd node per site (kvd defaults, fsync on), simulated WAN *=$DELAY (kvd --simulate-wan), the default keyspace on s1, s2, s3 (16 shards)" \
	-note "$ETCD_VERSION: bin/etcd-embed, one member per site (etcd defaults, fsync on, heartbeat 100 ms, election 1 s); every peer connection crosses bin/delayproxy ($DELAY each way); clients talk to their site's member only" \
	-note "put latency: $PUTS puts per site, 1 client, 10 ms apart, after 10 unmeasured; YCSB-B: $CLIENTS clients, ${SECS}s measured after 1s warm-up" \
	${BUSY:+-note "$BUSY"}
log "done: $OUT/$NAME.md, $OUT/$NAME.png"
