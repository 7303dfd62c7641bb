#!/usr/bin/env bash
# compose.sh runs the three-site cluster of deploy/docker-compose.yml.
#
#   scripts/compose.sh up       start it (image causeway/kvd:dev: make image)
#                               and wait until every node is healthy
#   scripts/compose.sh down     stop it and delete its volumes
#   scripts/compose.sh status   each node's health
#
# Environment: COMPOSE_READY_TIMEOUT (seconds, default 180),
# COMPOSE_PROFILES=monitoring to add Prometheus and Grafana.
set -euo pipefail
cd "$(dirname "$0")/.."

PROJECT=causeway
FILE=deploy/docker-compose.yml
TIMEOUT=${COMPOSE_READY_TIMEOUT:-180}
NODES=(s1-n1 s1-n2 s1-n3 s2-n1 s2-n2 s2-n3 s3-n1 s3-n2 s3-n3)

die() {
	echo "compose: $*" >&2
	exit 1
}

compose() {
	if command -v docker-compose >/dev/null; then
		docker-compose -p "$PROJECT" -f "$FILE" "$@"
	elif docker compose version >/dev/null 2>&1; then
		docker compose -p "$PROJECT" -f "$FILE" "$@"
	else
		die "neither docker-compose nor docker compose is installed"
	fi
}

# health prints a running node's health check status, or the state of a
# node that does not run (exited, restarting, created: docker keeps the
# last health status of a stopped container, unhealthy).
health() {
	local s
	s=$(docker inspect -f '{{if and .State.Running .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "causeway-$1" 2>/dev/null) || s=missing
	echo "$s"
}

status() {
	for n in "${NODES[@]}"; do printf '%s\t%s\n' "$n" "$(health "$n")"; done
}

up() {
	docker image inspect causeway/kvd:dev >/dev/null 2>&1 || die "no image causeway/kvd:dev: run make image first"
	compose up -d
	local deadline=$((SECONDS + TIMEOUT)) healthy=0 last=-1
	while ((SECONDS < deadline)); do
		healthy=0
		for n in "${NODES[@]}"; do [[ $(health "$n") == healthy ]] && healthy=$((healthy + 1)); done
		if ((healthy != last)); then
			echo "compose: $healthy of ${#NODES[@]} nodes healthy"
			last=$healthy
		fi
		if ((healthy == ${#NODES[@]})); then
			echo "compose: ready. s1: 127.0.0.1:17379  s2: 127.0.0.1:18379  s3: 127.0.0.1:19379"
			echo "  bin/kvctl --endpoints 127.0.0.1:17379 put k v"
			echo "  bin/kvctl --endpoints 127.0.0.1:19379 get k"
			echo "  bin/kvctl --endpoints 127.0.0.1:17379 cluster sites"
			return 0
		fi
		sleep 2
	done
	status >&2
	for n in "${NODES[@]}"; do
		[[ $(health "$n") == healthy ]] || { echo "--- logs of $n" >&2; docker logs --tail 20 "causeway-$n" >&2 || true; }
	done
	die "only $healthy of ${#NODES[@]} nodes healthy after ${TIMEOUT}s"
}

down() {
	compose --profile monitoring down -v --remove-orphans 2>/dev/null || compose down -v --remove-orphans
}

case ${1:-} in
up) up ;;
down) down ;;
status) status ;;
*) die "usage: $0 up|down|status" ;;
esac
