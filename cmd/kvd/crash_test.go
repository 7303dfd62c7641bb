package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
)

// kvdBinary is built once by TestMain.
var kvdBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvd-bin")
	if err != nil {
		panic(err)
	}
	kvdBinary = filepath.Join(dir, "kvd")
	args := []string{"build", "-o", kvdBinary}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building kvd: %v\n%s", err, out)
		os.Exit(1)
	}
	// The tests also run kvd in-process (main_test.go): no goroutine may
	// outlive them.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}),
		// A future raft abandoned at shutdown (see shard's Group.wait).
		goleak.IgnoreAnyFunction("github.com/causeway-db/causeway/internal/shard.(*Group).wait.func1"),
		// hashicorp/raft leaks a leadership transfer that is under way
		// when the node shuts down: leadershipTransfer blocks sending to
		// the stopped replication goroutine, and the leader loop's helper
		// waits for it. Both hold nothing but the stopped raft node.
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*Raft).leadershipTransfer"),
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*Raft).leaderLoop.func2"))
}

// freeAddrs returns n distinct loopback addresses that were free a moment
// ago: their listeners are held until all are picked, so the kernel
// cannot hand out one port twice (a node whose client and gossip ports
// collide does not start).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out
}

type proc struct {
	cmd              *exec.Cmd
	clientAddr, http string
	log              string
	exited           chan struct{} // closed when the process ended; err is then its exit
	err              error
}

// startKVD runs kvd on dataDir and waits until /readyz answers 200.
func startKVD(t *testing.T, dataDir string) *proc {
	t.Helper()
	return startKVDLimited(t, dataDir, 0)
}

// startKVDLimited is startKVD with the size of any file kvd writes limited
// to fileKB kilobytes (RLIMIT_FSIZE, through the shell's ulimit; 0: no
// limit): a write past it fails with EFBIG, like a full disk.
func startKVDLimited(t *testing.T, dataDir string, fileKB int) *proc {
	t.Helper()
	a := freeAddrs(t, 4)
	clientAddr, httpAddr := a[0], a[1]
	return runKVD(t, clientAddr, httpAddr, fileKB, "--data-dir", dataDir, "--client-addr", clientAddr, "--http-addr", httpAddr,
		"--peer-addr", a[2], "--gossip-addr", a[3], "--gossip-profile", "local", "--log-level", "warn")
}

// runKVD runs kvd with args (which listen on clientAddr and httpAddr), with
// the size of its files limited to fileKB kilobytes if not 0, and waits
// until /readyz answers 200.
func runKVD(t *testing.T, clientAddr, httpAddr string, fileKB int, args ...string) *proc {
	t.Helper()
	p := &proc{clientAddr: clientAddr, http: httpAddr}
	if fileKB > 0 {
		p.cmd = exec.Command("bash", append([]string{"-c", fmt.Sprintf(`ulimit -f %d && exec "$0" "$@"`, fileKB), kvdBinary}, args...)...)
	} else {
		p.cmd = exec.Command(kvdBinary, args...)
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "kvd.log"))
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.log = logf.Name()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.exited = make(chan struct{})
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.exited })
	err = poll.Every(20*time.Millisecond).Wait(60*time.Second, func() error {
		resp, err := http.Get("http://" + p.http + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("kvd %v not ready: %v\n%s", args, err, b)
	}
	return p
}

func dial(t *testing.T, addr string) kvv1.KVClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return kvv1.NewKVClient(conn)
}

