# lib.sh: what the benchmark scripts (bench/compare.sh, bench/geo-compare.sh,
# bench/shards.sh, bench/profile.sh) share. Sourced; the caller defines log
# (its message prefix), and STOP_TIMEOUT and WAIT_QUIET where it uses
# stop_pids and wait_quiet.

# port_busy PORT succeeds if something accepts TCP connections on it.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# http_status URL prints the HTTP status code of a GET (000 if none), with
# curl, wget or bash's /dev/tcp.
http_status() {
	if command -v curl >/dev/null; then
		curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" || true
	elif command -v wget >/dev/null; then
		wget -q -T 2 -O /dev/null "$1" 2>/dev/null && echo 200 || echo 000
	else
		local rest=${1#http://} hostport path code
		hostport=${rest%%/*} path=/${rest#*/}
		code=$(timeout 2 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1##*:}" && printf "GET %s HTTP/1.0\r\n\r\n" "$2" >&3 && read -r _ c _ <&3 && echo "$c"' _ "$hostport" "$path" 2>/dev/null) || true
		echo "${code:-000}"
	fi
}

# stop_pids PID... sends SIGTERM, waits up to STOP_TIMEOUT seconds, then SIGKILL.
stop_pids() {
	local pid alive end
	(($# > 0)) || return 0
	for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
	end=$((SECONDS + STOP_TIMEOUT))
	while :; do
		alive=0
		for pid in "$@"; do
			if kill -0 "$pid" 2>/dev/null; then alive=1; fi
		done
		((alive)) || break
		if ((SECONDS >= end)); then
			log "still running after ${STOP_TIMEOUT}s; sending SIGKILL to $*"
			for pid in "$@"; do kill -KILL "$pid" 2>/dev/null || true; done
			break
		fi
		sleep 0.3
	done
	for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}

# wait_quiet waits up to WAIT_QUIET seconds for the 1-minute load average to
# drop below half the CPUs; past that it sets BUSY to a line for the report.
BUSY=
wait_quiet() {
	local cpus load end
	cpus=$(nproc)
	end=$((SECONDS + WAIT_QUIET))
	while :; do
		load=$(cut -d' ' -f1 /proc/loadavg)
		awk -v l="$load" -v c="$cpus" 'BEGIN { exit !(l < c / 2) }' && return 0
		if ((SECONDS >= end)); then
			log "warning: load average $load on $cpus CPUs: the machine is busy, results will be skewed"
			BUSY="the machine was busy when the run started: 1-minute load average $load on $cpus CPUs"
			return 0
		fi
		log "waiting for a quiet machine (load average $load on $cpus CPUs)"
		sleep 10
	done
}

# add_keyspaces EPS SHARDS gives a site ks1..ks4 with the shards per node
# above the default keyspace's 16 ((SHARDS-16)/4 each; none at 16 or
# below) and prints the voter replicas the site then has (3 per shard).
add_keyspaces() {
	local eps=$1 n=$2 extra k
	extra=$(((n - 16) / 4))
	((extra >= 0)) || extra=0
	if ((extra > 0)); then
		for k in 1 2 3 4; do
			bin/kvctl --endpoints "$eps" --session-file none --timeout 30s keyspace create "ks$k" --sites local --shards "$extra" >/dev/null
		done
	fi
	echo $(((16 + 4 * extra) * 3))
}

# voters EPS prints how many voter replicas `kvctl cluster shards` lists.
voters() {
	bin/kvctl --endpoints "$1" --session-file none --timeout 30s -o json cluster shards 2>/dev/null | grep -c '"role": "voter"' || true
}

# leaders_settle DIR END waits until no node of DIR (scripts/cluster.sh's
# n1..n3 logs) logged a shard leadership move for 15 s, or until SECONDS
# reaches END; fails in the second case.
leaders_settle() {
	local dir=$1 end=$2 quiet=0 before after
	while ((quiet < 15 && SECONDS < end)); do
		before=$(cat "$dir"/n{1,2,3}.log | grep -c 'moved shard leadership' || true)
		sleep 5
		after=$(cat "$dir"/n{1,2,3}.log | grep -c 'moved shard leadership' || true)
		if ((after == before)); then quiet=$((quiet + 5)); else quiet=0; fi
	done
	((quiet >= 15))
}
