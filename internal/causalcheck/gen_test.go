package causalcheck

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/causeway-db/causeway/internal/causal"
)

// genConfig shapes a generated history.
type genConfig struct {
	seed     uint64
	ops      int
	sessions int
	keys     int
	sites    int
	reads    float64 // share of ops that read
	txns     float64 // share of reads that are GetTxn
	deletes  float64 // share of writes that delete
	unknown  float64 // share of writes of unknown outcome; half of them take effect
	failed   float64 // share of ops that fail
	migrate  float64 // chance that a session moves to another site before an op
	progress int     // most log entries a site applies per op
}

func (c genConfig) String() string {
	return fmt.Sprintf("seed=%d ops=%d sessions=%d keys=%d sites=%d", c.seed, c.ops, c.sessions, c.keys, c.sites)
}

var benchConfig = genConfig{
	seed: 1, ops: 100_000, sessions: 50, keys: 1000, sites: 3,
	reads: 0.5, txns: 0.1, deletes: 0.1, unknown: 0.01, failed: 0.01, migrate: 0.01, progress: 6,
}

// gen is a simulated causal store: sites replicate one log of writes, each
// applying a prefix of it (and its own writes at once), which keeps every
// site's state causally closed; a site resolves concurrent writes of a key
// by last-writer-wins, and its clock makes a write newer than everything the
// site applied. A session reads and writes at one site, and a site it moves
// to first applies everything the session saw.
type gen struct {
	cfg   genConfig
	rng   *rand.Rand
	log   []genWrite
	sites []*genSite
	ops   []Op

	// staleable are the successful Gets of a key that their session had
	// written or read at a non-zero version before: returning the key as
	// missing must be a violation.
	staleable []int
}

type genWrite struct {
	key   int
	value string
	ver   causal.Version
}

type genSite struct {
	name    string
	clock   uint64
	applied int   // prefix of the log applied
	store   []int // key -> newest log entry applied, -1 if none
}

type genSession struct {
	name string
	site *genSite
	dep  int          // newest log entry the session saw
	seen map[int]bool // keys it wrote or read at a non-zero version
}

// generate returns a causally consistent history and the final state of
// every site once replication is complete.
func generate(cfg genConfig) (*gen, Final) {
	g := &gen{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, 0x5eed))}
	for i := range cfg.sites {
		s := &genSite{name: fmt.Sprintf("site%d", i), store: make([]int, cfg.keys)}
		for k := range s.store {
			s.store[k] = -1
		}
		g.sites = append(g.sites, s)
	}
	sessions := make([]*genSession, cfg.sessions)
	for i := range sessions {
		sessions[i] = &genSession{name: fmt.Sprintf("s%d", i), site: g.sites[i%cfg.sites], dep: -1, seen: make(map[int]bool)}
	}
	for step := range cfg.ops {
		site := g.sites[g.rng.IntN(len(g.sites))]
		g.advance(site, site.applied+g.rng.IntN(cfg.progress+1))
		s := sessions[g.rng.IntN(len(sessions))]
		if g.rng.Float64() < cfg.migrate {
			s.site = g.sites[g.rng.IntN(len(g.sites))]
			g.advance(s.site, s.dep+1)
		}
		op := Op{Session: s.name, Site: s.site.name, Start: int64(step) * 100, End: int64(step)*100 + 50, Outcome: OK}
		if g.rng.Float64() < cfg.reads {
			g.read(s, op)
		} else {
			g.write(s, op, step)
		}
	}
	final := make(Final)
	for _, site := range g.sites {
		g.advance(site, len(g.log))
		m := make(map[string]causal.Version)
		for k, e := range site.store {
			if e >= 0 {
				m[keyName(k)] = g.log[e].ver
			}
		}
		final[site.name] = m
	}
	return g, final
}

func keyName(k int) string { return fmt.Sprintf("k%d", k) }

func (g *gen) advance(site *genSite, to int) {
	to = min(to, len(g.log))
	for ; site.applied < to; site.applied++ {
		g.apply(site, site.applied)
	}
}

func (g *gen) apply(site *genSite, e int) {
	w := g.log[e]
	if cur := site.store[w.key]; cur < 0 || g.log[cur].ver.Less(w.ver) {
		site.store[w.key] = e
	}
	site.clock = max(site.clock, w.ver.HLC)
}

// lookup returns what the session's site holds for key k.
func (g *gen) lookup(s *genSession, k int) Read {
	r := Read{Key: keyName(k)}
	if e := s.site.store[k]; e >= 0 {
		r.Value, r.Version = g.log[e].value, g.log[e].ver
		s.dep = max(s.dep, e)
	}
	return r
}

