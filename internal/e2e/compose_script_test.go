package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"
)

// These tests run scripts/compose.sh itself against stand-ins for docker
// and docker-compose (shell scripts first on PATH that log their calls and
// answer as the real ones do on a machine without a registry), so that
// they need no Docker.

// fakeDocker answers like docker on a machine that holds the kvd image
// and cannot reach a registry. `inspect` prints, for a health query, the
// content of $FAKE_DIR/health-CONTAINER or else "healthy" (and keeps the
// query's format in $FAKE_DIR/health-format) and, for the address on the
// network between sites, the content of $FAKE_DIR/wan-CONTAINER.
const fakeDocker = `#!/usr/bin/env bash
echo "docker $*" >>"$FAKE_DIR/log"
case $1 in
image)
	[[ $3 == causeway/kvd:dev ]] && exit 0
	echo "Error: No such image: $3" >&2
	exit 1
	;;
pull)
	echo 'Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host' >&2
	exit 1
	;;
inspect)
	name=${!#}
	case $3 in
	*causeway_wan*) cat "$FAKE_DIR/wan-$name" 2>/dev/null || true ;;
	*)
		printf '%s' "$3" >"$FAKE_DIR/health-format"
		cat "$FAKE_DIR/health-$name" 2>/dev/null || echo healthy
		;;
	esac
	;;
esac
exit 0
`

// fakeCompose answers like docker-compose 1.29: `up` with the monitoring
// profile first pulls the missing Prometheus image and fails.
const fakeCompose = `#!/usr/bin/env bash
echo "compose profiles=${COMPOSE_PROFILES-unset} $*" >>"$FAKE_DIR/log"
if [[ " $* " == *" up "* && ,${COMPOSE_PROFILES:-}, == *,monitoring,* ]]; then
	echo "Pulling prometheus (prom/prometheus:latest)..."
	echo 'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host' >&2
	exit 1
fi
exit 0
`

// runComposeScript runs scripts/compose.sh ARGS with the stand-ins and
// returns its stdout, stderr, the stand-ins' log and its error.
func runComposeScript(t *testing.T, dir string, env []string, args ...string) (string, string, string, error) {
	t.Helper()
	for name, body := range map[string]string{"docker": fakeDocker, "docker-compose": fakeCompose} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "compose.sh"), args...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "FAKE_DIR="+dir, "COMPOSE_READY_TIMEOUT=20")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	return stdout.String(), stderr.String(), string(log), runErr
}

// The README and docs/operations.md promise that
// `COMPOSE_PROFILES=monitoring make compose-up` adds Prometheus and
// Grafana where their images can be pulled; where they cannot, the
// cluster must still start, and the script must say why the monitoring is
// missing.
func TestComposeUpWithoutMonitoringImagesStartsTheNodes(t *testing.T) {
	dir := t.TempDir()
	stdout, stderr, log, err := runComposeScript(t, dir, []string{"COMPOSE_PROFILES=monitoring"}, "up")
	if err != nil {
		t.Fatalf("compose.sh up with the monitoring profile and no registry: %v\nstdout:\n%s\nstderr:\n%s\ncalls:\n%s", err, stdout, stderr, log)
	}
	if !strings.Contains(log, "compose profiles=unset -p causeway -f deploy/docker-compose.yml up -d") {
		t.Errorf("compose up was not run without the monitoring profile; calls:\n%s", log)
	}
	for _, want := range []string{"cannot pull prom/prometheus:latest", "no such host", "without Prometheus and Grafana"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "compose: ready.") {
		t.Errorf("stdout does not report the cluster ready:\n%s", stdout)
	}
}

