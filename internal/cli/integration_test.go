package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// startServer runs a real single-node kvd in a temporary directory and
// waits until every shard has a leader. It returns a kvctl runner bound to
// it, with a session file in the temporary directory.
func startServer(t *testing.T) (run func(stdin string, args ...string) result, sessionFile string) {
	t.Helper()
	return startServerWith(t, nil)
}

// startServerWith is startServer with mutate applied to the configuration.
func startServerWith(t *testing.T, mutate func(*server.Config)) (run func(stdin string, args ...string) result, sessionFile string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	cfg := server.DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.ClientAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.PeerAddr = "127.0.0.1:0"
	cfg.GossipAddr = "127.0.0.1:0"
	cfg.GossipProfile = "local"
	cfg.Shards = 4
	cfg.NoSync = true
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)

	sessionFile = filepath.Join(dir, "config", "causeway", "session")
	env := map[string]string{EnvEndpoints: srv.ClientAddr(), EnvSessionFile: sessionFile}
	run = func(stdin string, args ...string) result {
		t.Helper()
		return kvctl(t, stdin, env, args...)
	}

	// Ready when cluster status shows a leader for every shard.
	poll.Every(50*time.Millisecond).Until(t, 20*time.Second, "the server to be ready", func() error {
		r := run("", "-o", "json", "cluster", "status")
		var doc struct {
			Nodes []struct {
				Shards []struct {
					State string `json:"state"`
				} `json:"shards"`
			} `json:"nodes"`
		}
		ready := false
		if r.code == ExitOK && json.Unmarshal([]byte(r.stdout), &doc) == nil && len(doc.Nodes) == 1 && len(doc.Nodes[0].Shards) > 0 {
			ready = true
			for _, sh := range doc.Nodes[0].Shards {
				ready = ready && sh.State == "Leader"
			}
		}
		if !ready {
			return fmt.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return nil
	})
	return run, sessionFile
}

