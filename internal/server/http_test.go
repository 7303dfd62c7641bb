package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestHTTPEndpoints: /metrics, /healthz and /readyz are always served; the
// profiler only with Config.Pprof.
func TestHTTPEndpoints(t *testing.T) {
	for _, pprofOn := range []bool{false, true} {
		cfg := testConfig(t.TempDir())
		cfg.Pprof = pprofOn
		n := start(t, cfg)
		base := "http://" + n.srv.HTTPAddr()
		if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
			t.Fatalf("/healthz = %d %q", code, body)
		}
		if code, _ := httpGet(t, base+"/readyz"); code != http.StatusOK {
			t.Fatalf("/readyz = %d", code)
		}
		if code, body := httpGet(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "causeway_shard_leader_checks_total") {
			t.Fatalf("/metrics = %d, leader check counter missing", code)
		}
		code, body := httpGet(t, base+"/debug/pprof/cmdline")
		if pprofOn && code != http.StatusOK {
			t.Fatalf("pprof on: /debug/pprof/cmdline = %d %q", code, body)
		}
		if !pprofOn && code != http.StatusNotFound {
			t.Fatalf("pprof off: /debug/pprof/cmdline = %d, want 404", code)
		}
	}
}
