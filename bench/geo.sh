#!/usr/bin/env bash
# geo.sh measures three sites at a simulated WAN delay (default 50 ms one
# way) started with scripts/geo.sh (make geo), one node per site: LOCAL put
# latency with the other sites attached and cut off, remote visibility per
# chain position, time to global stability (ALL puts), the causal workload
# (puts, gets, GetTxns) on a keyspace of s1 only and on one of every site,
# and YCSB-B throughput at s1 on each, then at every site at once. The
# figures go to stdout and to bench/results/geo-run.txt.
#
#   bench/geo.sh            (GEO_BENCH_WAN='*=50ms', GEO_BENCH_SECONDS=15)
set -euo pipefail
cd "$(dirname "$0")/.."

WAN=${GEO_BENCH_WAN:-*=50ms}
SECS=${GEO_BENCH_SECONDS:-15}
OUT=bench/results/geo-run.txt
S1=127.0.0.1:7379 S2=127.0.0.1:8379 S3=127.0.0.1:9379

scripts/geo.sh down >/dev/null 2>&1 || true
rm -rf data/geo
trap 'scripts/geo.sh down >/dev/null 2>&1 || true' EXIT
GEO_WAN=$WAN scripts/geo.sh up
mkdir -p bin
go build -o bin/geobench ./bench/cmd/geobench
go build -o bin/ycsb ./bench/cmd/ycsb

{
	echo "# bench/geo.sh, $(date -u +%FT%TZ), WAN '$WAN', load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
	echo "## LOCAL puts and remote visibility"
	bin/geobench -sites $S1,$S2,$S3 -n 200
	echo "## LOCAL puts, every other site cut off"
	bin/geobench -sites $S1,$S2,$S3 -n 200 -partition
	echo "## Time to global stability (ALL puts)"
	bin/geobench -sites $S1,$S2,$S3 -n 100 -durability all
	echo "## Causal workload at s1"
	bin/geobench -sites $S1,$S2,$S3 -workload causal -sessions 4 -duration "${SECS}s"
	echo "## YCSB-B, 16 clients, at s1: keyspace of s1 only, then of every site"
	for ks in geobench-local default; do
		echo "### keyspace $ks"
		bin/ycsb run --modes causeway-causal --causeway-endpoints $S1 --causeway-keyspace $ks --workloads B \
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
