package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
)

// siteProc is one kvd process of a site, restartable on its data and
// addresses.
type siteProc struct {
	*proc
	args                   []string
	peer, client, httpAddr string
}

func startSite(t *testing.T, site, joinCluster string) *siteProc {
	t.Helper()
	a := freeAddrs(t, 4)
	sp := &siteProc{peer: a[0]}
	clientAddr, httpAddr := a[1], a[2]
	sp.client, sp.httpAddr = clientAddr, httpAddr
	sp.args = []string{"--site", site, "--node-id", "n1", "--data-dir", filepath.Join(t.TempDir(), site),
		"--client-addr", clientAddr, "--http-addr", httpAddr, "--peer-addr", sp.peer, "--gossip-addr", a[3],
		"--gossip-profile", "local", "--log-level", "warn", "--simulate-wan", "*=20ms±5ms"}
	if joinCluster != "" {
		sp.args = append(sp.args, "--join-cluster", joinCluster)
	}
	sp.start(t)
	return sp
}

// start runs the process and waits until /readyz answers 200.
func (sp *siteProc) start(t *testing.T) {
	t.Helper()
	sp.proc = runKVD(t, sp.client, sp.httpAddr, 0, sp.args...)
}

func (sp *siteProc) kill() {
	_ = sp.cmd.Process.Kill()
	<-sp.exited
}

// TestGeoSitesAsProcesses runs three one-node sites as separate kvd
// processes with simulated WAN delay: s2 and s3 join the cluster through
// s1. Writes at s1 and s3 reach every site; s2 is killed (SIGKILL) while
// writes go on at s1 and restarted on its data, and then holds every
// acknowledged write too.
func TestGeoSitesAsProcesses(t *testing.T) {
	s1 := startSite(t, "s1", "")
	s2 := startSite(t, "s2", s1.peer)
	s3 := startSite(t, "s3", s1.peer)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var keys []string
	put := func(sp *siteProc, k string) {
		t.Helper()
		var err error
		// The first writes may come while the sites still learn each
		// other; a LOCAL write needs only its own site.
		for range 3 {
			if _, err = dial(t, sp.clientAddr).Put(ctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte(k)}); err == nil {
				keys = append(keys, k)
				return
			}
		}
		t.Fatalf("put %s: %v", k, err)
	}
	for i := range 20 {
		put(s1, fmt.Sprintf("p/s1/%02d", i))
		put(s3, fmt.Sprintf("p/s3/%02d", i))
	}
	refuseImpostor(ctx, t, "s3", s1.peer)
	s2.kill()
	for i := range 10 {
		put(s1, fmt.Sprintf("p/s1/after%02d", i))
	}
	s2.start(t)
	for _, sp := range []*siteProc{s1, s2, s3} {
		kv := dial(t, sp.clientAddr)
		for _, k := range keys {
			poll.Every(50*time.Millisecond).Until(t, 60*time.Second, fmt.Sprintf("%s at %s", k, sp.args[1]), func() error {
				r, err := kv.Get(ctx, &kvv1.GetRequest{Key: []byte(k)})
				if err != nil {
					return err
				}
				if !r.Found {
					return fmt.Errorf("not found")
				}
				return nil
			})
		}
	}
}

// refuseImpostor starts a node on a new data directory as node n1 of the
// existing site, with --join-cluster: it bootstraps a new site of that
// name, and the cluster must refuse it, so that it exits saying why
// instead of taking the real n1's place in the cluster configuration
// (before, it joined and the configuration recorded its addresses).
func refuseImpostor(ctx context.Context, t *testing.T, site, joinCluster string) {
	t.Helper()
	a := freeAddrs(t, 4)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "impostor")
	out, err := exec.CommandContext(ctx, kvdBinary, "--site", site, "--node-id", "n1", "--data-dir", dir,
		"--peer-addr", a[0], "--client-addr", a[1], "--http-addr", a[2], "--gossip-addr", a[3],
		"--gossip-profile", "local", "--log-level", "warn", "--join-cluster", joinCluster).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("a new site named %s joining the cluster still runs after a minute:\n%s", site, out)
	}
	if err == nil || !strings.Contains(string(out), "site "+site+" is in the cluster already, as another incarnation") {
		t.Fatalf("a new site named %s joining the cluster: %v, want a refusal that says the site exists:\n%s", site, err, out)
	}
	t.Logf("refused: %s", lastLine(out))
	// The error advises a start on an empty data directory with --join:
	// the refused start leaves its directory empty, so that such a start
	// there is checked as a new node's (before, it held the refused site's
	// files, and a node with --join started on them as a voter of the real
	// site that had lost its votes and logs).
	if left, err := os.ReadDir(dir); err != nil || len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Fatalf("the refused start left %v in its new data directory (%v), want it empty", names, err)
	}
}
