// Command georeport turns the measurements of bench/geo-compare.sh (make
// bench-geo) into bench/results/geo-compare.md and a PNG plot: per site,
// Causeway's LOCAL put latency against a stretched etcd's, YCSB-B
// throughput and remote visibility, with the targets checked.
//
//	go run ./bench/cmd/georeport -dir data/geo-compare/results -delay 50ms \
//	    -out bench/results/geo-compare.md -plot bench/results/geo-compare.png
//
// The directory holds, for each site i (1, 2, ...), what bin/geobench
// -json and bin/ycsb run --json wrote:
//
//	causeway-single-s<i>.json  geobench -single-site at site i
//	causeway-local-s<i>.json   geobench at site i alone (the three-site keyspace, no readers)
//	causeway-put-s<i>.json     geobench at site i, the others polled
//	etcd-put-s<i>.json         geobench -system etcd at member i
//	causeway-ycsb-s<i>.json    ycsb run, YCSB-B at site i alone
//	etcd-ycsb-s<i>.json
//	causeway-ycsb-all-s<i>.json  ycsb run at site i, every site at once
//	etcd-ycsb-all-s<i>.json
//
// Missing files leave their cells empty ("–").
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/causeway-db/causeway/bench/core"
)

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, "; ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func main() {
	dir := flag.String("dir", "data/geo-compare/results", "directory of the measurements")
	sites := flag.Int("sites", 3, "number of sites")
	delay := flag.Duration("delay", 50*time.Millisecond, "one-way delay between two sites")
	title := flag.String("title", "", "report title (default: Causeway vs a stretched etcd, N sites, D one way)")
	out := flag.String("out", "bench/results/geo-compare.md", "markdown output (- for stdout)")
	plotOut := flag.String("plot", "", "PNG output")
	var notes multiFlag
	flag.Var(&notes, "note", "a line for the report's setup (repeatable)")
	flag.Parse()
	if *sites < 2 {
		fmt.Fprintln(os.Stderr, "georeport: -sites must be at least 2")
		os.Exit(2)
	}
	r, err := load(*dir, *sites)
	if err != nil {
		fmt.Fprintln(os.Stderr, "georeport:", err)
		os.Exit(1)
	}
	r.Delay = *delay
	r.Notes = notes
	r.Title = *title
	if r.Title == "" {
		r.Title = fmt.Sprintf("Causeway vs a stretched etcd: %d sites, %v one way", *sites, *delay)
	}
	if err := core.WriteFile(*out, os.Stdout, r.writeMarkdown); err != nil {
		fmt.Fprintln(os.Stderr, "georeport:", err)
		os.Exit(1)
	}
	if *plotOut != "" {
		if err := r.writePNG(*plotOut); err != nil {
			fmt.Fprintln(os.Stderr, "georeport: plot:", err)
			os.Exit(1)
		}
	}
}
