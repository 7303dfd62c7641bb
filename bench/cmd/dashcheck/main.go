// Command dashcheck checks the Grafana dashboards of deploy/grafana against
// a running Prometheus: every query of every panel must be valid PromQL
// and return data (at least one series with a value that is a number). It
// retries for up to --wait (scrapes and rate windows need time) and then
// lists every failure with its dashboard, panel, expression and
// Prometheus's error. With --png-dir it also draws the geo dashboard's key
// panels over the last minutes into PNG files.
//
//	go run ./bench/cmd/dashcheck --prometheus http://127.0.0.1:19090 \
//	    --dashboards deploy/grafana/dashboards --png-dir docs/img --wait 90s
//
// scripts/dashboards.sh (make dashboards) runs it against three loaded
// sites.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"
)

func main() {
	prom := flag.String("prometheus", "http://127.0.0.1:9090", "Prometheus base URL")
	dir := flag.String("dashboards", "deploy/grafana/dashboards", "directory of the dashboard JSON files")
	pngDir := flag.String("png-dir", "", "draw the geo dashboard's key panels into PNG files in this directory")
	wait := flag.Duration("wait", 0, "keep retrying failed queries for up to this long")
	window := flag.Duration("png-window", 4*time.Minute, "time range of the PNG panels, ending now")
	mayBeEmpty := flag.String("may-be-empty", "", "comma-separated panel titles whose queries may return no data (the load cannot produce it); they must still parse and run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, *prom, *dir, *pngDir, *wait, *window, *mayBeEmpty))
}

func run(ctx context.Context, promURL, dir, pngDir string, wait, window time.Duration, mayBeEmpty string) int {
	targets, err := LoadDashboards(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashcheck:", err)
		return 2
	}
	p := &Prometheus{URL: promURL, Client: &http.Client{Timeout: 30 * time.Second}}
	start := time.Now()
	deadline := start.Add(wait)
	pending := targets
	var failures []Failure
	for attempt := 1; ; attempt++ {
		failures = Check(ctx, p, pending)
		permanent := 0
		for _, f := range failures {
			if f.Permanent() {
				permanent++
			}
		}
		if len(failures) == 0 || permanent > 0 || ctx.Err() != nil || !time.Now().Add(5*time.Second).Before(deadline) {
			break
		}
		fmt.Printf("dashcheck: attempt %d: %d of %d queries without data yet, retrying\n", attempt, len(failures), len(targets))
		pending = pending[:0:0]
		for _, f := range failures {
			pending = append(pending, f.Target)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
	var kept []Failure
	for _, f := range failures {
		if errors.Is(f.Err, ErrNoData) && mayBeEmpty != "" && slices.Contains(strings.Split(mayBeEmpty, ","), f.Target.Panel) {
			fmt.Printf("dashcheck: no data, allowed (--may-be-empty): %s\n", f.String())
			continue
		}
		kept = append(kept, f)
	}
	failures = kept
	perDashboard := map[string]int{}
	for _, t := range targets {
		perDashboard[t.Dashboard]++
	}
	fmt.Printf("dashcheck: %d queries in %d dashboards checked against %s in %s\n",
		len(targets), len(perDashboard), promURL, time.Since(start).Round(time.Second))
	code := 0
	if len(failures) > 0 {
		fmt.Printf("dashcheck: %d queries FAILED:\n", len(failures))
		for _, f := range failures {
			fmt.Println("  " + f.String())
		}
		code = 1
	}
	if pngDir != "" {
		files, err := RenderPanels(ctx, p, targets, "geo.json", keyPanels, pngDir, window)
		for _, f := range files {
			fmt.Println("dashcheck: wrote", f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "dashcheck: png:", err)
			code = 1
		}
	}
	if code == 0 {
		fmt.Println("dashcheck: every query returned data")
	}
	return code
}
