package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/client/clienttest"
	"github.com/causeway-db/causeway/internal/causal"
)

// These tests run kvctl against the in-memory fake node of package
// clienttest; integration_test.go runs it against a real server.

// fakeKVCtl returns a kvctl runner bound to a fresh fake node.
func fakeKVCtl(t *testing.T) (*clienttest.Server, func(stdin string, args ...string) result) {
	t.Helper()
	f := clienttest.Start(t)
	return f, func(stdin string, args ...string) result {
		t.Helper()
		return kvctl(t, stdin, map[string]string{EnvEndpoints: f.Addr()}, args...)
	}
}

func mustOK(t *testing.T, r result) result {
	t.Helper()
	if r.code != ExitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q, stdout %q", r.code, r.stderr, r.stdout)
	}
	return r
}

func TestPutGetDel(t *testing.T) {
	_, run := fakeKVCtl(t)
	put := mustOK(t, run("", "put", "greeting", "hello"))
	v, err := ParseVersion(strings.TrimSuffix(put.stdout, "\n"))
	if err != nil {
		t.Fatalf("put printed %q: %v", put.stdout, err)
	}
	if got := mustOK(t, run("", "get", "greeting")).stdout; got != "hello\n" {
		t.Fatalf("get printed %q, want %q", got, "hello\n")
	}
	if got := mustOK(t, run("", "get", "greeting", "--strong")).stdout; got != "hello\n" {
		t.Fatalf("get --strong printed %q", got)
	}

	var doc struct {
		Key     string `json:"key"`
		Found   bool   `json:"found"`
		Value   string `json:"value"`
		Version struct {
			Text string `json:"text"`
			HLC  uint64 `json:"hlc"`
			Site string `json:"site"`
		} `json:"version"`
	}
	r := mustOK(t, run("", "get", "greeting", "-o", "json"))
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("get -o json: %v\n%s", err, r.stdout)
	}
	if !doc.Found || doc.Value != "hello" || doc.Version.Text != v.String() || doc.Version.HLC != v.HLC || doc.Version.Site != v.Site {
		t.Fatalf("get -o json = %+v, want hello at %v", doc, v)
	}

	r = run("", "get", "missing")
	if r.code != ExitNotFound || r.stdout != "" {
		t.Fatalf("get missing: exit %d, stdout %q", r.code, r.stdout)
	}
	checkErrLine(t, r, `key "missing" not found`)
	r = run("", "-o", "json", "get", "missing")
	if r.code != ExitNotFound || !strings.Contains(r.stdout, `"found": false`) {
		t.Fatalf("get missing -o json: exit %d, stdout %q", r.code, r.stdout)
	}

	mustOK(t, run("", "del", "greeting"))
	if r := run("", "get", "greeting"); r.code != ExitNotFound {
		t.Fatalf("get after del: exit %d", r.code)
	}
	r = mustOK(t, run("", "-o", "json", "del", "never"))
	if !strings.Contains(r.stdout, `"existed": false`) {
		t.Fatalf("del -o json of a missing key: %s", r.stdout)
	}
}

func TestPutValueSources(t *testing.T) {
	_, run := fakeKVCtl(t)
	mustOK(t, run("line one\nline two\n", "put", "stdin-key"))
	if got := mustOK(t, run("", "get", "stdin-key")).stdout; got != "line one\nline two\n\n" {
		t.Fatalf("value from stdin read back as %q", got)
	}
	file := filepath.Join(t.TempDir(), "v")
	os.WriteFile(file, []byte{0x00, 0xff, 'x'}, 0o600)
	mustOK(t, run("", "put", "file-key", "--file", file))
	if got := mustOK(t, run("", "get", "file-key")).stdout; got != "\x00\xffx\n" {
		t.Fatalf("value from --file read back as %q", got)
	}
	r := mustOK(t, run("", "-o", "json", "get", "file-key"))
	if !strings.Contains(r.stdout, `"base64": "AP94"`) {
		t.Fatalf("binary value in JSON: %s", r.stdout)
	}
	mustOK(t, run("", "put", "empty", ""))
	if got := mustOK(t, run("", "get", "empty")).stdout; got != "\n" {
		t.Fatalf("empty value read back as %q", got)
	}
}

