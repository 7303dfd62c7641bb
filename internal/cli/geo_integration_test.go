package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/clustertest"
)

// TestIntegrationSitesAndKeyspaces runs cluster sites and keyspace
// create, list, show and set-sites against a real cluster of two sites.
func TestIntegrationSitesAndKeyspaces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two sites")
	}
	s := clustertest.NewSites(t, clustertest.SitesOptions{Sites: []string{"s1", "s2"}, NodesPerSite: 1, Shards: 2})
	env := map[string]string{EnvEndpoints: s.Site("s2").Nodes[0].Srv.ClientAddr()}
	run := func(args ...string) result {
		t.Helper()
		return kvctl(t, "", env, append([]string{"--timeout", "30s"}, args...)...)
	}

	var sites struct {
		LocalSite string `json:"local_site"`
		Sites     []struct {
			Name  string `json:"name"`
			State string `json:"state"`
			Voter bool   `json:"voter"`
			Nodes []struct {
				ID string `json:"id"`
			} `json:"nodes"`
		} `json:"sites"`
	}
	r := mustOK(t, run("-o", "json", "cluster", "sites"))
	if err := json.Unmarshal([]byte(r.stdout), &sites); err != nil {
		t.Fatalf("cluster sites -o json: %v\n%s", err, r.stdout)
	}
	if sites.LocalSite != "s2" || len(sites.Sites) != 2 || sites.Sites[0].Name != "s1" || sites.Sites[1].State != "local" ||
		!sites.Sites[0].Voter || len(sites.Sites[0].Nodes) != 1 {
		t.Fatalf("cluster sites: %s", r.stdout)
	}
	if r := mustOK(t, run("cluster", "sites")); !strings.Contains(r.stdout, "SITE") || !strings.Contains(r.stdout, "s1") {
		t.Fatalf("cluster sites: %s", r.stdout)
	}

	type keyspace struct {
		Name   string   `json:"name"`
		Shards uint32   `json:"shards"`
		Sites  []string `json:"sites"`
	}
	var ks keyspace
	r = mustOK(t, run("-o", "json", "keyspace", "create", "orders", "--sites", "s2,s1", "--shards", "3"))
	if err := json.Unmarshal([]byte(r.stdout), &ks); err != nil || ks.Shards != 3 || !slices.Equal(ks.Sites, []string{"s2", "s1"}) {
		t.Fatalf("keyspace create: %v %s", err, r.stdout)
	}
	if r := run("keyspace", "create", "orders", "--sites", "s1"); r.code == ExitOK || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("second create: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run("keyspace", "create", "bad", "--sites", "nowhere"); r.code == ExitOK || !strings.Contains(r.stderr, "nowhere") {
		t.Fatalf("create on an unknown site: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run("keyspace", "create", "nosites"); r.code != ExitUsage {
		t.Fatalf("create without --sites: exit %d, stderr %q", r.code, r.stderr)
	}

	var list []keyspace
	r = mustOK(t, run("-o", "json", "keyspace", "list"))
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 || list[0].Name != "default" || list[1].Name != "orders" ||
		!slices.Equal(list[0].Sites, []string{"s1", "s2"}) {
		t.Fatalf("keyspace list: %v %s", err, r.stdout)
	}
	if r := mustOK(t, run("keyspace", "show", "orders")); !strings.Contains(r.stdout, "s2,s1") {
		t.Fatalf("keyspace show: %s", r.stdout)
	}
	if r := run("keyspace", "show", "missing"); r.code == ExitOK {
		t.Fatalf("show of a missing keyspace: exit %d", r.code)
	}
	r = mustOK(t, run("-o", "json", "keyspace", "set-sites", "orders", "--sites", "s1"))
	if err := json.Unmarshal([]byte(r.stdout), &ks); err != nil || !slices.Equal(ks.Sites, []string{"s1"}) {
		t.Fatalf("keyspace set-sites: %v %s", err, r.stdout)
	}
	if r := run("keyspace", "set-sites", "default", "--sites", "s1"); r.code == ExitOK {
		t.Fatalf("set-sites of the default keyspace: exit %d", r.code)
	}

	// site remove: a dry run without --force; refused for a site that
	// answers, the asking node's own and an unknown one.
	r = run("site", "remove", "s1")
	if r.code != ExitNotForced || !strings.Contains(r.stdout, "dry run: removing site s1") || !strings.Contains(r.stdout, "refused as things are") ||
		!strings.Contains(r.stderr, "run again with --force") {
		t.Fatalf("site remove without --force: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run("site", "remove", "s1", "--force"); r.code != ExitError || !strings.Contains(r.stderr, "answers") {
		t.Fatalf("site remove of a site that answers: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run("site", "remove", "s2", "--force"); r.code != ExitError || !strings.Contains(r.stderr, "own site") {
		t.Fatalf("site remove of the asking node's own site: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"site", "remove", "s9"}, {"site", "remove", "s9", "--force"}} {
		if r := run(args...); r.code != ExitNotFound {
			t.Fatalf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if r := run("site", "remove"); r.code != ExitUsage {
		t.Fatalf("site remove without a site: exit %d", r.code)
	}
}

// TestIntegrationRepairAndDurability runs cluster repair (progress lines
// per shard and site, then a total) and put --durability sites=N against
// two sites.
func TestIntegrationRepairAndDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two sites")
	}
	s := clustertest.NewSites(t, clustertest.SitesOptions{Sites: []string{"s1", "s2"}, NodesPerSite: 1, Shards: 2})
	env := map[string]string{EnvEndpoints: s.Site("s1").Nodes[0].Srv.ClientAddr()}
	run := func(args ...string) result {
		t.Helper()
		return kvctl(t, "", env, args...)
	}
	mustOK(t, run("--timeout", "30s", "put", "--durability", "sites=2", "k", "v"))
	if r := run("put", "--durability", "sites=3", "k", "v"); r.code == ExitOK || !strings.Contains(r.stderr, "SITES(3)") {
		t.Fatalf("put sites=3 on two sites: exit %d, stderr %q", r.code, r.stderr)
	}
	r := mustOK(t, run("cluster", "repair"))
	if !strings.Contains(r.stdout, "default/0 -> s2") || !strings.Contains(r.stdout, "default/1 -> s2") || !strings.Contains(r.stdout, "repaired 2 shard-site pairs") {
		t.Fatalf("cluster repair: %s", r.stdout)
	}
	r = mustOK(t, run("cluster", "repair", "--keyspace", "default", "--shard", "1"))
	if strings.Contains(r.stdout, "default/0") || !strings.Contains(r.stdout, "[1/1] default/1 -> s2") {
		t.Fatalf("cluster repair --shard 1: %s", r.stdout)
	}
	if r := run("cluster", "repair", "--shard", "1"); r.code != ExitUsage {
		t.Fatalf("repair --shard without --keyspace: exit %d", r.code)
	}
	// An unknown keyspace is NotFound, as for every other command.
	if r := run("cluster", "repair", "--keyspace", "nope"); r.code != ExitNotFound || !strings.Contains(r.stderr, `unknown keyspace "nope" (NotFound)`) {
		t.Fatalf("repair of an unknown keyspace: exit %d, stderr %q", r.code, r.stderr)
	}
	mustOK(t, run("keyspace", "create", "orders", "--shards", "1", "--sites", "s1,s2"))
	// A site that cannot be reached: the pairs fail, and the exit code
	// says so.
	s.Cut("s2")
	r = run("--timeout", "60s", "cluster", "repair")
	if r.code != ExitUnavailable || !strings.Contains(r.stdout, "-> s2: failed:") || !strings.Contains(r.stdout, "3 failed") ||
		!strings.Contains(r.stderr, "3 shard-site pairs could not be repaired") {
		t.Fatalf("cluster repair with s2 cut off: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A write that needs every site while one is cut off commits here and
	// says so: not lost, not confirmed.
	r = run("--timeout", "3s", "put", "--durability", "all", "cut", "v")
	if r.code == ExitOK || !strings.Contains(r.stderr, "committed and applied at site s1") || !strings.Contains(r.stderr, "not lost") {
		t.Fatalf("put --durability all with s2 cut off: exit %d, stderr %q", r.code, r.stderr)
	}
	t.Logf("put --durability all with s2 cut off: exit %d: %s", r.code, r.stderr)
	// A configuration change needs a majority of sites: s1 alone says so
	// before the command's deadline.
	r = run("--timeout", "3s", "keyspace", "set-sites", "orders", "--sites", "s2,s1")
	if r.code != ExitUnavailable || !strings.Contains(r.stderr, "a majority of sites must be reachable") {
		t.Fatalf("set-sites with s2 cut off: exit %d, stderr %q", r.code, r.stderr)
	}
	s.Heal()
}

// TestIntegrationSessionFileMovesSites: kvctl's session file carries the
// session from one site to another: a value put at s1 is read at s2 right
// away (the read waits for s2 to apply it), alone and with txn-get.
func TestIntegrationSessionFileMovesSites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two sites")
	}
	s := clustertest.NewSites(t, clustertest.SitesOptions{Sites: []string{"s1", "s2"}, NodesPerSite: 1, Shards: 2})
	session := filepath.Join(t.TempDir(), "session")
	at := func(site string) map[string]string {
		return map[string]string{EnvEndpoints: s.Site(site).Nodes[0].Srv.ClientAddr(), EnvSessionFile: session}
	}
	for i := range 5 {
		k1, k2 := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		mustOK(t, kvctl(t, "", at("s1"), "put", k1, "v1"))
		mustOK(t, kvctl(t, "", at("s1"), "put", k2, "v2"))
		if r := mustOK(t, kvctl(t, "", at("s2"), "--timeout", "30s", "get", k2)); r.stdout != "v2\n" {
			t.Fatalf("get %s at s2 after the put at s1: %q", k2, r.stdout)
		}
		if r := mustOK(t, kvctl(t, "", at("s2"), "txn-get", k1, k2)); r.stdout != k1+"\tv1\n"+k2+"\tv2\n" {
			t.Fatalf("txn-get at s2: %q", r.stdout)
		}
	}
	if r := kvctl(t, "", at("s2"), "txn-get", "a0", "missing"); r.code != ExitNotFound || r.stdout != "a0\tv1\n" {
		t.Fatalf("txn-get with a missing key: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestIntegrationSessionFileMovesBack moves a kvctl session file from s1
// to s2 and back: the file must name the site that served the session
// last, so that s1 waits for what the session wrote at s2. With s1 cut
// off from s2, the read at s1 must be refused as unavailable (the site
// has not applied the session's past), never answer "not found".
func TestIntegrationSessionFileMovesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two sites")
	}
	s := clustertest.NewSites(t, clustertest.SitesOptions{Sites: []string{"s1", "s2"}, NodesPerSite: 1, Shards: 2})
	session := filepath.Join(t.TempDir(), "session")
	at := func(site string) map[string]string {
		return map[string]string{EnvEndpoints: s.Site(site).Nodes[0].Srv.ClientAddr(), EnvSessionFile: session}
	}
	mustOK(t, kvctl(t, "", at("s1"), "put", "a", "v1"))
	if r := mustOK(t, kvctl(t, "", at("s2"), "--timeout", "30s", "get", "a")); r.stdout != "v1\n" {
		t.Fatalf("get a at s2 after the put at s1: %q", r.stdout)
	}
	s.Net.PartitionSites("s1", "s2")
	mustOK(t, kvctl(t, "", at("s2"), "put", "b", "v2"))
	tok, err := loadSession(session)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := causal.DecodeSession(tok)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Site != "s2" {
		t.Fatalf("the session file after a put at s2 names site %q; want s2, the site that served it last", sess.Site)
	}
	if r := kvctl(t, "", at("s1"), "--timeout", "3s", "get", "b"); r.code != ExitUnavailable || !strings.Contains(r.stderr, "causal past") {
		t.Fatalf("get b at s1, cut off from s2 where the session wrote it: exit %d, stdout %q, stderr %q; want exit %d, the site has not applied the session's causal past",
			r.code, r.stdout, r.stderr, ExitUnavailable)
	}
	s.Net.Heal()
	if r := mustOK(t, kvctl(t, "", at("s1"), "--timeout", "30s", "get", "b")); r.stdout != "v2\n" {
		t.Fatalf("get b at s1 after the heal: %q", r.stdout)
	}
}
