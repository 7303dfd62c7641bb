#!/usr/bin/env bash
# dashboards.sh checks the Grafana dashboards (deploy/grafana/dashboards)
# against a real Prometheus, without any container image: it starts three
# one-node sites on loopback (scripts/geo.sh, data in data/dashboards,
# started afresh), a Prometheus that scrapes them every 2 s, loads the
# sites for about a minute so that every metric moves, and runs
# bench/cmd/dashcheck, which fails unless every query of every panel is
# valid PromQL and returns data. It draws the geo dashboard's key panels
# into docs/img. Everything it started is stopped on exit, failure
# included.
#
#   scripts/dashboards.sh          (make dashboards)
#
# Needs Prometheus 2.x: /usr/bin/prometheus, installed with apt-get (as root
# or through sudo) when missing. Environment: DASH_PROMETHEUS (binary,
# default prometheus), DASH_PORT (Prometheus listen port, default 19090),
# DASH_LOAD_SECONDS (default 60), DASH_WAIT (dashcheck --wait, default
# 90s), DASH_PNG_DIR (default docs/img; empty: no images).
set -euo pipefail

cd "$(dirname "$0")/.."

die() {
	echo "dashboards: $*" >&2
	exit 1
}

log() { echo "=== $(date '+%T') $*"; }

PROMETHEUS=${DASH_PROMETHEUS:-prometheus}
PORT=${DASH_PORT:-19090}
LOAD_SECONDS=${DASH_LOAD_SECONDS:-60}
WAIT=${DASH_WAIT:-90s}
PNG_DIR=${DASH_PNG_DIR-docs/img}
KVCTL=bin/kvctl
S1=127.0.0.1:7379 S2=127.0.0.1:8379 S3=127.0.0.1:9379

# The WAN delay must be well above a kvctl process's start-up time, or the
# session that moves from site to site (load_loop) would always arrive after
# the versions it observed and the session-move panels would have no data.
export GEO_NODES=1 GEO_WAN='*=60ms' GEO_DIR=data/dashboards

START=$SECONDS

# --- Prometheus
if ! command -v "$PROMETHEUS" >/dev/null; then
	log "installing Debian's prometheus"
	command -v apt-get >/dev/null || die "$PROMETHEUS not found and no apt-get: install Prometheus 2.x"
	SUDO=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null || die "$PROMETHEUS not found: apt-get install prometheus needs root (or sudo)"
		SUDO=(sudo)
	fi
	export DEBIAN_FRONTEND=noninteractive
	if ! "${SUDO[@]}" apt-get install -y prometheus; then
		"${SUDO[@]}" apt-get update
		"${SUDO[@]}" apt-get install -y prometheus
	fi
	# The package's service, where there is an init system to start it,
	# is not needed.
	command -v "$PROMETHEUS" >/dev/null || die "$PROMETHEUS still not found after apt-get install"
fi
log "$("$PROMETHEUS" --version 2>&1 | head -n 1)"

# --- refuse to take over anything running
if scripts/geo.sh status >/dev/null 2>&1; then
	die "nodes of $GEO_DIR are running; stop them first (GEO_DIR=$GEO_DIR scripts/geo.sh down)"
fi
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
	die "port $PORT is in use (DASH_PORT to change)"
fi

TMP=$(mktemp -d)
PROM_PID=
LOAD_PIDS=()

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local p
	for p in "${LOAD_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${LOAD_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	if [[ -n $PROM_PID ]]; then
		kill "$PROM_PID" 2>/dev/null || true
		wait "$PROM_PID" 2>/dev/null || true
	fi
	scripts/geo.sh down || true
	if ((rc != 0)) && [[ -f $TMP/prometheus.log ]]; then
		echo "--- last lines of the Prometheus log:" >&2
		tail -n 5 "$TMP/prometheus.log" >&2
	fi
	rm -rf "$TMP"
	echo "dashboards: $( ((rc == 0)) && echo passed || echo "FAILED (exit $rc)") in $((SECONDS - START))s"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- three sites
rm -rf "$GEO_DIR"
log "starting three sites (GEO_NODES=$GEO_NODES GEO_WAN='$GEO_WAN', data in $GEO_DIR)"
scripts/geo.sh up >"$TMP/geo-up.log" 2>&1 || {
	cat "$TMP/geo-up.log" >&2
	die "scripts/geo.sh up failed"
}
grep -A4 '^SITE' "$TMP/geo-up.log" || true

# --- Prometheus scraping them
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 2s
  evaluation_interval: 2s
scrape_configs:
  - job_name: causeway
    static_configs:
      - targets: ["127.0.0.1:7380"]
        labels: {site: s1}
      - targets: ["127.0.0.1:8380"]
        labels: {site: s2}
      - targets: ["127.0.0.1:9380"]
        labels: {site: s3}
EOF
log "starting Prometheus on 127.0.0.1:$PORT"
"$PROMETHEUS" --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
	--web.listen-address="127.0.0.1:$PORT" >"$TMP/prometheus.log" 2>&1 &