func TestIntegrationPutGet(t *testing.T) {
	run, _ := startServer(t)
	put := mustOK(t, run("", "put", "greeting", "hello"))
	if _, err := ParseVersion(strings.TrimSpace(put.stdout)); err != nil {
		t.Fatalf("put printed %q: %v", put.stdout, err)
	}
	if got := mustOK(t, run("", "get", "greeting")).stdout; got != "hello\n" {
		t.Fatalf("get greeting = %q, want %q", got, "hello\n")
	}
	if got := mustOK(t, run("", "get", "--strong", "greeting")).stdout; got != "hello\n" {
		t.Fatalf("get --strong greeting = %q", got)
	}
	mustOK(t, run("from stdin", "put", "piped"))
	if got := mustOK(t, run("", "get", "piped")).stdout; got != "from stdin\n" {
		t.Fatalf("get piped = %q", got)
	}

	r := run("", "get", "missing")
	if r.code != ExitNotFound || r.stdout != "" {
		t.Fatalf("get missing: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	checkErrLine(t, r, `key "missing" not found`)

	mustOK(t, run("", "del", "greeting"))
	if r := run("", "get", "greeting"); r.code != ExitNotFound {
		t.Fatalf("get after del: exit %d (%q)", r.code, r.stderr)
	}
	h := mustOK(t, run("", "history", "greeting")).stdout
	if lines := strings.Split(strings.TrimSuffix(h, "\n"), "\n"); len(lines) != 2 || !strings.HasSuffix(lines[0], "\t(deleted)") || !strings.HasSuffix(lines[1], "\thello") {
		t.Fatalf("history greeting = %q", h)
	}
	if got := mustOK(t, run("", "history", "never-written")).stdout; got != "" {
		t.Fatalf("history never-written = %q", got)
	}

	// The server's InvalidArgument (an empty key) exits 2.
	r = run("", "put", "", "v")
	if r.code != ExitUsage {
		t.Fatalf("put with empty key: exit %d (%q)", r.code, r.stderr)
	}
	checkErrLine(t, r, "InvalidArgument")
}

func TestIntegrationCas(t *testing.T) {
	run, _ := startServer(t)
	v1 := strings.TrimSpace(mustOK(t, run("", "cas", "lock", "owner-a", "--expect-absent")).stdout)

	r := run("", "cas", "lock", "owner-b", "--expect-absent")
	if r.code != ExitConflict {
		t.Fatalf("cas --expect-absent on a held lock: exit %d (%q)", r.code, r.stderr)
	}
	checkErrLine(t, r, v1)

	v2 := strings.TrimSpace(mustOK(t, run("", "cas", "lock", "owner-b", "--expect-version", v1)).stdout)
	r = run("", "-o", "json", "cas", "lock", "owner-c", "--expect-version", v1)
	if r.code != ExitConflict || !strings.Contains(r.stdout, `"text": "`+v2+`"`) {
		t.Fatalf("stale cas: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	mustOK(t, run("", "cas", "lock", "--expect-version", v2, "--delete"))
	if r := run("", "cas", "lock", "x", "--expect-version", v2); r.code != ExitConflict {
		t.Fatalf("cas on a deleted key: exit %d (%q)", r.code, r.stderr)
	}
	if r := run("", "cas", "never", "x", "--expect-version", v2); r.code != ExitConflict {
		t.Fatalf("cas on a missing key: exit %d (%q)", r.code, r.stderr)
	}
	if got := mustOK(t, run("", "cas", "lock", "owner-d", "--expect-absent")).stdout; got == "" {
		t.Fatal("cas --expect-absent after delete printed no version")
	}
}

func TestIntegrationScan(t *testing.T) {
	run, _ := startServer(t)
	const n = 120
	var keys []string
	for i := range n {
		k := fmt.Sprintf("item/%04d", (i*37)%n) // written out of order, spread over shards
		keys = append(keys, k)
		mustOK(t, run("", "put", k, "v-"+k))
	}
	sort.Strings(keys)
	mustOK(t, run("", "put", "itemz", "outside the prefix"))
	mustOK(t, run("", "put", "aaa", "before"))

	got := mustOK(t, run("", "scan", "--prefix", "item/")).stdout
	var want strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&want, "%s\tv-%s\n", k, k)
	}
	if got != want.String() {
		t.Fatalf("scan --prefix item/ returned %d lines, want %d in order:\n%s", strings.Count(got, "\n"), n, got)
	}
	got = mustOK(t, run("", "scan", "--prefix", "item/", "--limit", "25", "--keys-only")).stdout
	if got != strings.Join(keys[:25], "\n")+"\n" {
		t.Fatalf("scan --limit 25 --keys-only = %q", got)
	}
	got = mustOK(t, run("", "scan", "--start", "item/0010", "--end", "item/0013", "--keys-only")).stdout
	if got != "item/0010\nitem/0011\nitem/0012\n" {
		t.Fatalf("scan range = %q", got)
	}
	var doc struct {
		Count int `json:"count"`
	}
	r := mustOK(t, run("", "-o", "json", "scan", "--prefix", "item/", "--keys-only"))
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Count != n {
		t.Fatalf("scan -o json count = %d (%v)", doc.Count, err)
	}
}

func TestIntegrationSessionFile(t *testing.T) {
	run, path := startServer(t)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("session file exists before any data command: %v", err)
	}
	put := mustOK(t, run("", "put", "k1", "v1"))
	v1, _ := ParseVersion(strings.TrimSpace(put.stdout))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("session file not created: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("session file mode %v, want 0600", fi.Mode().Perm())
	}
	floorOf := func(key string) causal.Version {
		t.Helper()
		tok, err := loadSession(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := causal.DecodeSession(tok)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := s.Floor(client.DefaultKeyspace, []byte(key))
		return v
	}
	if got := floorOf("k1"); got != v1 {
		t.Fatalf("session floor of k1 = %v, want %v", got, v1)
	}
	// The next invocation resumes the session (the server accepts the
	// saved token) and extends it.
	put = mustOK(t, run("", "put", "k2", "v2"))
	v2, _ := ParseVersion(strings.TrimSpace(put.stdout))
	if floorOf("k1") != v1 || floorOf("k2") != v2 {
		t.Fatalf("session lost a floor: k1 %v (want %v), k2 %v (want %v)", floorOf("k1"), v1, floorOf("k2"), v2)
	}
	if got := mustOK(t, run("", "get", "k1")).stdout; got != "v1\n" {
		t.Fatalf("get k1 in the resumed session = %q", got)
	}
	// A corrupt session file stops kvctl before it calls the server.
	if err := os.WriteFile(path, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run("", "get", "k1")
	if r.code != ExitUsage {
		t.Fatalf("corrupt session file: exit %d (%q)", r.code, r.stderr)
	}
	checkErrLine(t, r, "delete it")
	os.Remove(path)
	mustOK(t, run("", "get", "k1"))
}

// TestIntegrationSessionFileOfAnotherCluster: the session file follows the
// user from one cluster to another (two single-node clusters with the same
// site name, as a data directory deleted and started again makes). The
// other cluster refuses the session, and kvctl says so and runs the
// command in a new session, which replaces the file's; the command's
// answer is the cluster's own. Without the refusal the floors of one
// cluster's versions are taken for the other's, with no word.
func TestIntegrationSessionFileOfAnotherCluster(t *testing.T) {
	runA, session := startServer(t)
	runB, _ := startServer(t)
	mustOK(t, runA("", "put", "k", "a"))
	mustOK(t, runB("", "--session-file", "none", "put", "k", "b"))
	const note = "belongs to another cluster; starting a new session"
	if r := runB("", "--session-file", session, "get", "k"); r.code != ExitOK || r.stdout != "b\n" || !strings.Contains(r.stderr, note) {
		t.Fatalf("get at B with A's session: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runA("", "get", "k"); r.code != ExitOK || r.stdout != "a\n" || !strings.Contains(r.stderr, note) {
		t.Fatalf("get at A with B's session: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := mustOK(t, runA("", "get", "k")); r.stdout != "a\n" || r.stderr != "" {
		t.Fatalf("get at A in A's session: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// TestIntegrationForeignSessionFileReplacedByARead: a read of a missing
// key in the new session (whose reply holds no floor) still retires the
// other cluster's session: the next command does not find it again and
// say so again (it did on every read until the first write).
func TestIntegrationForeignSessionFileReplacedByARead(t *testing.T) {
	runA, session := startServer(t)
	runB, _ := startServer(t)
	mustOK(t, runA("", "put", "k", "a"))
	const note = "belongs to another cluster; starting a new session"
	if r := runB("", "--session-file", session, "get", "missing"); r.code != ExitNotFound || !strings.Contains(r.stderr, note) {
		t.Fatalf("get of a missing key at B with A's session: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runB("", "--session-file", session, "get", "missing"); r.code != ExitNotFound || strings.Contains(r.stderr, note) {
		t.Fatalf("second get at B: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	mustOK(t, runB("", "--session-file", session, "put", "k", "b"))
	if r := mustOK(t, runB("", "--session-file", session, "get", "k")); r.stdout != "b\n" || r.stderr != "" {
		t.Fatalf("get at B in B's session: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

func TestIntegrationClusterCommands(t *testing.T) {
	run, _ := startServer(t)
	r := mustOK(t, run("", "cluster", "status"))
	for _, want := range []string{"NODE", "SITE", "local", "n1", "default", "Leader", "TERM", "COMMIT", "APPLIED"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("cluster status lacks %q:\n%s", want, r.stdout)
		}
	}
	mustOK(t, run("", "put", "k", "v"))
	r = mustOK(t, run("", "admin", "snapshot"))
	if !strings.Contains(r.stdout, "SNAPSHOTS") {
		t.Fatalf("admin snapshot:\n%s", r.stdout)
	}
	r = mustOK(t, run("", "-o", "json", "admin", "snapshot", "--keyspace", "default"))
	var doc struct {
		Nodes []struct {
			Snapshots int `json:"snapshots"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Nodes) != 1 || doc.Nodes[0].Snapshots < 1 {
		t.Fatalf("admin snapshot -o json: %v\n%s", err, r.stdout)
	}
	r = run("", "admin", "snapshot", "--keyspace", "nope")
	if r.code == ExitOK {
		t.Fatalf("snapshot of an unknown keyspace succeeded:\n%s", r.stdout)
	}
}
