package causalcheck

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/causeway-db/causeway/internal/causal"
)

// memStore is a single-copy store: linearizable, hence causally consistent.
type memStore struct {
	mu   sync.Mutex
	hlc  uint64
	data map[string]Read
}

func (m *memStore) write(key, value string) causal.Version {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hlc++
	v := causal.Version{HLC: m.hlc, Site: "mem"}
	m.data[key] = Read{Key: key, Value: value, Version: v}
	return v
}

func (m *memStore) read(key string) Read { return m.readAll(key)[0] }

// readAll reads keys as one snapshot.
func (m *memStore) readAll(keys ...string) []Read {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Read
	for _, key := range keys {
		r, ok := m.data[key]
		if !ok {
			r = Read{Key: key}
		}
		out = append(out, r)
	}
	return out
}

func TestRecorderConcurrentClients(t *testing.T) {
	store := &memStore{data: make(map[string]Read)}
	rec := NewRecorder(nil)
	const clients, ops = 8, 300
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 3))
			session := fmt.Sprintf("c%d", c)
			for i := range ops {
				key := fmt.Sprintf("k%d", rng.IntN(6))
				switch rng.IntN(5) {
				case 0, 1:
					value := fmt.Sprintf("%s.%d", session, i)
					h := rec.Begin(session, "mem", Put, key, value)
					rec.End(h, "", store.write(key, value), OK)
				case 2:
					h := rec.Begin(session, "mem", Delete, key, "")
					rec.End(h, "", store.write(key, ""), OK)
				case 3:
					h := rec.Begin(session, "mem", Get, key, "")
					r := store.read(key)
					rec.End(h, r.Value, r.Version, OK)
				default:
					h := rec.Begin(session, "mem", GetTxn, "", "")
					rec.EndTxn(h, store.readAll(key, fmt.Sprintf("k%d", 6+rng.IntN(2))), OK)
				}
			}
		})
	}
	wg.Wait()
	h := rec.History()
	if len(h) != clients*ops {
		t.Fatalf("%d ops recorded, want %d", len(h), clients*ops)
	}
	res, err := Check(h, Final{"mem": finalOf(store)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatal(res)
	}
}

func finalOf(m *memStore) map[string]causal.Version {
	out := make(map[string]causal.Version)
	for k, r := range m.data {
		out[k] = r.Version
	}
	return out
}

func TestRecorder(t *testing.T) {
	var now int64
	rec := NewRecorder(func() int64 { now += 10; return now })
	w := rec.Begin("A", "eu", Put, "x", "1")
	rec.End(w, "ignored", ver(1), OK)
	g := rec.Begin("A", "eu", Get, "x", "")
	rec.End(g, "1", ver(1), OK)
	tx := rec.Begin("B", "us", GetTxn, "", "")
	reads := []Read{{Key: "x", Value: "1", Version: ver(1)}}
	rec.EndTxn(tx, reads, OK)
	reads[0].Value = "changed by the caller"
	open := rec.Begin("B", "us", Put, "y", "2")

	h := rec.History()
	want := []Op{
		{Session: "A", Site: "eu", Kind: Put, Key: "x", Value: "1", Version: ver(1), Start: 10, End: 20, Outcome: OK},
		{Session: "A", Site: "eu", Kind: Get, Key: "x", Value: "1", Version: ver(1), Start: 30, End: 40, Outcome: OK},
		{Session: "B", Site: "us", Kind: GetTxn, Reads: []Read{{Key: "x", Value: "1", Version: ver(1)}}, Start: 50, End: 60, Outcome: OK},
		{Session: "B", Site: "us", Kind: Put, Key: "y", Value: "2", Start: 70, End: 80, Outcome: Unknown},
	}
	if fmt.Sprint(h) != fmt.Sprint(want) {
		t.Fatalf("history\n%v\nwant\n%v", h, want)
	}
	rec.End(open, "", ver(2), OK)
	if h := rec.History(); h[3].Outcome != OK || h[3].End != 90 {
		t.Errorf("the op ended: %v", h[3])
	}
	res, err := Check(rec.History(), nil)
	if err != nil || !res.OK() {
		t.Fatal(err, res)
	}
}

func TestRecorderLogicalClock(t *testing.T) {
	rec := NewRecorder(nil)
	a := rec.Begin("A", "eu", Put, "x", "1")
	b := rec.Begin("B", "eu", Get, "x", "")
	rec.End(a, "", ver(1), OK)
	rec.End(b, "", causal.Version{}, OK)
	h := rec.History()
	if h[0].Start != 1 || h[1].Start != 2 || h[0].End != 3 || h[1].End != 4 {
		t.Errorf("logical times: %v", h)
	}
}
