package faultnet

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestParseWAN(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		spec string
		want map[[2]string]Rule // checked pairs
	}{
		{"s1-s2=50ms±5ms,s1-s3=80ms,*=40ms", map[[2]string]Rule{
			{"s1", "s2"}: {Delay: 50 * ms, Jitter: 5 * ms},
			{"s2", "s1"}: {Delay: 50 * ms, Jitter: 5 * ms},
			{"s3", "s1"}: {Delay: 80 * ms},
			{"s2", "s3"}: {Delay: 40 * ms},
			{"s9", "s8"}: {Delay: 40 * ms},
			{"s1", "s1"}: {},
		}},
		{" us-east/eu-west = 1.5s +- 20ms ", map[[2]string]Rule{
			{"eu-west", "us-east"}: {Delay: 1500 * ms, Jitter: 20 * ms},
			{"us-east", "ap"}:      {},
		}},
		{"*=30ms", map[[2]string]Rule{
			{"a", "b"}: {Delay: 30 * ms},
			{"a", "a"}: {},
		}},
		{"a-b=0s", map[[2]string]Rule{{"a", "b"}: {}}},
	} {
		w, err := ParseWAN(tc.spec)
		if err != nil {
			t.Fatalf("ParseWAN(%q): %v", tc.spec, err)
		}
		for p, want := range tc.want {
			if got := w.Rule(p[0], p[1]); got != want {
				t.Errorf("ParseWAN(%q).Rule(%s, %s) = %+v, want %+v", tc.spec, p[0], p[1], got, want)
			}
		}
		again, err := ParseWAN(w.String())
		if err != nil || again.String() != w.String() {
			t.Errorf("String of %q = %q does not parse back: %v", tc.spec, w.String(), err)
		}
	}
}

func TestParseWANErrors(t *testing.T) {
	for _, spec := range []string{
		"", " ", ",", "s1-s2=50ms,", "s1-s2", "=50ms", "s1-s2=", "s1-s2=fast",
		"s1-s2=-5ms", "s1-s2=50ms±", "s1-s2=50ms±-1ms", "s1-s2=50ms±x", "s1-s2=2h",
		"s1=50ms", "s1-s1=5ms", "s1-s2-s3=5ms", "a/b/c=5ms", "-s2=5ms", "s1/=5ms",
		"*-s2=5ms", "*=5ms,*=6ms", "s1-s2=5ms,s2/s1=6ms", "s1-s2=5ms=6ms", "s1-s2=5ms±1ms±2ms",
		"s1-s2=50", "\x00=\xff", "±=±", "*=+-", "S1-S2=5ms", "s1-site_2=5ms",
	} {
		w, err := ParseWAN(spec)
		if err == nil {
			t.Errorf("ParseWAN(%q) = %v, want an error", spec, w)
			continue
		}
		if !errors.Is(err, ErrBadWAN) {
			t.Errorf("ParseWAN(%q): error %v is not ErrBadWAN", spec, err)
		}
	}
}

func FuzzParseWAN(f *testing.F) {
	for _, s := range []string{"s1-s2=50ms±5ms,s1-s3=80ms,*=40ms", "a/b=1s+-1ms", "*=0", "x-y=", "±"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		w, err := ParseWAN(spec)
		if err != nil {
			return
		}
		again, err := ParseWAN(w.String())
		if w.String() != "" && (err != nil || again.String() != w.String()) {
			t.Fatalf("ParseWAN(%q): String %q does not parse back: %v", spec, w.String(), err)
		}
	})
}

// A WAN delays traffic between sites, both ways, and not inside a site.
func TestSetWAN(t *testing.T) {
	n := New(DefaultConfig(5))
	w, err := ParseWAN("*=20ms")
	if err != nil {
		t.Fatal(err)
	}
	n.SetWAN(w)
	remote, local := echoServer(t), echoServer(t)
	h := n.Host(epA, nil)
	// Registered after the WAN was set: it applies all the same.
	n.Register(remote, epC)
	n.Register(local, epB)
	if d := roundTrip(t, dial(t, h, remote), []byte("x")); d < 40*time.Millisecond {
		t.Fatalf("round trip to another site %v: below the 40ms of the WAN", d)
	}
	if r, _, _ := n.rule(epA, local); !r.healthy() {
		t.Fatalf("rule inside a site: %+v, want none", r)
	}
}

// IsolateFromSite cuts one node from every node of a site, both ways,
// until HealIsolation; the partitioned gauge and the cut messages show it.
func TestIsolateFromSite(t *testing.T) {
	n := New(DefaultConfig(6))
	addr := echoServer(t)
	n.Register(addr, epC)
	reg := prometheus.NewRegistry()
	h := n.Host(epA, reg)
	other := n.Host(epB, nil)
	c := dial(t, h, addr)
	roundTrip(t, c, []byte("before"))

	h.IsolateFromSite("s2")
	if got := h.IsolatedSites(); !slices.Equal(got, []string{"s2"}) {
		t.Fatalf("IsolatedSites = %v", got)
	}
	if _, err := h.Dial(context.Background(), addr); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("dial to an isolated site: %v", err)
	}
	if r, _ := n.ruleFrom(addr, epA); !r.Down {
		t.Fatalf("rule from the isolated site: %+v, want down", r)
	}
	// Another node of the same site is not cut off.
	dial(t, other, addr)
	if _, err := c.Write([]byte("during")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if k, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from an isolated site: %d bytes, %v", k, err)
	}
	if v := testutil.ToFloat64(h.metrics.messages.WithLabelValues("s2", faultCut)); v < 1 {
		t.Fatalf("cut messages to s2: %v", v)
	}
	const gauge = `
# HELP causeway_faultnet_partitioned 1 while the node is cut off from every node of the site (kvctl debug partition), else 0.
# TYPE causeway_faultnet_partitioned gauge
causeway_faultnet_partitioned{site="s2"} %d
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.ReplaceAll(gauge, "%d", "1")), "causeway_faultnet_partitioned"); err != nil {
		t.Fatal(err)
	}

	h.HealIsolation()
	if got := h.IsolatedSites(); len(got) != 0 {
		t.Fatalf("IsolatedSites after heal = %v", got)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "during" {
		t.Fatalf("after healing: %q, %v", buf, err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.ReplaceAll(gauge, "%d", "0")), "causeway_faultnet_partitioned"); err != nil {
		t.Fatal(err)
	}
}
