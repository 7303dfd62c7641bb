#!/usr/bin/env bash
# profile.sh records where a 3-node site spends its CPU (make bench-profile):
# it starts a fresh site (scripts/cluster.sh with --pprof, kvd's defaults,
# fsync on, data in data/bench-profile), loads PROFILE_RECORDS records, and
# takes CPU profiles of node n1 (http 127.0.0.1:7380, /debug/pprof/profile)
# over PROFILE_SECONDS in each of these cases:
#   idle        no traffic
#   ycsb-a-64   YCSB-A, 64 clients, CAUSAL reads (the write path under load)
#   ycsb-a-1    YCSB-A, 1 client (the latency path of a put and a read)
#   ycsb-c-1    YCSB-C, 1 client, CAUSAL reads (the read path alone)
# For each it writes $PROFILE_OUT/NAME.pb.gz (open with `go tool pprof`),
# NAME.txt (the top functions by cumulative CPU) and a line of the summary
# NAME=share per part of the node (gRPC, raft, the WAL, state commits, GC,
# ...; the shares overlap where one call stack belongs to two parts) in
# $PROFILE_OUT/summary.md. With PROFILE_SHARDS=N (> 16) the site also gets
# keyspaces ks1..ks4 with the shards above 16 (as bench/shards.sh) and the
# idle profile is taken once every replica is placed and leadership settled.
#
# Environment: PROFILE_CASES [idle,ycsb-a-64,ycsb-a-1,ycsb-c-1],
# PROFILE_SECONDS [20], PROFILE_RECORDS [10000], PROFILE_SHARDS [16],
# PROFILE_OUT [bench/results/profiles].
set -euo pipefail
cd "$(dirname "$0")/.."

CASES=${PROFILE_CASES:-idle,ycsb-a-64,ycsb-a-1,ycsb-c-1}
SECS=${PROFILE_SECONDS:-20}
RECORDS=${PROFILE_RECORDS:-10000}
SHARDS=${PROFILE_SHARDS:-16}
OUT=${PROFILE_OUT:-bench/results/profiles}
export CLUSTER_DIR=data/bench-profile
export CLUSTER_KVD_ARGS="--pprof"
EPS=127.0.0.1:7379,127.0.0.1:7389,127.0.0.1:7399
PPROF=http://127.0.0.1:7380/debug/pprof/profile

log() { echo "profile: $*" >&2; }
# shellcheck source=bench/lib.sh
source bench/lib.sh
cleanup() {
	[[ -z ${YPID:-} ]] || kill "$YPID" 2>/dev/null || true
	scripts/cluster.sh down >/dev/null 2>&1 || true
	rm -rf "$CLUSTER_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

make --no-print-directory build >/dev/null
go build -o bin/ycsb ./bench/cmd/ycsb
mkdir -p "$OUT"

scripts/cluster.sh down >/dev/null 2>&1 || true
rm -rf "$CLUSTER_DIR"
log "starting a 3-node site (data in $CLUSTER_DIR)"
CLUSTER_NO_BUILD=1 CLUSTER_READY_TIMEOUT=120 scripts/cluster.sh up >/dev/null
if ((SHARDS > 16)); then
	want=$(add_keyspaces "$EPS" "$SHARDS")
	end=$((SECONDS + 900))
	while placed=$(voters "$EPS") && ((placed < want && SECONDS < end)); do
		log "$placed of $want replicas placed"
		sleep 5
	done
	leaders_settle "$CLUSTER_DIR" "$end" || log "shard leadership still moving"
fi

log "loading $RECORDS records"
bin/ycsb run --modes causeway-causal --causeway-endpoints "$EPS" --workloads A --clients 1 --records "$RECORDS" \
	--operations 1 --progress 0 --out "$CLUSTER_DIR/load.md" >"$CLUSTER_DIR/load.log" 2>&1

# summarize NAME prints the share of NAME's samples in each part.
summarize() {
	local p=$OUT/$1.pb.gz part re share line="| $1 |"
	local parts=(
		"gRPC server (handlers and framing)=grpc.*http2Server|grpc\.\(\*Server\)"
		"gRPC client (peer calls)=grpc.*http2Client|grpc\.\(\*ClientConn\)|grpc\.invoke"
		"gRPC writes (loopyWriter)=loopyWriter"
		"raft (hashicorp/raft)=hashicorp/raft\."
		"WAL=internal/storage\.\(\*RaftLogs\)|internal/storage\.\(\*LogStore\)|internal/wal"
		"state commits=internal/storage\.\(\*DB\)\.commit"
		"state reads=internal/storage\.\(\*DB\)\.View"
		"syscalls=syscall\.Syscall|syscall\.RawSyscall|internal/runtime/syscall"
		"GC and allocation=runtime\.gcBgMarkWorker|runtime\.mallocgc|runtime\.gcAssist"
		"scheduler=runtime\.schedule|runtime\.findRunnable|runtime\.park_m"
	)
	for part in "${parts[@]}"; do
		re=${part#*=}
		share=$(go tool pprof -top -nodefraction 0 -edgefraction 0 -focus "$re" "$p" 2>/dev/null | awk '/^Showing nodes accounting for/ { gsub(/,/, ""); print $6 }' | head -1)
		line+=" ${share:-0%} |"
	done
	echo "$line"
}

ROWS=()
IFS=, read -r -a cases <<<"$CASES"
for c in "${cases[@]}"; do
	args=()
	case $c in
	idle) ;;
	ycsb-a-64) args=(--workloads A --clients 64) ;;
	ycsb-a-1) args=(--workloads A --clients 1) ;;
	ycsb-c-1) args=(--workloads C --clients 1) ;;
	*)
		log "unknown case $c"
		exit 2
		;;
	esac
	YPID=
	if ((${#args[@]} > 0)); then
		bin/ycsb run --modes causeway-causal --causeway-endpoints "$EPS" "${args[@]}" --records "$RECORDS" --load=false \
			--duration "$((SECS + 6))s" --warmup 2s --progress 0 --out "$OUT/$c-ycsb.md" >"$CLUSTER_DIR/$c.log" 2>&1 &
		YPID=$!
		sleep 4
	fi
	log "$c: profiling n1 for ${SECS}s"
	go tool pprof -proto -seconds "$SECS" "$PPROF" >"$OUT/$c.pb.gz" 2>"$CLUSTER_DIR/pprof.log" ||
		{ log "$c: profile failed: $(tail -3 "$CLUSTER_DIR/pprof.log")"; exit 1; }
	if [[ -n $YPID ]]; then
		wait "$YPID" || log "$c: ycsb failed: $(tail -3 "$CLUSTER_DIR/$c.log")"
		YPID=
	fi
	go tool pprof -top -cum -nodecount 45 "$OUT/$c.pb.gz" >"$OUT/$c.txt" 2>/dev/null
	ROWS+=("$(summarize "$c")")
done

{
	echo "# Where node n1 of a 3-node site spends its CPU"
	echo
	echo "bench/profile.sh, $(date -u +%FT%TZ), $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $SHARDS shards per node,"
	echo "${SECS}s CPU profiles of n1 (kvd defaults, fsync on, $RECORDS records, CAUSAL reads)."
	echo "Shares of the node's samples whose call stack passes through each part (they overlap: a WAL write is also a syscall)."
	echo "Open NAME.pb.gz with \`go tool pprof\`; NAME.txt lists the top functions by cumulative CPU, NAME-ycsb.md the load's throughput and latency."
	echo
	echo "| case | gRPC server | gRPC client | gRPC writes | raft | WAL | state commits | state reads | syscalls | GC and allocation | scheduler |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
} | tee "$OUT/summary.md"