// TestCrashKeepsAcknowledgedWrites writes and deletes keys from concurrent
// clients, kills kvd with SIGKILL in the middle of the load, restarts it on
// the same data directory and checks every acknowledged operation.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	dataDir := t.TempDir()
	p := startKVD(t, dataDir)
	kv := dial(t, p.clientAddr)

	type ack struct {
		value   string
		deleted bool
		// deleting: a delete was sent but not acknowledged; it may or may
		// not have been committed before the crash.
		deleting bool
	}
	var mu sync.Mutex
	acked := map[string]ack{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	const writers = 16
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("w%02d/k%06d", w, i)
				value := fmt.Sprintf("value-%d-%d", w, i)
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := kv.Put(cctx, &kvv1.PutRequest{Key: []byte(key), Value: []byte(value)})
				ccancel()
				if err != nil {
					return // the daemon died under us
				}
				mu.Lock()
				acked[key] = ack{value: value}
				mu.Unlock()
				if i%4 == 3 { // delete every fourth key after writing it
					mu.Lock()
					acked[key] = ack{value: value, deleting: true}
					mu.Unlock()
					cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := kv.Delete(cctx, &kvv1.DeleteRequest{Key: []byte(key)})
					ccancel()
					if err != nil {
						return
					}
					mu.Lock()
					acked[key] = ack{deleted: true}
					mu.Unlock()
				}
			}
		}(w)
	}
	// Kill once enough writes were acknowledged, while the load is running.
	poll.Until(t, 60*time.Second, "2000 acknowledged writes", func() error {
		mu.Lock()
		defer mu.Unlock()
		if n := len(acked); n < 2000 {
			return fmt.Errorf("only %d writes acknowledged", n)
		}
		return nil
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	cancel()
	wg.Wait()

	p2 := startKVD(t, dataDir)
	kv2 := dial(t, p2.clientAddr)
	mu.Lock()
	defer mu.Unlock()
	deleted := 0
	for key, a := range acked {
		resp, err := kv2.Get(context.Background(), &kvv1.GetRequest{Key: []byte(key)})
		if err != nil {
			t.Fatalf("get %s after restart: %v", key, err)
		}
		switch {
		case a.deleted && resp.Found:
			t.Fatalf("%s was deleted (acknowledged) but reads %q after restart", key, resp.Value)
		case a.deleting && !resp.Found:
			// the unacknowledged delete committed: allowed
		case !a.deleted && (!resp.Found || string(resp.Value) != a.value):
			t.Fatalf("%s: acknowledged %q, after restart found=%v value=%q", key, a.value, resp.Found, resp.Value)
		}
		if a.deleted {
			deleted++
		}
	}
	t.Logf("%d acknowledged operations (%d deletes) survived SIGKILL", len(acked), deleted)

	// SIGTERM shuts down cleanly.
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p2.exited
	if p2.err != nil {
		t.Fatalf("kvd exit after SIGTERM: %v", p2.err)
	}
}

// TestStorageFailureExitsNonZero: kvd runs with every file it writes
// limited in size, as on a disk that fills up, and clients write 256 KiB
// values until the state database cannot grow. kvd exits non-zero with a
// message that names the failure, within a minute, without acknowledging
// the write that failed; restarted without the limit, it serves every
// acknowledged write.
func TestStorageFailureExitsNonZero(t *testing.T) {
	dataDir := t.TempDir()
	// 80 MiB: the 64 MiB write-ahead log segments and the initial 16 MiB
	// databases fit; the state database's growth to 128 MiB does not.
	p := startKVDLimited(t, dataDir, 80<<10)
	kv := dial(t, p.clientAddr)
	value := make([]byte, 256<<10)
	var acked []string
	var lastErr error
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; time.Now().Before(deadline); i++ {
		key := fmt.Sprintf("big/%05d", i)
		copy(value, key)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := kv.Put(ctx, &kvv1.PutRequest{Key: []byte(key), Value: value})
		cancel()
		if err != nil {
			lastErr = err
			break
		}
		acked = append(acked, key)
	}
	if lastErr == nil {
		t.Fatalf("%d puts of 256 KiB never failed", len(acked))
	}
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatalf("kvd still runs a minute after a failed write (%v)", lastErr)
	}
	logs, _ := os.ReadFile(p.log)
	var exit *exec.ExitError
	if !errors.As(p.err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("kvd exited with %v, want a non-zero status\n%s", p.err, logs)
	}
	if !strings.Contains(string(logs), "file too large") {
		t.Fatalf("kvd's output does not name the failure:\n%s", logs)
	}
	t.Logf("after %d acknowledged puts, kvd exited with status %d: %s", len(acked), exit.ExitCode(), lastLine(logs))

	p2 := startKVD(t, dataDir)
	kv2 := dial(t, p2.clientAddr)
	for _, key := range acked {
		resp, err := kv2.Get(context.Background(), &kvv1.GetRequest{Key: []byte(key)})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Found || !bytes.HasPrefix(resp.Value, []byte(key)) || len(resp.Value) != len(value) {
			t.Fatalf("%s: acknowledged, after the restart found=%v (%d bytes)", key, resp.Found, len(resp.Value))
		}
	}
}

// lastLine returns the last non-empty line of b.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
