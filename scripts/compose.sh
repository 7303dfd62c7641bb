#!/usr/bin/env bash
# compose.sh runs the three-site cluster of deploy/docker-compose.yml.
#
#   scripts/compose.sh up       start it (image causeway/kvd:dev: make image)
#                               and wait until every node is healthy
#   scripts/compose.sh down     stop it and delete its volumes
#   scripts/compose.sh status   each node's health, and whether it is on
#                               the network between sites at its address
#
# Environment: COMPOSE_READY_TIMEOUT (seconds, default 180),
# COMPOSE_PROFILES=monitoring to add Prometheus and Grafana (when their
# images are neither here nor can be pulled, up says so and starts the
# kvd nodes without them).
set -euo pipefail
cd "$(dirname "$0")/.."

PROJECT=causeway
FILE=deploy/docker-compose.yml
TIMEOUT=${COMPOSE_READY_TIMEOUT:-180}
NODES=(s1-n1 s1-n2 s1-n3 s2-n1 s2-n2 s2-n3 s3-n1 s3-n2 s3-n3)
# The images of the monitoring profile (deploy/docker-compose.yml).
MONITORING_IMAGES=(prom/prometheus:latest grafana/grafana:latest)
PULL_TIMEOUT=${COMPOSE_PULL_TIMEOUT:-120}

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

# HEALTH_FORMAT is what health asks docker for: a running node's health
# check status, or the state of a node that does not run. A node whose
# kvd exits at start (a data directory it refuses, a wrong flag) is
# restarted by docker over and over: docker reports it running, with the
# last health status, unhealthy, so the restarts are checked first.
# Docker keeps the last health status of a stopped container too.
HEALTH_FORMAT='{{if .State.Restarting}}restarting: kvd exited with code {{.State.ExitCode}} ({{.RestartCount}} restarts){{else if and .State.Running .State.Health}}{{.State.Health.Status}}{{else if eq .State.Status "exited"}}exited (code {{.State.ExitCode}}){{else}}{{.State.Status}}{{end}}'

# health prints the node's health, as HEALTH_FORMAT renders it, or
# missing.
health() {
	local s
	s=$(docker inspect -f "$HEALTH_FORMAT" "causeway-$1" 2>/dev/null) || s=missing
	echo "$s"
}

# wan_addr NODE prints the node's address on the network between sites
# as deploy/docker-compose.yml gives it: 172.28.100.<site><node>.
wan_addr() {
	local n=$1
	echo "172.28.100.${n:1:1}${n:4:1}"
}

# wan_note NODE prints why a running node cannot be reached by the other
# sites, or nothing: the other sites reach it at its --cluster-peer-addr,
# the compose file's address, which `docker network connect` without --ip
# does not give back.
wan_note() {
	local n=$1 want got
	want=$(wan_addr "$n")
	got=$(docker inspect -f '{{if .State.Running}}{{with index .NetworkSettings.Networks "causeway_wan"}}{{.IPAddress}}{{else}}none{{end}}{{end}}' "causeway-$n" 2>/dev/null) || return 0
	case $got in
	"" | "$want") ;;
	none) printf '\tcut off from the other sites (not on causeway_wan): docker network connect --ip %s causeway_wan causeway-%s' "$want" "$n" ;;
	*) printf '\tunreachable by the other sites: on causeway_wan at %s, not %s (its --cluster-peer-addr): docker network disconnect causeway_wan causeway-%s; docker network connect --ip %s causeway_wan causeway-%s' "$got" "$want" "$n" "$want" "$n" ;;
	esac
}

status() {
	local n h
	for n in "${NODES[@]}"; do
		h=$(health "$n")
		[[ $h == restarting* ]] && h+=": docker logs causeway-$n says why"
		printf '%s\t%s%s\n' "$n" "$h" "$(wan_note "$n")"
	done
}

# monitoring makes sure the images of the monitoring profile are here when
# COMPOSE_PROFILES names it, pulling them; when one cannot be had, it says
# why and drops the profile, so that the kvd nodes start without
# Prometheus and Grafana instead of not at all.
monitoring() {
	[[ ,${COMPOSE_PROFILES:-}, == *,monitoring,* ]] || return 0
	local img out p
	for img in "${MONITORING_IMAGES[@]}"; do
		docker image inspect "$img" >/dev/null 2>&1 && continue
		echo "compose: pulling $img (monitoring profile)"
		if ! out=$(timeout "$PULL_TIMEOUT" docker pull "$img" 2>&1); then
			[[ -n $out ]] || out="no answer within ${PULL_TIMEOUT}s"
			echo "compose: cannot pull $img: $(tail -n 1 <<<"$out")" >&2
			echo "compose: starting the kvd nodes without Prometheus and Grafana (make dashboards checks the dashboards without any image)" >&2
			p=",$COMPOSE_PROFILES,"
			p=${p//,monitoring,/,}
			p=${p#,}
			p=${p%,}
			if [[ -n $p ]]; then export COMPOSE_PROFILES=$p; else unset COMPOSE_PROFILES; fi
			return 0
		fi
	done
}

up() {
	docker image inspect causeway/kvd:dev >/dev/null 2>&1 || die "no image causeway/kvd:dev: run make image first"
	monitoring
	compose up -d
	local deadline=$((SECONDS + TIMEOUT)) healthy=0 last=-1 h
	# A node whose kvd exits at start is named once, at once, rather
	# than only when the wait times out.
	local -A told=()
	while ((SECONDS < deadline)); do
		healthy=0
		for n in "${NODES[@]}"; do
			h=$(health "$n")
			[[ $h == healthy ]] && healthy=$((healthy + 1))
			if [[ $h == restarting* && -z ${told[$n]:-} ]]; then
				echo "compose: $n $h: docker logs causeway-$n says why" >&2
				told[$n]=1
			fi
		done
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
