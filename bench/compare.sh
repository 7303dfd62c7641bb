#!/usr/bin/env bash
# compare.sh compares Causeway with etcd on this machine with YCSB (make bench-compare).
#
# It builds bin/etcd-embed (bench/etcd: etcd 3.7.3's embed package, its own Go
# module), bin/kvd, bin/kvctl and bin/ycsb, measures the floors (fdatasync on
# the data disk and a loopback gRPC echo), then runs COMPARE_ROUNDS rounds,
# alternating the systems (etcd round 1, Causeway round 1, etcd round 2,
# ...); in each round each system is started afresh:
#   - a 3-member etcd 3.7.3 cluster (bin/etcd-embed, fsync on, etcd's
#     defaults): load the records, run the workloads with linearizable and
#     serializable reads, stop it;
#   - a 3-node Causeway site (bin/kvd processes, kvd's defaults, fsync on):
#     load the same records, run the same workloads with CAUSAL and STRONG
#     reads, recording the servers' histograms from /metrics, stop it.
#     causeway-causal-raw (Causeway's gRPC API without the Go client's
#     session token, a diagnostic of the session's cost) can be added to
#     COMPARE_CAUSEWAY_MODES.
# With COMPARE_ETCD34=1 it then runs Debian's etcd 3.4 (etcd-server,
# installed with apt-get if missing) once as a second reference, reported
# apart. Finally ycsb report aggregates the rounds' JSON files into the
# comparison: per point the median over the rounds and their range, the
# Causeway/etcd ratios of the medians and the targets (markdown, JSON, PNG
# plot of the median throughput against clients with min–max error bars).
# One system runs at a time, so each has the whole machine. Everything started
# here is stopped on exit (including Ctrl-C); the data directories are removed.
#
# Ports (loopback): etcd member eK client 12379+10(K-1), peer 12380+10(K-1);
# Causeway node nK client 17379+10(K-1), http +1, peer +2, gossip +3. None
# clashes with scripts/cluster.sh (7379-7402) or a system etcd (2379/2380).
#
# Environment (defaults in brackets):
#   COMPARE_ROUNDS [3]              rounds per system (1 with COMPARE_QUICK=1)
#   COMPARE_WORKLOADS [A,B,C,F]     COMPARE_CLIENTS [1,16,64,256]
#   COMPARE_ETCD_MODES [etcd-lin,etcd-ser]
#   COMPARE_CAUSEWAY_MODES [causeway-causal,causeway-strong] (also: causeway-causal-raw)
#   COMPARE_RECORDS [10000]         COMPARE_VALUE_SIZE [1024]
#   COMPARE_DURATION [5s]           COMPARE_WARMUP [1s]   (per point)
#   COMPARE_DIR [data/bench-compare] data directories and logs (the disk measured)
#   COMPARE_OUT [bench/results]     COMPARE_NAME [3node]  output file suffix
#   COMPARE_QUICK=1                 a smoke run: 1000 records, clients 1,8, 1s points
#   COMPARE_WAIT_QUIET [120]        seconds to wait for a 1-minute load average
#                                   below half the CPUs before starting
#   COMPARE_KEEP_DATA=1             keep the data directories and logs
#   COMPARE_ETCD34=1                also run Debian's etcd 3.4 (etcd on PATH)
#   COMPARE_SKIP_INSTALL=1          with COMPARE_ETCD34=1: fail instead of
#                                   installing etcd-server
# The defaults take about 7 minutes a round on 2 cores (20-25 minutes in all).
#
# Outputs: $COMPARE_OUT/compare-$NAME.{md,json,png} (the comparison), each
# round's runs ycsb-etcd-$NAME-rK.{json,md} and ycsb-causeway-$NAME-rK.{json,md},
# and ycsb-floors-$NAME.json; with COMPARE_ETCD34=1 also
# ycsb-etcd34-$NAME.{json,md} and compare-etcd34-$NAME.{md,json,png} (the
# same comparison against etcd 3.4).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD

