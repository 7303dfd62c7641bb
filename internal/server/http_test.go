package server

import (
	"io"
	"net/http"
	"regexp"
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

// httpDo sends a request without a body and returns the status and the
// Allow header of the answer.
func httpDo(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Allow")
}

// TestHTTPEndpoints: /metrics, /healthz and /readyz are always served, to
// GET and HEAD only (405 Method Not Allowed otherwise); the profiler only
// with Config.Pprof.
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
		if _, body := httpGet(t, base+"/metrics"); !regexp.MustCompile(`(?m)^causeway_data_dir_free_bytes [1-9]`).MatchString(body) || !regexp.MustCompile(`(?m)^causeway_data_dir_size_bytes [1-9]`).MatchString(body) {
			t.Fatalf("/metrics lacks the data directory's free and total bytes")
		}
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			if code, _ := httpDo(t, http.MethodHead, base+path); code != http.StatusOK {
				t.Fatalf("HEAD %s = %d", path, code)
			}
			for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodTrace, http.MethodOptions} {
				if code, allow := httpDo(t, method, base+path); code != http.StatusMethodNotAllowed || allow != "GET, HEAD" {
					t.Fatalf("%s %s = %d, Allow %q; want 405, Allow \"GET, HEAD\"", method, path, code, allow)
				}
			}
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
