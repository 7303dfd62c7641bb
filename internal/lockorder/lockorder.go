// Package lockorder holds a mutex that checks, in tests, the order in
// which a goroutine takes locks. Each Mutex has a rank; a goroutine that
// holds a lock may take only locks of a higher rank. A total order of
// ranks rules out lock-order deadlocks, which otherwise show only when
// two goroutines interleave just so (internal/geo had one: a shipper held
// its stream's lock and waited for the service's, while the lag metrics
// held the service's and waited for the stream's).
//
// Checking is off unless a test calls Enable: a Lock then costs one atomic
// load more than a sync.Mutex. With checking on, taking a lock out of
// order panics, naming both locks, so the test that got there fails with
// the goroutine's stack whether or not the interleaving deadlocked.
package lockorder

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

var enabled atomic.Bool

// Enable turns checking on for the rest of the process (tests only).
func Enable() { enabled.Store(true) }

// Mutex is a sync.Mutex with a rank. Set Rank and Name before first use;
// the zero Rank is the lowest.
type Mutex struct {
	mu   sync.Mutex
	Rank int
	Name string
}

// Lock locks m, after checking (when enabled) that the calling goroutine
// holds no lock of the same or a higher rank.
func (m *Mutex) Lock() {
	if enabled.Load() {
		acquire(m)
	}
	m.mu.Lock()
}

// Unlock unlocks m.
func (m *Mutex) Unlock() {
	if enabled.Load() {
		release(m)
	}
	m.mu.Unlock()
}

var held struct {
	sync.Mutex
	by map[uint64][]*Mutex // goroutine id -> locks it holds, in order taken
}

func acquire(m *Mutex) {
	id := goid()
	held.Lock()
	if held.by == nil {
		held.by = make(map[uint64][]*Mutex)
	}
	for _, h := range held.by[id] {
		if h.Rank >= m.Rank {
			held.Unlock()
			panic(fmt.Sprintf("lockorder: taking %s (rank %d) while holding %s (rank %d): locks must be taken in rising rank",
				m.Name, m.Rank, h.Name, h.Rank))
		}
	}
	held.by[id] = append(held.by[id], m)
	held.Unlock()
}

func release(m *Mutex) {
	id := goid()
	held.Lock()
	defer held.Unlock()
	hs := held.by[id]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i] == m {
			hs = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	if len(hs) == 0 {
		delete(held.by, id)
	} else {
		held.by[id] = hs
	}
}

// goid returns the calling goroutine's id, from its stack header
// ("goroutine 123 [running]:").
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("lockorder: cannot read the goroutine id: " + err.Error())
	}
	return id
}
