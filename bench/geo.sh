#!/usr/bin/env bash
# geo.sh measures three sites at a simulated WAN delay (default 50 ms one
# way) started with scripts/geo.sh (make geo), one node per site: LOCAL put
# latency with the other sites attached and cut off, remote visibility per
# chain position, time to global stability (ALL puts), the causal workload
# (puts, gets, GetTxns) on a keyspace of s1 only and on one of every site,
# and YCSB-B throughput at s1 on each, then at every site at once. The
# figures go to stdout and to bench/results/geo-run.txt.
#
# On one machine the three sites share its CPUs, so the other sites' work
# (applying s1's writes) slows s1 down, which would not happen with a
# machine per site. GEO_BENCH_PIN=1 (default) pins s1's node and the
# benchmark clients to CPU 0 and the other sites to the other CPUs, so
# that s1's figures show what replication costs s1 itself.
#
#   bench/geo.sh            (GEO_BENCH_WAN='*=50ms', GEO_BENCH_SECONDS=15, GEO_BENCH_PIN=1)
set -euo pipefail
cd "$(dirname "$0")/.."

WAN=${GEO_BENCH_WAN:-*=50ms}
SECS=${GEO_BENCH_SECONDS:-15}
OUT=bench/results/geo-run.txt
PIN=${GEO_BENCH_PIN:-1}
S1=127.0.0.1:7379 S2=127.0.0.1:8379 S3=127.0.0.1:9379

scripts/geo.sh down >/dev/null 2>&1 || true
rm -rf data/geo
trap 'scripts/geo.sh down >/dev/null 2>&1 || true' EXIT
GEO_WAN=$WAN scripts/geo.sh up
mkdir -p bin
go build -o bin/geobench ./bench/cmd/geobench
go build -o bin/ycsb ./bench/cmd/ycsb
RUN=()
if [[ $PIN == 1 ]] && command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
	others="1-$(($(nproc) - 1))"
	for f in data/geo/*.pid; do
		case $f in
		*/s1-*) taskset -acp 0 "$(<"$f")" >/dev/null ;;
		*) taskset -acp "$others" "$(<"$f")" >/dev/null ;;
		esac
	done
	RUN=(taskset -c 0)
	PINNED="s1 and the clients on CPU 0, s2 and s3 on CPUs $others"
else
	PINNED="not pinned"
fi

{
	echo "# bench/geo.sh, $(date -u +%FT%TZ), WAN '$WAN', load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, $PINNED"
	echo "## LOCAL puts and remote visibility"
	"${RUN[@]}" bin/geobench -sites $S1,$S2,$S3 -n 200
	echo "## LOCAL puts, every other site cut off"
	"${RUN[@]}" bin/geobench -sites $S1,$S2,$S3 -n 200 -partition
	echo "## Time to global stability (ALL puts)"
	"${RUN[@]}" bin/geobench -sites $S1,$S2,$S3 -n 100 -durability all
	echo "## Causal workload at s1"
	"${RUN[@]}" bin/geobench -sites $S1,$S2,$S3 -workload causal -sessions 4 -duration "${SECS}s"
	echo "## YCSB-B, 16 clients, at s1: keyspace of s1 only, then of every site"
	for ks in geobench-local default; do
		echo "### keyspace $ks"
		# Load, let the other sites apply the load, then measure.
		"${RUN[@]}" bin/ycsb run --modes causeway-causal --causeway-endpoints $S1 --causeway-keyspace $ks --workloads B \
			--clients 16 --records 10000 --duration 1s --progress 0 --out /dev/null
		sleep 20
		"${RUN[@]}" bin/ycsb run --modes causeway-causal --causeway-endpoints $S1 --causeway-keyspace $ks --workloads B --load=false \
			--clients 16 --records 10000 --duration "${SECS}s" --progress 0 --out - | grep -E "^\|" || true
	done
	echo "## YCSB-B, 16 clients per site, at every site at once (keyspace of every site)"
	for s in $S1 $S2 $S3; do
		bin/ycsb run --modes causeway-causal --causeway-endpoints $s --workloads B --load=false \
			--clients 16 --records 10000 --duration "${SECS}s" --progress 0 --out - > "data/geo/ycsb-$s.txt" 2>&1 &
	done
	wait
	for s in $S1 $S2 $S3; do
		echo "### at $s"
		grep -E "^\|" "data/geo/ycsb-$s.txt" || tail -5 "data/geo/ycsb-$s.txt"
	done
} 2>&1 | tee "$OUT"
