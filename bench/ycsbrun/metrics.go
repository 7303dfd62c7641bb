package ycsbrun

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ServerHistograms are the Causeway server histograms a run reports, each
// with the labels it is broken down by (the others, such as the shard, are
// summed over, as are the nodes).
var ServerHistograms = []struct {
	Name string
	By   string
}{
	{"causeway_transport_rpc_seconds", "type"},
	{"causeway_storage_commit_batch_size", "db"},
	{"causeway_storage_commit_seconds", "db"},
	{"causeway_shard_apply_seconds", "result"},
}

// promHist is one histogram series summed over nodes and collapsed labels.
type promHist struct {
	buckets map[float64]float64 // upper bound -> cumulative count
	count   float64
	sum     float64
}

// MetricsSnapshot holds ServerHistograms, keyed by name + "|" + the value
// of their breakdown label, summed over every node scraped.
type MetricsSnapshot map[string]*promHist

// HistDelta summarises one server histogram over a phase: observations,
// mean and interpolated quantiles (histogram_quantile style), in the
// histogram's unit (seconds or a count).
type HistDelta struct {
	Name  string  `json:"name"`
	Label string  `json:"label"` // e.g. "type=AppendEntries"
	Count float64 `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
}

// Scrape fetches and sums ServerHistograms from every URL (Prometheus
// text exposition, for example http://127.0.0.1:7380/metrics).
func Scrape(ctx context.Context, urls []string) (MetricsSnapshot, error) {
	snap := MetricsSnapshot{}
	for _, u := range urls {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			cancel()
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("scrape %s: %w", u, err)
		}
		err = snap.add(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", u, err)
		}
	}
	return snap, nil
}

// ParseMetrics sums ServerHistograms of one text exposition into a new
// snapshot.
func ParseMetrics(r io.Reader) (MetricsSnapshot, error) {
	snap := MetricsSnapshot{}
	return snap, snap.add(r)
}

func (s MetricsSnapshot) add(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := parseSample(line)
		if err != nil {
			return err
		}
		for _, h := range ServerHistograms {
			var suffix string
			switch name {
			case h.Name + "_bucket":
				suffix = "bucket"
			case h.Name + "_sum":
				suffix = "sum"
			case h.Name + "_count":
				suffix = "count"
			default:
				continue
			}
			key := h.Name + "|" + h.By + "=" + labels[h.By]
			ph := s[key]
			if ph == nil {
				ph = &promHist{buckets: map[float64]float64{}}
				s[key] = ph
			}
			switch suffix {
			case "bucket":
				le, err := strconv.ParseFloat(labels["le"], 64)
				if err != nil {
					return fmt.Errorf("bad le in %q", line)
				}
				ph.buckets[le] += value
			case "sum":
				ph.sum += value
			case "count":
				ph.count += value
			}
		}
	}
	return sc.Err()
}

// parseSample parses `name{a="x",b="y"} value [timestamp]`.
func parseSample(line string) (string, map[string]string, float64, error) {
	labels := map[string]string{}
	var name, rest string
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return "", nil, 0, fmt.Errorf("bad sample %q", line)
	} else if line[i] == '{' {
		name = line[:i]
		j := i + 1
		for {
			for j < len(line) && (line[j] == ',' || line[j] == ' ') {
				j++
			}
			if j >= len(line) {
				return "", nil, 0, fmt.Errorf("unterminated labels in %q", line)
			}
			if line[j] == '}' {
				rest = line[j+1:]
				break
			}
			eq := strings.IndexByte(line[j:], '=')
			if eq < 0 || j+eq+1 >= len(line) || line[j+eq+1] != '"' {
				return "", nil, 0, fmt.Errorf("bad labels in %q", line)
			}
			key := line[j : j+eq]
			k := j + eq + 2
			var val strings.Builder
			for ; k < len(line) && line[k] != '"'; k++ {
				if line[k] == '\\' && k+1 < len(line) {
					k++
					switch line[k] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(line[k])
					}
					continue
				}
				val.WriteByte(line[k])
			}
			if k >= len(line) {
				return "", nil, 0, fmt.Errorf("unterminated label value in %q", line)
			}
			labels[key] = val.String()
			j = k + 1
		}
	} else {
		name, rest = line[:i], line[i:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 {
		return "", nil, 0, fmt.Errorf("no value in %q", line)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, fmt.Errorf("bad value in %q", line)
	}
	return name, labels, v, nil
}

// Diff returns the histograms' observations between before and after,
// sorted by name and label, leaving out those without any.
func Diff(before, after MetricsSnapshot) []HistDelta {
	var out []HistDelta
	for key, a := range after {
		d := &promHist{buckets: map[float64]float64{}, count: a.count, sum: a.sum}
		for le, c := range a.buckets {
			d.buckets[le] = c
		}
		if b := before[key]; b != nil {
			d.count -= b.count
			d.sum -= b.sum
			for le, c := range b.buckets {
				d.buckets[le] -= c
			}
		}
		if d.count <= 0 {
			continue
		}
		name, label, _ := strings.Cut(key, "|")
		out = append(out, HistDelta{
			Name: name, Label: label, Count: d.count, Mean: d.sum / d.count,
			P50: d.quantile(0.5), P90: d.quantile(0.9), P99: d.quantile(0.99),
		})
	}
	slices.SortFunc(out, func(x, y HistDelta) int {
		if c := strings.Compare(x.Name, y.Name); c != 0 {
			return c
		}
		return strings.Compare(x.Label, y.Label)
	})
	return out
}

// quantile interpolates linearly inside the bucket holding quantile q, as
// Prometheus's histogram_quantile does, except that a quantile in the lowest
// bucket is that bucket's upper bound (not interpolated from 0, which would
// put half of a batch-size histogram's ones at 0.5) and one in the +Inf
// bucket is the highest finite bound; 0 when empty.
func (h *promHist) quantile(q float64) float64 {
	les := make([]float64, 0, len(h.buckets))
	for le := range h.buckets {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) == 0 {
		return 0
	}
	total := h.buckets[les[len(les)-1]]
	if total <= 0 {
		return 0
	}
	rank := q * total
	prevLe, prevC := 0.0, 0.0
	for i, le := range les {
		c := h.buckets[le]
		if c >= rank && c > 0 {
			switch {
			case math.IsInf(le, 1):
				return prevLe
			case i == 0 || c == prevC:
				return le
			}
			return prevLe + (le-prevLe)*(rank-prevC)/(c-prevC)
		}
		prevLe, prevC = le, c
	}
	return prevLe
}