// A node that `docker network disconnect causeway_wan` cut off, or that
// `docker network connect` without --ip gave another address, is healthy
// but unreachable by the other sites (they dial its --cluster-peer-addr):
// status names it and the command that puts it back.
func TestComposeStatusNamesNodesOffTheWAN(t *testing.T) {
	dir := t.TempDir()
	for s := 1; s <= 3; s++ {
		for n := 1; n <= 3; n++ {
			addr := fmt.Sprintf("172.28.100.%d%d\n", s, n)
			switch {
			case s == 3 && n == 1:
				addr = "none\n"
			case s == 3 && n == 2:
				addr = "172.28.100.2\n"
			}
			name := fmt.Sprintf("causeway-s%d-n%d", s, n)
			if err := os.WriteFile(filepath.Join(dir, "wan-"+name), []byte(addr), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	stdout, stderr, log, err := runComposeScript(t, dir, nil, "status")
	if err != nil {
		t.Fatalf("compose.sh status: %v\nstderr:\n%s\ncalls:\n%s", err, stderr, log)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 9 {
		t.Fatalf("status printed %d lines, want 9:\n%s", len(lines), stdout)
	}
	for _, l := range lines {
		node, rest, _ := strings.Cut(l, "\t")
		switch node {
		case "s3-n1":
			if want := "cut off from the other sites (not on causeway_wan): docker network connect --ip 172.28.100.31 causeway_wan causeway-s3-n1"; rest != "healthy\t"+want {
				t.Errorf("status of s3-n1 = %q, want it to say %q", rest, want)
			}
		case "s3-n2":
			for _, want := range []string{"at 172.28.100.2, not 172.28.100.32", "docker network connect --ip 172.28.100.32 causeway_wan causeway-s3-n2"} {
				if !strings.Contains(rest, want) {
					t.Errorf("status of s3-n2 = %q, want it to say %q", rest, want)
				}
			}
		default:
			if rest != "healthy" {
				t.Errorf("status of %s = %q, want healthy", node, rest)
			}
		}
	}
}

// inspectedState is the part of `docker inspect`'s answer for a container
// that the health format of scripts/compose.sh reads.
type inspectedState struct {
	State struct {
		Status              string
		Running, Restarting bool
		ExitCode            int
		Health              *struct{ Status string }
	}
	RestartCount int
}

// A node whose kvd refuses to start (a damaged raft log, a wrong flag) is
// restarted by docker over and over, and docker reports it running, with
// the last health status, unhealthy: status printed "unhealthy", as for a
// node still starting. It must say the node's kvd exits, with its code,
// and where to read why.
func TestComposeStatusNamesCrashLoopingNodes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "health-causeway-s2-n3"), []byte("restarting: kvd exited with code 1 (9 restarts)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, log, err := runComposeScript(t, dir, nil, "status")
	if err != nil {
		t.Fatalf("compose.sh status: %v\nstderr:\n%s\ncalls:\n%s", err, stderr, log)
	}
	if want := "s2-n3\trestarting: kvd exited with code 1 (9 restarts): docker logs causeway-s2-n3 says why\n"; !strings.Contains(stdout, want) {
		t.Errorf("status does not say %q:\n%s", want, stdout)
	}

	// The format the script gives docker, rendered as docker renders it
	// (a Go template over the inspected container) for the states a
	// node goes through.
	format, err := os.ReadFile(filepath.Join(dir, "health-format"))
	if err != nil {
		t.Fatalf("status asked docker for no health: %v\ncalls:\n%s", err, log)
	}
	tmpl, err := template.New("health").Parse(string(format))
	if err != nil {
		t.Fatalf("health format %q: %v", format, err)
	}
	state := func(status string, running, restarting bool, exit, restarts int, health string) inspectedState {
		var s inspectedState
		s.State.Status, s.State.Running, s.State.Restarting, s.State.ExitCode, s.RestartCount = status, running, restarting, exit, restarts
		if health != "" {
			s.State.Health = &struct{ Status string }{health}
		}
		return s
	}
	for _, c := range []struct {
		name  string
		state inspectedState
		want  string
	}{
		{"crash loop", state("restarting", true, true, 1, 9, "unhealthy"), "restarting: kvd exited with code 1 (9 restarts)"},
		{"ready", state("running", true, false, 0, 0, "healthy"), "healthy"},
		{"starting", state("running", true, false, 0, 0, "starting"), "starting"},
		{"killed", state("exited", false, false, 137, 0, "unhealthy"), "exited (code 137)"},
		{"created", state("created", false, false, 0, 0, ""), "created"},
	} {
		var b strings.Builder
		if err := tmpl.Execute(&b, c.state); err != nil {
			t.Fatalf("%s: health format: %v", c.name, err)
		}
		if got := b.String(); got != c.want {
			t.Errorf("%s: health = %q, want %q", c.name, got, c.want)
		}
	}
}

// up names a node whose kvd keeps exiting as soon as it sees it, not only
// in the listing printed when the wait times out (after 180 s by
// default).
func TestComposeUpNamesACrashLoopingNodeAtOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "health-causeway-s2-n3"), []byte("restarting: kvd exited with code 1 (2 restarts)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, log, err := runComposeScript(t, dir, []string{"COMPOSE_READY_TIMEOUT=4"}, "up")
	if err == nil {
		t.Fatalf("compose.sh up succeeded with a node that keeps exiting; calls:\n%s", log)
	}
	want := "compose: s2-n3 restarting: kvd exited with code 1 (2 restarts): docker logs causeway-s2-n3 says why\n"
	first, _, _ := strings.Cut(stderr, "only 8 of 9 nodes healthy")
	if strings.Count(stderr, want) != 1 || !strings.Contains(first, want) {
		t.Errorf("up did not name s2-n3 once before timing out; stderr:\n%s", stderr)
	}
}
