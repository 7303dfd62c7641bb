package main

import (
	"context"
	"sync"
	"time"
)

// poller finds when the puts become visible at one other site: one
// goroutine asks the site, in one request every millisecond, for every
// key put but not seen there yet. One request per round, whatever the
// number of puts in flight, keeps the readers' load on the sites (which
// share the machine's CPUs) small and the same for every system.
type poller struct {
	st      store
	site    int
	timeout time.Duration

	mu      sync.Mutex
	pending map[string]time.Time // key → start of its put; REQUIRES: mu
	done    bool                 // no more keys; REQUIRES: mu
	seen    []time.Duration      // written by run, read after it returned
	missing int                  // written by run, read after it returned
}

// add starts polling for key, put at start.
func (p *poller) add(key []byte, start time.Time) {
	p.mu.Lock()
	p.pending[string(key)] = start
	p.mu.Unlock()
}

// finish tells run to return once every pending key was seen or timed
// out.
func (p *poller) finish() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
}

// maxBatch bounds the keys of one request (etcd takes at most 128
// operations per transaction by default).
const maxBatch = 100

func (p *poller) run(ctx context.Context) {
	for ctx.Err() == nil {
		p.mu.Lock()
		now := time.Now()
		keys := make([][]byte, 0, len(p.pending))
		for k, start := range p.pending {
			if now.Sub(start) > p.timeout {
				delete(p.pending, k)
				p.missing++
				continue
			}
			if len(keys) < maxBatch {
				keys = append(keys, []byte(k))
			}
		}
		finished := p.done && len(p.pending) == 0
		p.mu.Unlock()
		if finished {
			return
		}
		if len(keys) > 0 {
			rctx, cancel := context.WithTimeout(ctx, p.timeout)
			found, err := p.st.visible(rctx, p.site, keys)
			cancel()
			at := time.Now()
			if err == nil {
				p.mu.Lock()
				for i, ok := range found {
					if !ok {
						continue
					}
					k := string(keys[i])
					if start, ok := p.pending[k]; ok {
						p.seen = append(p.seen, at.Sub(start))
						delete(p.pending, k)
					}
				}
				p.mu.Unlock()
			}
		}
		time.Sleep(time.Millisecond)
	}
}
