package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseDefaultsFlagsAndEnv(t *testing.T) {
	cfg, _, _, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Site != "local" || cfg.DataDir != "data" || cfg.ClientAddr != "127.0.0.1:7379" || cfg.HTTPAddr != "127.0.0.1:7380" || cfg.Shards != 16 {
		t.Fatalf("defaults = %+v", cfg)
	}
	t.Setenv("CAUSEWAY_SITE", "eu-west")
	t.Setenv("CAUSEWAY_DATA_DIR", "/from/env")
	t.Setenv("CAUSEWAY_VERSION_RETENTION", "5m")
	cfg, _, _, err = parse([]string{"--data-dir", "/from/flag"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Site != "eu-west" || cfg.DataDir != "/from/flag" || cfg.Shard.VersionRetention != 5*time.Minute {
		t.Fatalf("env/flag precedence: site %q dir %q retention %v", cfg.Site, cfg.DataDir, cfg.Shard.VersionRetention)
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--shards", "abc"}, "", "invalid value"},
		{[]string{"--log-level", "loud"}, "", "--log-level"},
		{[]string{"--log-format", "xml"}, "", "--log-format"},
		{[]string{"stray"}, "", "unexpected arguments"},
		{nil, "CAUSEWAY_MAX_VALUE_BYTES=lots", "CAUSEWAY_MAX_VALUE_BYTES"},
	} {
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		_, _, _, err := parse(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parse(%q, %s) = %v, want error containing %q", c.args, c.env, err, c.want)
		}
	}
	if _, _, _, err := parse([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	for _, args := range [][]string{
		{"--site", "Bad Site"},
		{"--shards", "0"},
		{"--replicas", "0"},
		{"--client-addr", "nope"},
		{"--recover-catalog", "n1"},
		{"--recover-catalog", "n2,Bad Id"},
		{"--simulate-wan", "s1-s2=fast"},
		{"--join", "garbage"},
		{"--join", "127.0.0.1:7382,:7392"},
		{"--join-cluster", "host:0"},
		// Both: the node would register a site with the cluster, then wait
		// for the site's gossip.
		{"--join", "127.0.0.1:1", "--join-cluster", "127.0.0.1:1", "--client-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
			"--peer-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"},
	} {
		err := run(t.Context(), append(args, "--data-dir", t.TempDir()), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "invalid configuration") {
			t.Errorf("run(%q) = %v", args, err)
		}
	}
}

// TestDurationFlagsAreValidated: the waits must be positive; intervals and
// the retention may be 0 (off, or keep nothing) but not negative.
func TestDurationFlagsAreValidated(t *testing.T) {
	for _, c := range []struct {
		flag, value string
		want        string // "" for accepted
	}{
		{"--session-move-wait", "-1s", "session move wait must be positive"},
		{"--session-move-wait", "0", "session move wait must be positive"},
		{"--session-move-wait", "1ms", ""},
		{"--causal-wait", "-1s", "causal wait must be positive"},
		{"--causal-wait", "0", "causal wait must be positive"},
		{"--dead-grace", "0", "dead grace must be positive"},
		{"--version-retention", "-1s", "version retention -1s must not be negative"},
		{"--version-retention", "0", ""},
		{"--gc-interval", "-1s", "gc interval -1s must not be negative"},
		{"--gc-interval", "0", ""},
		{"--digest-interval", "-1s", "digest interval -1s must not be negative"},
		{"--snapshot-threshold", "0", "snapshot threshold must be positive"},
		{"--snapshot-threshold", "1", ""},
		{"--digest-interval", "0", ""},
	} {
		cfg, _, _, err := parse([]string{c.flag, c.value}, io.Discard)
		if err != nil {
			t.Fatalf("parse(%s %s): %v", c.flag, c.value, err)
		}
		err = cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s %s: Validate() = %v, want %q", c.flag, c.value, err, c.want)
		}
	}
}

func TestParseFaultFlags(t *testing.T) {
	cfg, _, _, err := parse([]string{"--simulate-wan", "s1-s2=50ms±5ms,*=40ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SimulateWAN != "s1-s2=50ms±5ms,*=40ms" || cfg.DebugFaults {
		t.Fatalf("--simulate-wan: %q, debug faults %v", cfg.SimulateWAN, cfg.DebugFaults)
	}
	t.Setenv("CAUSEWAY_SIMULATE_WAN", "*=10ms")
	t.Setenv("CAUSEWAY_DEBUG_FAULTS", "true")
	if cfg, _, _, err = parse(nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	if cfg.SimulateWAN != "*=10ms" || !cfg.DebugFaults {
		t.Fatalf("from the environment: %q, debug faults %v", cfg.SimulateWAN, cfg.DebugFaults)
	}
}

func TestParseRecoverCatalog(t *testing.T) {
	cfg, _, _, err := parse([]string{"--recover-catalog", "n2, n3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.RecoverCatalog, ",") != "n2,n3" {
		t.Fatalf("--recover-catalog n2, n3 = %q", cfg.RecoverCatalog)
	}
	if cfg, _, _, _ := parse(nil, io.Discard); cfg.RecoverCatalog != nil {
		t.Fatalf("no --recover-catalog = %q", cfg.RecoverCatalog)
	}
}

// TestRecoverCatalogWithoutState: a node with no catalog has nothing to
// recover from, and does not start.
func TestRecoverCatalogWithoutState(t *testing.T) {
	err := run(t.Context(), []string{"--data-dir", t.TempDir(), "--recover-catalog", "n2,n3",
		"--client-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no catalog state") {
		t.Fatalf("run with --recover-catalog on an empty data dir = %v", err)
	}
}

// TestGCPercentFlag: kvd's garbage collection target defaults to
// defaultGCPercent unless GOGC is set; the flag and CAUSEWAY_GC_PERCENT
// override both.
func TestGCPercentFlag(t *testing.T) {
	_, _, gc, err := parse(nil, io.Discard)
	if err != nil || gc.percent != defaultGCPercent || gc.set {
		t.Fatalf("default: %+v, %v", gc, err)
	}
	if _, _, gc, err = parse([]string{"--gc-percent", "150"}, io.Discard); err != nil || gc.percent != 150 || !gc.set {
		t.Fatalf("--gc-percent 150: %+v, %v", gc, err)
	}
	t.Setenv("CAUSEWAY_GC_PERCENT", "200")
	if _, _, gc, err = parse(nil, io.Discard); err != nil || gc.percent != 200 || !gc.set {
		t.Fatalf("CAUSEWAY_GC_PERCENT=200: %+v, %v", gc, err)
	}
	if _, _, _, err = parse([]string{"--gc-percent", "-5"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--gc-percent") {
		t.Fatalf("--gc-percent -5: %v, want an error naming the flag", err)
	}
	t.Setenv("CAUSEWAY_GC_PERCENT", "lots")
	if _, _, _, err = parse(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "CAUSEWAY_GC_PERCENT") {
		t.Fatalf("CAUSEWAY_GC_PERCENT=lots: %v, want an error naming the variable", err)
	}
}