PROM_PID=$!
for ((i = 0; ; i++)); do
	if curl -fsS "http://127.0.0.1:$PORT/-/ready" >/dev/null 2>&1; then break; fi
	kill -0 "$PROM_PID" 2>/dev/null || die "Prometheus exited: $(tail -n 3 "$TMP/prometheus.log")"
	((i < 60)) || die "Prometheus not ready within 30s"
	sleep 0.5
done

# --- load
# kv runs one kvctl command, bounded in time; failures only count.
kv() {
	local out
	out=$(timeout 15 "$KVCTL" --timeout 10s "$@" 2>&1 >/dev/null) || echo "kvctl $*: ${out:-timeout}" >>"$TMP/load-errors"
}

# load_loop SECONDS: writes of the same keys at s2 and s3 (last-writer-wins),
# GetTxns at every site, STRONG reads, one session that moves from site to
# site (a read first: session moves; a write first: writes waiting for
# their dependencies; both: remote updates waiting for theirs), and every
# fifth round a write that waits for every site (time to global stability).
load_loop() {
	local end=$((SECONDS + $1)) i=0 sf="$TMP/session-$BASHPID"
	while ((SECONDS < end)); do
		i=$((i + 1))
		kv --endpoints "$S2" --session-file none put "dash/lww/$((i % 5))" "s2-$i"
		kv --endpoints "$S3" --session-file none put "dash/lww/$((i % 5))" "s3-$i"
		kv --endpoints "$S1" --session-file none txn-get "dash/lww/$((i % 5))" dash/seed/1 dash/seed/2
		kv --endpoints "$S2" --session-file none txn-get dash/seed/1 dash/seed/2
		kv --endpoints "$S3" --session-file none get --strong dash/seed/1
		kv --endpoints "$S1" --session-file "$sf" put "dash/move/a$i" "$i"
		kv --endpoints "$S3" --session-file "$sf" get "dash/move/a$i"
		kv --endpoints "$S3" --session-file "$sf" put "dash/move/b$i" "$i"
		kv --endpoints "$S2" --session-file "$sf" put "dash/move/c$i" "$i"
		kv --endpoints "$S3" --session-file "$sf" get "dash/move/c$i"
		kv --endpoints "$S3" --session-file "$sf" put "dash/move/d$i" "$i"
		kv --endpoints "$S1" --session-file "$sf" put "dash/move/e$i" "$i"
		if ((i % 5 == 1)); then
			kv --endpoints "$S1" --session-file none put --durability all "dash/stable/$i" "$i"
		fi
		sleep 0.2
	done
}

log "loading the sites for ${LOAD_SECONDS}s"
for k in 1 2; do kv --endpoints "$S1" --session-file none put --durability all "dash/seed/$k" v; done
go build -o "$TMP/geobench" ./bench/cmd/geobench
bench_s=$(((LOAD_SECONDS - 10) / 2))
((bench_s >= 5)) || bench_s=5
timeout $((2 * bench_s + 60)) "$TMP/geobench" -workload causal -sessions 2 -duration "${bench_s}s" >"$TMP/geobench.log" 2>&1 &
LOAD_PIDS+=($!)
load_loop "$LOAD_SECONDS" &
LOAD_PIDS+=($!)
sleep 2
kv --endpoints "$S1" --session-file "$TMP/moved" put k v
kv --endpoints "$S3" --session-file "$TMP/moved" get k
kv --endpoints "$S1" --session-file none put --durability all k2 v
sleep $((LOAD_SECONDS / 2))
log "kvctl cluster repair (anti-entropy)"
timeout 60 "$KVCTL" --endpoints "$S1" --session-file none --timeout 50s cluster repair | tail -n 1 || echo "kvctl cluster repair failed" >>"$TMP/load-errors"
for p in "${LOAD_PIDS[@]}"; do wait "$p" || true; done
LOAD_PIDS=()
sed -n '1,4p' "$TMP/geobench.log"
if [[ -s $TMP/load-errors ]]; then
	log "$(wc -l <"$TMP/load-errors") kvctl commands failed, e.g.:"
	sort "$TMP/load-errors" | uniq -c | sort -rn | head -n 5
fi
log "load done"

# --- check, with the load going on so that the rate windows keep data
load_loop 300 &
LOAD_PIDS+=($!)
# With one node per site a write never waits for its dependencies: a
# session that moved waits as it arrives (session-move panels), and a
# session of this site read its dependencies on the very node that writes.
# The panel has data on sites of several nodes, whose replicas lag.
args=(--prometheus "http://127.0.0.1:$PORT" --dashboards deploy/grafana/dashboards --wait "$WAIT"
	--may-be-empty "Writes waiting for remote dependencies (p99)")
if [[ -n $PNG_DIR ]]; then args+=(--png-dir "$PNG_DIR"); fi
log "go run ./bench/cmd/dashcheck ${args[*]}"
rc=0
go run ./bench/cmd/dashcheck "${args[@]}" || rc=$?
exit "$rc"