func TestServerErrorsExitCodes(t *testing.T) {
	f, run := fakeKVCtl(t)
	// InvalidArgument from the server (empty key) exits 2.
	r := run("", "put", "", "v")
	if r.code != ExitUsage {
		t.Fatalf("empty key: exit %d (%q)", r.code, r.stderr)
	}
	checkErrLine(t, r, "empty key (InvalidArgument)")
	// NotFound (an unknown keyspace) exits 1, other codes 5.
	r = run("", "--keyspace", "nope", "get", "k")
	if r.code != ExitNotFound {
		t.Fatalf("unknown keyspace: exit %d (%q)", r.code, r.stderr)
	}
	checkErrLine(t, r, `unknown keyspace "nope" (NotFound); kvctl keyspace list shows the keyspaces`)
	f.FailNextData(codes.Internal)
	if r := run("", "get", "k"); r.code != ExitError {
		t.Fatalf("Internal: exit %d", r.code)
	}
	// Retryable failures are retried.
	f.FailNextData(codes.Unavailable, codes.Unavailable)
	if r := run("", "get", "k"); r.code != ExitNotFound {
		t.Fatalf("after 2 Unavailable: exit %d (%q)", r.code, r.stderr)
	}
}

func TestUnavailableExitCode(t *testing.T) {
	dead := clienttest.DeadAddr(t)
	r := kvctl(t, "", nil, "--endpoints", dead, "--timeout", "2s", "get", "k")
	if r.code != ExitUnavailable {
		t.Fatalf("dead endpoint: exit %d (%q)", r.code, r.stderr)
	}
	checkErrLine(t, r, "(Unavailable)")

	f := clienttest.Start(t)
	f.Block(true)
	r = kvctl(t, "", nil, "--endpoints", f.Addr(), "--timeout", "300ms", "get", "k")
	if r.code != ExitUnavailable {
		t.Fatalf("hung endpoint: exit %d (%q)", r.code, r.stderr)
	}
	checkErrLine(t, r, "DeadlineExceeded")

	// A dead endpoint is skipped in favour of a live one.
	live := clienttest.Start(t)
	r = kvctl(t, "", nil, "--endpoints", dead+","+live.Addr(), "put", "k", "v")
	mustOK(t, r)
}

// TestSilentFirstEndpointIsPassedOver: with a first endpoint that takes
// connections and answers nothing (a node stopped with SIGSTOP), every
// kvctl command, a new client each, sent its call there first and waited
// for it to go unanswered: 5 s per get (the attempt's share of --timeout)
// and 7 s per put, measured against a 3-node site of real processes. kvctl
// dials every endpoint at once and starts at the first that answers, so
// commands cost about what they cost without the silent node: here less,
// for a put and a get together, than one status probe of a silent node
// takes to give up on it.
func TestSilentFirstEndpointIsPassedOver(t *testing.T) {
	f := clienttest.Start(t)
	eps := clienttest.SilentAddr(t) + "," + f.Addr() + "," + f.Addr()
	start := time.Now()
	mustOK(t, kvctl(t, "", nil, "--endpoints", eps, "--timeout", "1m", "put", "k", "v"))
	if got := mustOK(t, kvctl(t, "", nil, "--endpoints", eps, "--timeout", "1m", "get", "k")).stdout; got != "v\n" {
		t.Fatalf("get printed %q", got)
	}
	if took := time.Since(start); took >= 2*time.Second {
		t.Fatalf("a put and a get with a silent first endpoint took %v: the silent endpoint was waited for", took)
	}
	if got := len(f.Sessions()); got != 2 {
		t.Fatalf("the live endpoint served %d data calls, want the put and the get", got)
	}
}