WORKLOADS=${COMPARE_WORKLOADS:-A,B,C,F}
CLIENTS=${COMPARE_CLIENTS:-1,16,64,256}
RECORDS=${COMPARE_RECORDS:-10000}
VALUE_SIZE=${COMPARE_VALUE_SIZE:-1024}
DURATION=${COMPARE_DURATION:-5s}
WARMUP=${COMPARE_WARMUP:-1s}
ROUNDS=${COMPARE_ROUNDS:-3}
IDLE_SAMPLE=5s
DIR=${COMPARE_DIR:-data/bench-compare}
OUT=${COMPARE_OUT:-bench/results}
NAME=${COMPARE_NAME:-3node}
WAIT_QUIET=${COMPARE_WAIT_QUIET:-120}
ETCD_MODES=${COMPARE_ETCD_MODES:-etcd-lin,etcd-ser}
CAUSEWAY_MODES=${COMPARE_CAUSEWAY_MODES:-causeway-causal,causeway-strong}
if [[ ${COMPARE_QUICK:-} == 1 ]]; then
	RECORDS=${COMPARE_RECORDS:-1000}
	CLIENTS=${COMPARE_CLIENTS:-1,8}
	DURATION=${COMPARE_DURATION:-1s}
	WARMUP=${COMPARE_WARMUP:-300ms}
	NAME=${COMPARE_NAME:-quick}
	WAIT_QUIET=${COMPARE_WAIT_QUIET:-0}
	ROUNDS=${COMPARE_ROUNDS:-1}
	IDLE_SAMPLE=1s
fi
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "compare: COMPARE_ROUNDS must be a positive number, not '$ROUNDS'" >&2; exit 1; }
READY_TIMEOUT=60
STOP_TIMEOUT=20

ETCD_NAMES=(e1 e2 e3)
KVD_NAMES=(n1 n2 n3)
PIDS=() # every process started here

log() { echo "compare: $*" >&2; }
die() {
	log "$*"
	exit 1
}

sudo_if_needed() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

# shellcheck source=bench/lib.sh
source bench/lib.sh

