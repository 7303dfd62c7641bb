# lib.sh: what the benchmark scripts (bench/compare.sh, bench/geo-compare.sh)
# share. Sourced; the caller defines log (its message prefix), STOP_TIMEOUT
# and WAIT_QUIET.

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
