# nodes.sh: what scripts/cluster.sh and scripts/geo.sh share to run kvd
# nodes on loopback. Sourced; the caller defines NAME (its message prefix),
# DIR, NODES, READY_TIMEOUT, STOP_TIMEOUT, deadline (for wait_http), and the
# functions pid_of NODE and http_addr NODE.

# port_busy PORT succeeds if something accepts TCP connections on it.
port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# http_status URL prints the HTTP status code of a GET (000 if none).
http_status() {
	if command -v curl >/dev/null; then
		curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" || true
	else
		wget -q -T 2 -O /dev/null "$1" 2>/dev/null && echo 200 || echo 000
	fi
}

# fail_up MESSAGE shows the logs' ends, stops what up started and exits.
fail_up() {
	echo >&2
	echo "$NAME: $*" >&2
	local n
	for n in "${NODES[@]}"; do
		if [[ -f $DIR/$n.log ]]; then
			echo "--- last lines of $DIR/$n.log:" >&2
			tail -n 5 "$DIR/$n.log" >&2
		fi
	done
	stop_all >&2
	exit 1
}

# wait_http NODE PATH waits (with dots) until the node answers 200 on PATH;
# it fails the start if the node exits or the deadline passes, with
# fail_up (which stops every node), or with $WAIT_FAIL if set.
wait_http() {
	local n=$1 path=$2 url fail=${WAIT_FAIL:-fail_up}
	url="http://$(http_addr "$n")$path"
	while [[ $(http_status "$url") != 200 ]]; do
		pid_of "$n" >/dev/null || "$fail" "$n exited during start (see $DIR/$n.log)"
		((SECONDS < deadline)) || "$fail" "$n not ready after ${READY_TIMEOUT}s ($url)"
		printf .
		sleep 0.5
	done
}

# stop_all sends SIGTERM to every running node and waits for them to exit
# (SIGKILL after STOP_TIMEOUT seconds).
stop_all() {
	local n pid pids=() names=() end
	for n in "${NODES[@]}"; do
		if pid=$(pid_of "$n"); then
			kill -TERM "$pid" 2>/dev/null || true
			pids+=("$pid")
			names+=("$n")
		fi
	done
	if ((${#pids[@]} == 0)); then
		echo "$NAME: not running"
		return 0
	fi
	printf 'stopping %s' "${names[*]}"
	end=$((SECONDS + STOP_TIMEOUT))
	while :; do
		local alive=0
		for pid in "${pids[@]}"; do
			if kill -0 "$pid" 2>/dev/null; then alive=1; fi
		done
		((alive)) || break
		if ((SECONDS >= end)); then
			echo
			echo "$NAME: still running after ${STOP_TIMEOUT}s; sending SIGKILL" >&2
			for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
			sleep 0.5
			break
		fi
		printf .
		sleep 0.5
	done
	for n in "${names[@]}"; do rm -f "$DIR/$n.pid"; done
	echo " stopped"
}