// TestAllEndpointsSilent: when no endpoint answers, a command fails
// within --timeout with exit code 4 and one line naming each endpoint and
// how far its connection got.
func TestAllEndpointsSilent(t *testing.T) {
	s1, dead := clienttest.SilentAddr(t), clienttest.DeadAddr(t)
	start := time.Now()
	r := kvctl(t, "", nil, "--endpoints", s1+","+dead, "--timeout", "500ms", "get", "k")
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("get with no live endpoint and --timeout 500ms took %v", took)
	}
	if r.code != ExitUnavailable {
		t.Fatalf("exit %d (%q), want %d", r.code, r.stderr, ExitUnavailable)
	}
	checkErrLine(t, r, s1+": connecting (no answer to the connection handshake yet); "+dead+": could not connect (DeadlineExceeded)")
}

func TestCas(t *testing.T) {
	_, run := fakeKVCtl(t)
	v1 := strings.TrimSpace(mustOK(t, run("", "cas", "k", "one", "--expect-absent")).stdout)

	r := run("", "cas", "k", "two", "--expect-absent")
	if r.code != ExitConflict {
		t.Fatalf("cas --expect-absent on existing key: exit %d (%q)", r.code, r.stderr)
	}
	checkErrLine(t, r, "key exists at version "+v1)

	v2 := strings.TrimSpace(mustOK(t, run("", "cas", "k", "two", "--expect-version", v1)).stdout)
	r = run("", "-o", "json", "cas", "k", "three", "--expect-version", v1)
	if r.code != ExitConflict {
		t.Fatalf("stale cas: exit %d (%q)", r.code, r.stderr)
	}
	var doc struct {
		Swapped bool `json:"swapped"`
		Found   bool `json:"found"`
		Current struct {
			Text string `json:"text"`
		} `json:"current"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Swapped || !doc.Found || doc.Current.Text != v2 {
		t.Fatalf("conflict JSON %s (%v), want current %s", r.stdout, err, v2)
	}
	if got := mustOK(t, run("", "get", "k")).stdout; got != "two\n" {
		t.Fatalf("value after cas = %q", got)
	}
	// Value from stdin, then a delete.
	v3 := strings.TrimSpace(mustOK(t, run("three", "cas", "k", "--expect-version", v2)).stdout)
	mustOK(t, run("", "cas", "k", "--expect-version", v3, "--delete"))
	if r := run("", "get", "k"); r.code != ExitNotFound {
		t.Fatalf("get after cas --delete: exit %d", r.code)
	}
	// Expecting a version of a deleted key: NotFound, a conflict too.
	if r := run("", "cas", "k", "x", "--expect-version", v3); r.code != ExitConflict {
		t.Fatalf("cas on deleted key: exit %d (%q)", r.code, r.stderr)
	}
}

func TestScan(t *testing.T) {
	_, run := fakeKVCtl(t)
	var want strings.Builder
	for i := range 35 { // several fake pages of 10
		k, v := fmt.Sprintf("user/%03d", i), fmt.Sprintf("v%d", i)
		mustOK(t, run("", "put", k, v))
		fmt.Fprintf(&want, "%s\t%s\n", k, v)
	}
	mustOK(t, run("", "put", "other", "x"))

	if got := mustOK(t, run("", "scan", "--prefix", "user/")).stdout; got != want.String() {
		t.Fatalf("scan --prefix:\n%s\nwant:\n%s", got, want.String())
	}
	got := mustOK(t, run("", "scan", "--prefix", "user/", "--limit", "12", "--keys-only")).stdout
	if lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n"); len(lines) != 12 || lines[11] != "user/011" {
		t.Fatalf("scan --limit 12 --keys-only = %q", got)
	}
	got = mustOK(t, run("", "scan", "--start", "user/030", "--end", "user/032")).stdout
	if got != "user/030\tv30\nuser/031\tv31\n" {
		t.Fatalf("scan range = %q", got)
	}
	if got := mustOK(t, run("", "scan")).stdout; strings.Count(got, "\n") != 36 {
		t.Fatalf("scan of everything returned %d lines", strings.Count(got, "\n"))
	}
	var doc struct {
		Count int `json:"count"`
		Items []struct {
			Key   string  `json:"key"`
			Value *string `json:"value"`
		} `json:"items"`
	}
	r := mustOK(t, run("", "-o", "json", "scan", "--prefix", "user/", "--keys-only"))
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Count != 35 || len(doc.Items) != 35 || doc.Items[0].Value != nil {
		t.Fatalf("scan -o json: %v\n%s", err, r.stdout)
	}
	r = mustOK(t, run("", "-o", "json", "scan", "--prefix", "nothing/"))
	if !strings.Contains(r.stdout, `"items": []`) {
		t.Fatalf("empty scan JSON: %s", r.stdout)
	}
}

func TestHistory(t *testing.T) {
	_, run := fakeKVCtl(t)
	v1 := strings.TrimSpace(mustOK(t, run("", "put", "k", "a")).stdout)
	v2 := strings.TrimSpace(mustOK(t, run("", "del", "k")).stdout)
	v3 := strings.TrimSpace(mustOK(t, run("", "put", "k", "c")).stdout)
	got := mustOK(t, run("", "history", "k")).stdout
	if want := v3 + "\tc\n" + v2 + "\t(deleted)\n" + v1 + "\ta\n"; got != want {
		t.Fatalf("history = %q, want %q", got, want)
	}
	if got := mustOK(t, run("", "history", "k", "--limit", "1")).stdout; got != v3+"\tc\n" {
		t.Fatalf("history --limit 1 = %q", got)
	}
	if r := mustOK(t, run("", "history", "never")); r.stdout != "" {
		t.Fatalf("history of unwritten key = %q", r.stdout)
	}
	r := mustOK(t, run("", "-o", "json", "history", "k"))
	var doc struct {
		Versions []struct {
			Tombstone bool `json:"tombstone"`
		} `json:"versions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Versions) != 3 || !doc.Versions[1].Tombstone {
		t.Fatalf("history -o json: %v\n%s", err, r.stdout)
	}
}

