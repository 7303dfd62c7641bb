#!/usr/bin/env bash
# e2e.sh: the end-to-end test of the three-site compose cluster.
# Builds the image, starts deploy/docker-compose.yml with its simulated WAN
# delay, runs internal/e2e (a causal workload from the host at every site
# while a node is killed and a site is cut off, then healing, convergence
# and the causal+ checker), and always tears the cluster down.
#
#   scripts/e2e.sh            (make e2e)
#   E2E_BREAK=1 scripts/e2e.sh  leaves s3 cut off: the test must fail
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
start=$SECONDS

cleanup() {
	rc=$?
	if [[ $rc != 0 ]]; then
		for n in s1-n1 s2-n1 s2-n2 s3-n1; do
			echo "--- last log lines of causeway-$n" >&2
			docker logs --tail 15 "causeway-$n" 2>&1 | cut -c1-300 >&2 || true
		done
		# The test's own verdict last, where a truncated log still shows it.
		if [[ -f bin/e2e.out ]]; then
			echo "--- what the test reported" >&2
			grep -E '^\s+compose_test\.go|^--- (FAIL|PASS)|^panic|^FAIL' bin/e2e.out | tail -25 | cut -c1-400 >&2 || true
		fi
	fi
	scripts/compose.sh down >/dev/null 2>&1 || true
	echo "e2e: done in $((SECONDS - start))s (exit $rc)"
	exit $rc
}
trap cleanup EXIT

command -v docker >/dev/null || { echo "e2e: docker is required" >&2; exit 1; }
scripts/compose.sh down >/dev/null 2>&1 || true
make --no-print-directory image
# Compile the test before nine nodes start competing for the CPU.
mkdir -p bin
$GO test -c -tags e2e -o bin/e2e.test ./internal/e2e/
scripts/compose.sh up
rm -f bin/e2e.out
bin/e2e.test -test.count=1 -test.timeout 8m -test.v -test.run TestComposeCluster 2>&1 | tee bin/e2e.out
