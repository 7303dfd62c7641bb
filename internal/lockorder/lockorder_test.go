package lockorder

import (
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	Enable()
	m.Run()
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one naming %q", want)
		}
		if s, _ := r.(string); !strings.Contains(s, want) {
			t.Fatalf("panic %v, want one naming %q", r, want)
		}
	}()
	f()
}

// TestOrder: locks taken in rising rank pass, on several goroutines at
// once; a lock of a lower or equal rank taken under a higher one panics
// and names both, the inversion behind geo's deadlock among them.
func TestOrder(t *testing.T) {
	stream := &Mutex{Rank: 10, Name: "stream"}
	service := &Mutex{Rank: 20, Name: "service"}
	ping := &Mutex{Rank: 30, Name: "ping"}

	var n int // guarded by service
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				stream.Lock()
				service.Lock()
				ping.Lock()
				n++
				ping.Unlock()
				service.Unlock()
				stream.Unlock()
			}
		}()
	}
	for range 4 {
		<-done
	}

	service.Lock()
	mustPanic(t, "taking stream (rank 10) while holding service (rank 20)", stream.Lock)
	service.Unlock()

	ping.Lock()
	mustPanic(t, "taking ping (rank 30) while holding ping", ping.Lock)
	ping.Unlock()

	// Released locks are forgotten: the same goroutine may take them in
	// order again.
	stream.Lock()
	service.Lock()
	n++
	service.Unlock()
	stream.Unlock()
	if n != 401 {
		t.Fatalf("%d increments, want 401", n)
	}
}
