package membership

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestStrangerLinesAreRateLimited: memberlist's line for a connection that
// does not speak gossip is logged once per interval at WARN, with the
// count left out; other lines pass as they are.
func TestStrangerLinesAreRateLimited(t *testing.T) {
	var out, warn bytes.Buffer
	f := &strangerFilter{out: &out, log: slog.New(slog.NewTextHandler(&warn, nil)), interval: time.Hour}
	for range 500 {
		if _, err := f.Write([]byte("[ERR] memberlist: Received invalid msgType (80) from=127.0.0.1:5555\n")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Write([]byte("[INFO] memberlist: Marking n2 as failed\n")); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(warn.String(), "does not speak gossip"); n != 1 {
		t.Fatalf("%d stranger lines logged for 500 connections, want 1:\n%s", n, warn.String())
	}
	if strings.Contains(warn.String(), "level=ERROR") {
		t.Fatalf("a stranger is logged as an error: %s", warn.String())
	}
	if !strings.Contains(out.String(), "Marking n2 as failed") || strings.Contains(out.String(), "invalid msgType") {
		t.Fatalf("passed on: %q", out.String())
	}
}