func (g *gen) read(s *genSession, op Op) {
	if g.rng.Float64() < g.cfg.txns {
		op.Kind = GetTxn
		if g.rng.Float64() < g.cfg.failed {
			op.Outcome = Failed
		} else {
			keys := make(map[int]bool)
			for n := min(2+g.rng.IntN(3), g.cfg.keys); len(keys) < n; {
				keys[g.rng.IntN(g.cfg.keys)] = true
			}
			for _, k := range slices.Sorted(maps.Keys(keys)) {
				r := g.lookup(s, k)
				op.Reads = append(op.Reads, r)
				if !r.Version.IsZero() {
					s.seen[k] = true
				}
			}
		}
		g.ops = append(g.ops, op)
		return
	}
	k := g.rng.IntN(g.cfg.keys)
	op.Kind, op.Key = Get, keyName(k)
	if g.rng.Float64() < g.cfg.failed {
		op.Outcome = Failed
	} else {
		if s.seen[k] {
			g.staleable = append(g.staleable, len(g.ops))
		}
		r := g.lookup(s, k)
		op.Value, op.Version = r.Value, r.Version
		if !r.Version.IsZero() {
			s.seen[k] = true
		}
	}
	g.ops = append(g.ops, op)
}

func (g *gen) write(s *genSession, op Op, step int) {
	k := g.rng.IntN(g.cfg.keys)
	op.Kind, op.Key = Put, keyName(k)
	op.Value = fmt.Sprintf("%s.%d", s.name, step)
	if g.rng.Float64() < g.cfg.deletes {
		op.Kind, op.Value = Delete, ""
	}
	switch p := g.rng.Float64(); {
	case p < g.cfg.failed:
		op.Outcome = Failed
	case p < g.cfg.failed+g.cfg.unknown:
		op.Outcome = Unknown
		if g.rng.IntN(2) == 0 {
			g.commit(s, k, op.Value, step)
		}
	default:
		op.Version = g.commit(s, k, op.Value, step)
		s.dep = len(g.log) - 1
		s.seen[k] = true
	}
	g.ops = append(g.ops, op)
}

// commit writes key k at the session's site and returns the new version.
func (g *gen) commit(s *genSession, k int, value string, step int) causal.Version {
	site := s.site
	site.clock = max(site.clock+1, causal.MakeHLC(uint64(step), 0))
	v := causal.Version{HLC: site.clock, Site: site.name}
	g.log = append(g.log, genWrite{key: k, value: value, ver: v})
	g.apply(site, len(g.log)-1)
	return v
}

func TestGeneratedHistories(t *testing.T) {
	for seed := range uint64(40) {
		cfg := genConfig{
			seed: seed, ops: 400 + int(seed)*50, sessions: 2 + int(seed%7), keys: 3 + int(seed%10), sites: 1 + int(seed%3),
			reads: 0.5, txns: 0.2, deletes: 0.15, unknown: 0.1, failed: 0.05, migrate: 0.05, progress: 1 + int(seed%4),
		}
		g, final := generate(cfg)
		res, err := Check(g.ops, final)
		if err != nil {
			t.Fatalf("%v: %v", cfg, err)
		}
		if !res.OK() {
			t.Fatalf("%v: a causally consistent history fails:\n%s", cfg, res)
		}
		if len(g.staleable) == 0 {
			continue
		}

		// One stale read.
		rng := rand.New(rand.NewPCG(seed, 1))
		stale := g.staleable[rng.IntN(len(g.staleable))]
		h := append([]Op(nil), g.ops...)
		h[stale].Value, h[stale].Version = "", causal.Version{}
		res, err = Check(h, nil)
		if err != nil {
			t.Fatalf("%v: %v", cfg, err)
		}
		if !caught(res, stale, ReadYourWrites, MonotonicReads, Causal) {
			t.Errorf("%v: the stale read #%d is not reported:\n%s", cfg, stale, res)
		}

		// One replica that lost a key a successful write wrote.
		written := make(map[causal.Version]bool)
		for _, o := range g.ops {
			if o.Kind.isWrite() && o.Outcome == OK {
				written[o.Version] = true
			}
		}
		keys := slices.Sorted(maps.Keys(final["site0"]))
		i := slices.IndexFunc(keys, func(k string) bool { return written[final["site0"][k]] })
		if i < 0 {
			continue
		}
		lost := maps.Clone(final)
		lost["site0"] = maps.Clone(final["site0"])
		delete(lost["site0"], keys[i])
		res, err = Check(g.ops, lost)
		if err != nil {
			t.Fatal(err)
		}
		if res.Counts[LostWrite] == 0 {
			t.Errorf("%v: site0 lost %s unreported:\n%s", cfg, keys[i], res)
		}
	}
}

// caught reports whether res lists a violation of one of kinds whose
// offending op is op.
func caught(res Result, op int, kinds ...ViolationKind) bool {
	for _, v := range res.Violations {
		for _, k := range kinds {
			if v.Kind == k && v.Ops[len(v.Ops)-1] == op {
				return true
			}
		}
	}
	return false
}

func TestGeneratedHistory100k(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	g, final := generate(benchConfig)
	res, err := Check(g.ops, final)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("%v: %s", benchConfig, res)
	}
}

// BenchmarkCheck100k checks a causally consistent history of 100,000 ops:
// 50 sessions on 3 sites, 1,000 keys, half reads (a tenth of them GetTxn).
func BenchmarkCheck100k(b *testing.B) {
	g, final := generate(benchConfig)
	for b.Loop() {
		res, err := Check(g.ops, final)
		if err != nil || !res.OK() {
			b.Fatalf("%v %s", err, res)
		}
	}
}