func TestClusterStatusAndSnapshot(t *testing.T) {
	f, run := fakeKVCtl(t)
	f.AddKeyspace("users")
	r := mustOK(t, run("", "cluster", "status"))
	for _, want := range []string{"ENDPOINT", f.Addr(), clienttest.NodeID, clienttest.Site, "default,users", "STATE", "Leader", "COMMIT", "APPLIED"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("cluster status lacks %q:\n%s", want, r.stdout)
		}
	}
	r = mustOK(t, run("", "-o", "json", "cluster", "status"))
	var doc struct {
		Nodes []struct {
			NodeID string `json:"node_id"`
			Shards []struct {
				Keyspace string `json:"keyspace"`
				State    string `json:"state"`
			} `json:"shards"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Nodes) != 1 || len(doc.Nodes[0].Shards) != 2 {
		t.Fatalf("cluster status -o json: %v\n%s", err, r.stdout)
	}

	// One endpoint down: the table still shows the live one, aligned, and
	// the error below it; exit 4.
	dead := clienttest.DeadAddr(t)
	r = kvctl(t, "", nil, "--endpoints", f.Addr()+","+dead+","+f.Addr(), "--timeout", "2s", "cluster", "status")
	if r.code != ExitUnavailable || !strings.Contains(r.stdout, clienttest.NodeID) || !strings.Contains(r.stdout, "\n"+dead+": error:") {
		t.Fatalf("partial status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 4 || strings.Index(lines[1], clienttest.NodeID) != strings.Index(lines[3], clienttest.NodeID) ||
		strings.Index(lines[2], "(error)") != strings.Index(lines[1], clienttest.NodeID) {
		t.Fatalf("partial status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	checkErrLine(t, r, "1 of 3 endpoints failed; "+dead+": status: ") // not "client: status:"
	if n := strings.Count(r.stderr, "no node listens at the endpoint"); n != 1 {
		t.Errorf("the hint is given %d times: %q", n, r.stderr)
	}

	if got := mustOK(t, run("", "admin", "snapshot")).stdout; !strings.Contains(got, f.Addr()) || !strings.Contains(got, "  2\n") {
		t.Fatalf("admin snapshot (all keyspaces) = %q", got)
	}
	r = mustOK(t, run("", "-o", "json", "admin", "snapshot", "--keyspace", "users"))
	if !strings.Contains(r.stdout, `"snapshots": 1`) || !strings.Contains(r.stdout, `"keyspace": "users"`) {
		t.Fatalf("admin snapshot --keyspace users = %s", r.stdout)
	}
	r = run("", "admin", "snapshot", "--keyspace", "nope")
	if r.code != ExitNotFound {
		t.Fatalf("snapshot of unknown keyspace: exit %d", r.code)
	}
}

func TestSessionFileAcrossInvocations(t *testing.T) {
	f := clienttest.Start(t)
	path := filepath.Join(t.TempDir(), "causeway", "session")
	env := map[string]string{EnvEndpoints: f.Addr(), EnvSessionFile: path}

	put := mustOK(t, kvctl(t, "", env, "put", "k", "v"))
	v, _ := ParseVersion(strings.TrimSpace(put.stdout))
	tok, err := loadSession(path)
	if err != nil || tok == nil {
		t.Fatalf("session file after put: %q, %v", tok, err)
	}
	s, _ := causal.DecodeSession(tok)
	if floor, ok := s.Floor(client.DefaultKeyspace, []byte("k")); !ok || floor != v {
		t.Fatalf("saved session floor of k = %v, want %v", floor, v)
	}
	// The next invocation carries the saved session.
	mustOK(t, kvctl(t, "", env, "get", "k"))
	sessions := f.Sessions()
	sent, err := causal.DecodeSession(sessions[len(sessions)-1])
	if err != nil {
		t.Fatal(err)
	}
	if floor, ok := sent.Floor(client.DefaultKeyspace, []byte("k")); !ok || floor != v {
		t.Fatalf("get sent floor %v (%v), want the floor %v saved by put", floor, ok, v)
	}
	// --session-file none (or "") disables it.
	before := f.Sessions()
	mustOK(t, kvctl(t, "", env, "--session-file", "none", "get", "k"))
	mustOK(t, kvctl(t, "", env, "--session-file", "", "get", "k"))
	after := f.Sessions()
	for _, s := range after[len(before):] {
		if len(s) != 0 {
			t.Fatal("a disabled session file still sent a session")
		}
	}
	// Admin commands neither read nor write it.
	os.WriteFile(path, []byte("corrupt"), 0o600)
	mustOK(t, kvctl(t, "", env, "cluster", "status"))
}

// TestUnusableEndpointSaysWhatToDo: an endpoint where no node listens, and
// one that answers HTTP/1.1 (a node's HTTP address), fail saying what to
// check, with the exit code of an unavailable endpoint.
func TestUnusableEndpointSaysWhatToDo(t *testing.T) {
	r := kvctl(t, "", nil, "--endpoints", clienttest.DeadAddr(t), "--timeout", "2s", "get", "k")
	if r.code != ExitUnavailable {
		t.Fatalf("dead endpoint: exit %d (%q)", r.code, r.stderr)
	}
	checkErrLine(t, r, "no node listens at the endpoint: check --endpoints")

	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	r = kvctl(t, "", nil, "--endpoints", strings.TrimPrefix(web.URL, "http://"), "--timeout", "2s", "get", "k")
	if r.code != ExitUnavailable {
		t.Fatalf("HTTP endpoint: exit %d (%q)", r.code, r.stderr)
	}
	checkErrLine(t, r, "the endpoint answers HTTP/1.1, not gRPC: it may be a node's HTTP address (kvd --http-addr)")
}
