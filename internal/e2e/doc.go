// Package e2e holds the end-to-end test of the three-site compose cluster
// (deploy/docker-compose.yml), run by `make e2e` (scripts/e2e.sh) with the
// e2e build tag against a cluster the script started; with the geoload
// build tag, a causal workload against sites already running on loopback
// (scripts/geo.sh) while faults are injected by hand (docs/testing.md);
// and, without a tag, tests of scripts/compose.sh run against stand-ins
// for docker and docker-compose (no Docker needed).
package e2e
