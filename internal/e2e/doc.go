// Package e2e holds the end-to-end test of the three-site compose cluster
// (deploy/docker-compose.yml), run by `make e2e` (scripts/e2e.sh) with the
// e2e build tag against a cluster the script started, and, without the
// tag, tests of scripts/compose.sh run against stand-ins for docker and
// docker-compose (no Docker needed).
package e2e