# run CMD... runs a long command in the background and waits for it, so
# that a signal to this script is handled at once (bash runs traps only
# between foreground commands).
CHILD=
run() {
	local rc=0
	"$@" &
	CHILD=$!
	wait "$CHILD" || rc=$?
	CHILD=
	return "$rc"
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $CHILD ]]; then
		stop_pids "$CHILD"
	fi
	if ((${#PIDS[@]} > 0)); then
		log "stopping ${#PIDS[@]} processes"
		stop_pids "${PIDS[@]}"
	fi
	if [[ ${COMPARE_KEEP_DATA:-} != 1 && -d $DIR ]]; then
		rm -rf "${DIR:?}/etcd" "${DIR:?}/causeway"
		rmdir "$DIR" 2>/dev/null || true
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- tools

# build_etcd builds bin/etcd-embed, the etcd member compared (bench/etcd).
build_etcd() {
	log "building bin/etcd-embed (bench/etcd)"
	mkdir -p bin
	(cd bench/etcd && go build -o ../../bin/etcd-embed .)
}

# install_etcd34 makes sure Debian's etcd 3.4 (etcd-server) is on PATH, for
# COMPARE_ETCD34=1.
install_etcd34() {
	command -v etcd >/dev/null && return 0
	[[ ${COMPARE_SKIP_INSTALL:-} != 1 ]] || die "etcd not found (COMPARE_SKIP_INSTALL=1)"
	command -v apt-get >/dev/null || die "etcd not found and no apt-get: install etcd 3.4 (etcd on PATH) or unset COMPARE_ETCD34"
	log "installing etcd 3.4 (apt-get install etcd-server)"
	sudo_if_needed apt-get update -qq
	sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
	command -v etcd >/dev/null || die "etcd still not found after installing etcd-server"
}

# ---- etcd

etcd_client_port() { echo $((12379 + 10 * (${1#e} - 1))); }
etcd_peer_port() { echo $((12380 + 10 * (${1#e} - 1))); }

etcd_endpoints() {
	local eps=() n
	for n in "${ETCD_NAMES[@]}"; do eps+=("127.0.0.1:$(etcd_client_port "$n")"); done
	(IFS=,; echo "${eps[*]}")
}

# start_etcd BINARY [ARG...] starts the three members with BINARY (bin/etcd-embed
# or Debian's etcd), each with the extra ARGs, and waits until every member
# answers /health.
start_etcd() {
	local bin=$1 n cluster=() p
	shift
	for n in "${ETCD_NAMES[@]}"; do
		for p in $(etcd_client_port "$n") $(etcd_peer_port "$n"); do
			! port_busy "$p" || die "port $p (etcd $n) is in use"
		done
		cluster+=("$n=http://127.0.0.1:$(etcd_peer_port "$n")")
	done
	rm -rf "$DIR/etcd"
	mkdir -p "$DIR/etcd"
	local arch
	arch=$(uname -m)
	[[ $arch == aarch64 ]] && export ETCD_UNSUPPORTED_ARCH=arm64
	for n in "${ETCD_NAMES[@]}"; do
		local c=$(etcd_client_port "$n") pp=$(etcd_peer_port "$n")
		"$bin" --name "$n" --data-dir "$DIR/etcd/$n" \
			--listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
			--listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
			--initial-cluster "$(IFS=,; echo "${cluster[*]}")" --initial-cluster-token "bench-compare-$$" \
			--initial-cluster-state new "$@" \
			>"$DIR/etcd/$n.log" 2>&1 </dev/null &
		PIDS+=($!)
		ETCD_PIDS+=($!)
	done
	local deadline=$((SECONDS + READY_TIMEOUT))
	until etcd_healthy; do
		for p in "${ETCD_PIDS[@]}"; do
			kill -0 "$p" 2>/dev/null || {
				tail -n 5 "$DIR"/etcd/*.log >&2
				die "an etcd member exited during start"
			}
		done
		((SECONDS < deadline)) || die "etcd not healthy after ${READY_TIMEOUT}s (logs in $DIR/etcd)"
		sleep 0.5
	done
	log "etcd cluster healthy: $(etcd_endpoints)"
}

# etcd_healthy succeeds once every member answers 200 on /health (it has a
# leader and serves).
etcd_healthy() {
	local n
	for n in "${ETCD_NAMES[@]}"; do
		[[ $(http_status "http://127.0.0.1:$(etcd_client_port "$n")/health") == 200 ]] || return 1
	done
}

# ---- Causeway

kvd_base() { echo $((17379 + 10 * (${1#n} - 1))); }

kvd_endpoints() {
	local eps=() n
	for n in "${KVD_NAMES[@]}"; do eps+=("127.0.0.1:$(kvd_base "$n")"); done
	(IFS=,; echo "${eps[*]}")
}

kvd_metrics() {
	local urls=() n
	for n in "${KVD_NAMES[@]}"; do urls+=("http://127.0.0.1:$(($(kvd_base "$n") + 1))/metrics"); done
	(IFS=,; echo "${urls[*]}")
}

# placed succeeds once every shard has three voting replicas.
placed() {
	local doc shards voters
	doc=$(bin/kvctl --endpoints "$(kvd_endpoints)" --session-file none --timeout 5s -o json cluster shards 2>/dev/null) || return 1
	shards=$(grep -c '"shard": [0-9]' <<<"$doc" || true)
	voters=$(grep -c '"role": "voter"' <<<"$doc" || true)
	((shards > 0 && voters == 3 * shards)) && ! grep -q '"role": "learner"' <<<"$doc"
}

start_causeway() {
	local n b p
	for n in "${KVD_NAMES[@]}"; do
		b=$(kvd_base "$n")
		for p in "$b" $((b + 1)) $((b + 2)) $((b + 3)); do
			! port_busy "$p" || die "port $p (kvd $n) is in use"
		done
	done
	rm -rf "$DIR/causeway"
	mkdir -p "$DIR/causeway"
	local deadline=$((SECONDS + READY_TIMEOUT))
	for n in "${KVD_NAMES[@]}"; do
		b=$(kvd_base "$n")
		local args=(--site bench --node-id "$n" --data-dir "$DIR/causeway/$n"
			--client-addr "127.0.0.1:$b" --http-addr "127.0.0.1:$((b + 1))"
			--peer-addr "127.0.0.1:$((b + 2))" --gossip-addr "127.0.0.1:$((b + 3))")
		[[ $n == n1 ]] || args+=(--join "127.0.0.1:$(($(kvd_base n1) + 3))")
		bin/kvd "${args[@]}" >"$DIR/causeway/$n.log" 2>&1 </dev/null &
		PIDS+=($!)
		KVD_PIDS+=($!)
		if [[ $n == n1 ]]; then # the others join its gossip address
			until [[ $(http_status "http://127.0.0.1:$((b + 1))/healthz") == 200 ]]; do
				kill -0 "${KVD_PIDS[0]}" 2>/dev/null || die "kvd n1 exited during start (log: $DIR/causeway/n1.log)"
				((SECONDS < deadline)) || die "kvd n1 not healthy after ${READY_TIMEOUT}s"
				sleep 0.3
			done
		fi
	done
	for n in "${KVD_NAMES[@]}"; do
		b=$(kvd_base "$n")
		until [[ $(http_status "http://127.0.0.1:$((b + 1))/readyz") == 200 ]]; do
			for p in "${KVD_PIDS[@]}"; do
				kill -0 "$p" 2>/dev/null || {
					tail -n 5 "$DIR"/causeway/*.log >&2
					die "a kvd exited during start"
				}
			done
			((SECONDS < deadline)) || die "kvd $n not ready after ${READY_TIMEOUT}s (logs in $DIR/causeway)"
			sleep 0.3
		done
	done
	deadline=$((SECONDS + READY_TIMEOUT))
	until placed; do
		((SECONDS < deadline)) || die "shards do not have 3 replicas after ${READY_TIMEOUT}s"
		sleep 1
	done
	log "Causeway site ready (every shard on 3 nodes): $(kvd_endpoints)"
	# The site moves shard leadership toward its preferred leaders; wait
	# for that so no leadership moves during the measurements.
	deadline=$((SECONDS + READY_TIMEOUT))
	local l
	until l=$(leaders) && balanced "$l"; do
		if ((SECONDS >= deadline)); then
			log "warning: shard leadership not balanced after ${READY_TIMEOUT}s: ${l:-unknown}"
			NOTES+=("Causeway shard leadership was not balanced when the run started: ${l:-unknown}")
			return 0
		fi
		sleep 1
	done
	log "shard leaders: $l"
}

# balanced "n1=6 n2=5 n3=5" succeeds when every node leads shards and the
# counts differ by at most one.
balanced() {
	awk -v nodes="${#KVD_NAMES[@]}" '{
		min = -1; max = 0
		for (i = 1; i <= NF; i++) { split($i, kv, "="); c = kv[2] + 0; if (min < 0 || c < min) min = c; if (c > max) max = c }
		exit !(NF == nodes && max - min <= 1)
	}' <<<"$1"
}

# leaders prints how many shards each node leads ("n1=6 n2=5 n3=5").
leaders() {
	bin/kvctl --endpoints "$(kvd_endpoints)" --session-file none --timeout 5s -o json cluster shards 2>/dev/null |
		grep -o '"leader": "[^"]*"' | cut -d'"' -f4 | sort | uniq -c | awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $2, $1 }'
}

# ---- main

NOTES=()
ETCD_PIDS=()
KVD_PIDS=()
build_etcd
[[ ${COMPARE_ETCD34:-} != 1 ]] || install_etcd34
log "building bin/kvd, bin/kvctl, bin/ycsb"
run "${MAKE:-make}" --no-print-directory build >/dev/null
run go build -o bin/ycsb ./bench/cmd/ycsb
mkdir -p "$DIR" "$OUT"
wait_quiet
[[ -z $BUSY ]] || NOTES+=("$BUSY")

ETCD_VERSION=$(bin/etcd-embed --version | awk '{ print $2 }') # "etcd 3.7.3 (embed)"
CW_VERSION=$(git describe --always --dirty 2>/dev/null || echo unknown)
COMMON=(--workloads "$WORKLOADS" --clients "$CLIENTS" --records "$RECORDS" --value-size "$VALUE_SIZE"
	--duration "$DURATION" --warmup "$WARMUP" --idle-sample "$IDLE_SAMPLE" --timeout 60m)

# etcd_round K starts a fresh etcd cluster, loads it, runs every point of
# the etcd modes and stops it.
etcd_round() {
	log "round $1/$ROUNDS: etcd $ETCD_VERSION (embed), 3 members"
	start_etcd bin/etcd-embed
	run bin/ycsb run --round "$1" --modes "$ETCD_MODES" --etcd-endpoints "$(etcd_endpoints)" "${COMMON[@]}" \
		--server-pids "$(IFS=,; echo "${ETCD_PIDS[*]}")" \
		--title "etcd $ETCD_VERSION (embed), 3 members, YCSB, round $1 of $ROUNDS" --version "etcd=$ETCD_VERSION (embed)" \
		--note "etcd $ETCD_VERSION (embed): bin/etcd-embed (bench/etcd, go.etcd.io/etcd/server/v3 embed), 3 members on loopback, defaults (fsync on, snapshot-count 10000), data in $DIR/etcd" \
		--json "$OUT/ycsb-etcd-$NAME-r$1.json" --out "$OUT/ycsb-etcd-$NAME-r$1.md"
	stop_pids "${ETCD_PIDS[@]}"
	PIDS=()
	ETCD_PIDS=()
}

# causeway_round K does the same with a fresh 3-node Causeway site.
causeway_round() {
	log "round $1/$ROUNDS: Causeway $CW_VERSION, 3 nodes"
	start_causeway
	local leaders
	leaders=$(leaders || true)
	run bin/ycsb run --round "$1" --modes "$CAUSEWAY_MODES" --causeway-endpoints "$(kvd_endpoints)" "${COMMON[@]}" \
		--server-pids "$(IFS=,; echo "${KVD_PIDS[*]}")" \
		--metrics-urls "$(kvd_metrics)" \
		--title "Causeway $CW_VERSION, 3 nodes, YCSB, round $1 of $ROUNDS" --version "causeway=$CW_VERSION" \
		--note "Causeway $CW_VERSION: 3 kvd processes on loopback, one site, 16 shards × 3 replicas, kvd defaults (fsync on), data in $DIR/causeway" \
		--note "Causeway round $1: shard leaders at start ${leaders:-unknown}" \
		--json "$OUT/ycsb-causeway-$NAME-r$1.json" --out "$OUT/ycsb-causeway-$NAME-r$1.md"
	stop_pids "${KVD_PIDS[@]}"
	PIDS=()
	KVD_PIDS=()
}

log "floors"
run bin/ycsb floors --dir "$DIR" --json "$OUT/ycsb-floors-$NAME.json" --out /dev/null

INPUTS=$OUT/ycsb-floors-$NAME.json
CW_INPUTS=
for ((round = 1; round <= ROUNDS; round++)); do
	etcd_round "$round"
	causeway_round "$round"
	INPUTS+=",$OUT/ycsb-etcd-$NAME-r$round.json,$OUT/ycsb-causeway-$NAME-r$round.json"
	CW_INPUTS+=",$OUT/ycsb-causeway-$NAME-r$round.json"
done

if [[ ${COMPARE_ETCD34:-} == 1 ]]; then
	ETCD34_VERSION=$(etcd --version 2>/dev/null | awk '/etcd Version/ { print $3 }')
	log "etcd $ETCD34_VERSION (Debian): 3 members, second reference"
	start_etcd etcd --logger zap --log-outputs stderr
	run bin/ycsb run --modes "$ETCD_MODES" --etcd-endpoints "$(etcd_endpoints)" "${COMMON[@]}" \
		--server-pids "$(IFS=,; echo "${ETCD_PIDS[*]}")" \
		--title "etcd $ETCD34_VERSION (Debian etcd-server), 3 members, YCSB" --version "etcd=$ETCD34_VERSION (Debian)" \
		--note "etcd $ETCD34_VERSION (Debian etcd-server), 3 members on loopback, defaults (fsync on, snapshot-count 100000), data in $DIR/etcd" \
		--json "$OUT/ycsb-etcd34-$NAME.json" --out "$OUT/ycsb-etcd34-$NAME.md"
	stop_pids "${ETCD_PIDS[@]}"
	PIDS=()
	ETCD_PIDS=()
fi

REPORT_NOTES=()
for n in "${NOTES[@]+"${NOTES[@]}"}"; do REPORT_NOTES+=(--note "$n"); done
run bin/ycsb report --in "$INPUTS" \
	--title "Causeway vs etcd: YCSB on one machine, 3 nodes each" \
	--note "one system at a time on the same machine, $ROUNDS round(s) alternating the systems (etcd round 1, Causeway round 1, etcd round 2, ...), each system started afresh and loaded in every round; the benchmark client runs on the same machine" \
	"${REPORT_NOTES[@]+"${REPORT_NOTES[@]}"}" \
	--json "$OUT/compare-$NAME.json" --out "$OUT/compare-$NAME.md" --plot "$OUT/compare-$NAME.png"
if [[ ${COMPARE_ETCD34:-} == 1 ]]; then
	run bin/ycsb report --in "$OUT/ycsb-floors-$NAME.json,$OUT/ycsb-etcd34-$NAME.json$CW_INPUTS" \
		--title "Causeway vs etcd $ETCD34_VERSION (Debian): YCSB on one machine, 3 nodes each" \
		--note "second reference: Debian's etcd $ETCD34_VERSION, run once after the rounds, one system at a time" \
		"${REPORT_NOTES[@]+"${REPORT_NOTES[@]}"}" \
		--json "$OUT/compare-etcd34-$NAME.json" --out "$OUT/compare-etcd34-$NAME.md" --plot "$OUT/compare-etcd34-$NAME.png"
fi
log "done: $OUT/compare-$NAME.md"
