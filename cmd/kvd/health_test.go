package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHealth: `kvd health` exits 0 on a ready node, non-zero on one not
// ready and on one that does not answer; --live asks /healthz.
func TestHealth(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			w.Write([]byte("ok\n"))
		case r.URL.Path == "/readyz" && ready.Load():
			w.Write([]byte("ready\n"))
		default:
			http.Error(w, "not ready: replaying the log", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	var out, errb bytes.Buffer
	if err := health(context.Background(), []string{"--http-addr", addr}, &out, &errb); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("not ready: %v", err)
	}
	if err := health(context.Background(), []string{"--http-addr", addr, "--live"}, &out, &errb); err != nil {
		t.Fatalf("live: %v", err)
	}
	ready.Store(true)
	if err := health(context.Background(), []string{"--http-addr", addr}, &out, &errb); err != nil {
		t.Fatalf("ready: %v", err)
	}
	srv.Close()
	if err := health(context.Background(), []string{"--http-addr", addr}, &out, &errb); err == nil {
		t.Fatal("a node that does not answer is healthy")
	}
	if err := health(context.Background(), []string{"extra"}, &out, &errb); err == nil {
		t.Fatal("an extra argument is accepted")
	}
}
