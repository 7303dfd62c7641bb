// Package pending matches the answers of a stream to the requests waiting
// for them by id, for streams that carry many requests at once and answer
// them in any order (the peers' batch stream, the clients' call stream).
package pending

import "sync"

// Answer is the answer to one request: a response or why there is none.
type Answer[T any] struct {
	Resp T
	Err  error
}

// Table holds the requests of one stream waiting for their answers. Its
// methods are safe for concurrent use.
type Table[T any] struct {
	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]chan Answer[T] // REQUIRES: mu
	err     error                     // set once the stream failed; REQUIRES: mu
}

// Add registers a request: it returns the request's id and the channel its
// answer arrives on (buffered: whoever answers never blocks), or the
// stream's error if it failed.
func (t *Table[T]) Add() (uint64, <-chan Answer[T], error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return 0, nil, t.err
	}
	if t.waiting == nil {
		t.waiting = make(map[uint64]chan Answer[T])
	}
	t.nextID++
	ch := make(chan Answer[T], 1)
	t.waiting[t.nextID] = ch
	return t.nextID, ch, nil
}

// Deliver hands resp to the request id, if it still waits.
func (t *Table[T]) Deliver(id uint64, resp T) {
	t.mu.Lock()
	ch := t.waiting[id]
	delete(t.waiting, id)
	t.mu.Unlock()
	if ch != nil { // nil: the request gave up waiting
		ch <- Answer[T]{Resp: resp}
	}
}

// Drop forgets the request id: it gave up waiting.
func (t *Table[T]) Drop(id uint64) {
	t.mu.Lock()
	delete(t.waiting, id)
	t.mu.Unlock()
}

// Fail records that the stream failed with err (the first error stays)
// and answers every waiting request with it; later Adds return it.
func (t *Table[T]) Fail(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	waiting := t.waiting
	t.waiting = nil
	t.mu.Unlock()
	for _, ch := range waiting {
		ch <- Answer[T]{Err: err}
	}
}

// Err returns why the stream failed, or nil while it works.
func (t *Table[T]) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}
