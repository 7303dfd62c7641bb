// Package drivers executes YCSB operations (package bench/ycsb) against a
// key-value system through one interface, so that Causeway and etcd are
// given byte-identical requests by the same runner (package bench/ycsbrun).
//
// A System is one system under test in one mode (for example Causeway with
// CAUSAL reads, or etcd with serializable reads) with a pool of connections;
// it hands each benchmark client goroutine a Driver. Client goroutines are
// spread over the connections as YCSB's threads would be over DB instances:
// client i uses connection i mod Conns, and connection j starts at endpoint
// j mod len(Endpoints), so the clients are spread round-robin over the
// endpoints.
//
// Modes:
//
//	causeway-causal  Causeway Go client, reads CAUSAL, writes LOCAL durability
//	causeway-strong  Causeway Go client, reads STRONG (linearizable in the site)
//	etcd-lin         etcd clientv3, linearizable reads (etcd's default)
//	etcd-ser         etcd clientv3, serializable reads (served by any member)
//	causeway-causal-raw  diagnostic: Causeway's gRPC API without the client
//	                 library (CAUSAL reads, no session token, no retries)
//	memory           an in-process map, for tests and dry runs
//
// Operations map as follows (Causeway / etcd):
//
//	Read             Get / Range of one key
//	Update, Insert   Put / Put
//	Scan             Scan from the key, limit n / Range from the key to the end, limit n
//	ReadModifyWrite  Get, then CompareAndSwap on the version read /
//	                 Get, then Txn If ModRevision == read revision Then Put;
//	                 both retried on conflict up to MaxRMWAttempts times
//	TxnRead          BatchGet of the keys (Causeway has no GetTxn yet, so
//	                 this is not an atomic snapshot) / a read-only Txn of Gets
//
// Writes are whole values; a Read that finds no value returns ErrNotFound.
package drivers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/causeway-db/causeway/bench/core"
)

// Driver executes the operations of one benchmark client goroutine. A
// Driver is used by one goroutine at a time.
type Driver interface {
	// Read returns the value of key, or ErrNotFound.
	Read(ctx context.Context, key string) ([]byte, error)
	// Update overwrites key with value.
	Update(ctx context.Context, key string, value []byte) error
	// Insert writes a new record.
	Insert(ctx context.Context, key string, value []byte) error
	// Scan reads up to n records in key order starting at startKey and
	// returns how many it read.
	Scan(ctx context.Context, startKey string, n int) (int, error)
	// ReadModifyWrite reads key and writes value to it if nobody wrote it
	// in between, retrying on conflict; ErrConflict when every attempt
	// conflicted.
	ReadModifyWrite(ctx context.Context, key string, value []byte) error
	// TxnRead reads keys together.
	TxnRead(ctx context.Context, keys []string) error
	// Close releases the driver (not the System's connections).
	Close() error
}

// System is one system under test in one mode: a pool of connections that
// hands out a Driver per client goroutine. It is safe for concurrent use.
type System interface {
	// Mode is the mode name (ModeCausewayCausal, ...).
	Mode() string
	// Driver returns the driver of client goroutine i (0-based).
	Driver(i int) (Driver, error)
	// Close closes the connections; drivers must not be used afterwards.
	Close() error
}

// The modes.
const (
	ModeCausewayCausal = "causeway-causal"
	ModeCausewayStrong = "causeway-strong"
	ModeEtcdLin        = "etcd-lin"
	ModeEtcdSer        = "etcd-ser"
	ModeCausewayRaw    = "causeway-causal-raw"
	ModeMemory         = "memory"
)

// Modes lists every mode, in report order.
var Modes = []string{ModeCausewayCausal, ModeCausewayStrong, ModeEtcdLin, ModeEtcdSer, ModeCausewayRaw, ModeMemory}

// SystemOf returns the system a mode belongs to: "causeway", "etcd" or
// "memory".
func SystemOf(mode string) string {
	s, _, _ := strings.Cut(mode, "-")
	return s
}

// Errors of the drivers.
var (
	// ErrNotFound is returned by Read for a key without a value.
	ErrNotFound = errors.New("drivers: key not found")
	// ErrConflict is returned by ReadModifyWrite when every attempt lost
	// a race with another writer.
	ErrConflict = errors.New("drivers: read-modify-write conflicted on every attempt")
	// ErrUnknownMode is returned by Open for an unknown mode.
	ErrUnknownMode = errors.New("drivers: unknown mode")
)

// DefaultClientsPerConn is how many client goroutines share a connection
// (and, for Causeway, one client library instance and so one causal
// session), as in kvbench.
const DefaultClientsPerConn = core.ClientsPerConn

// MaxRMWAttempts bounds the read-then-conditional-write attempts of a
// ReadModifyWrite.
const MaxRMWAttempts = 4

// Config configures Open.
type Config struct {
	// Mode is one of Modes.
	Mode string
	// Endpoints are the client addresses ("host:port") of the system's
	// nodes; several sites may be listed. Not used by ModeMemory.
	Endpoints []string
	// Keyspace is the Causeway keyspace of every call (empty: default).
	Keyspace string
	// UnaryCalls makes the Causeway client send every call as its own
	// unary gRPC call (client.Config.DisableCallStream).
	UnaryCalls bool
	// Clients is the number of client goroutines that will ask for a
	// Driver; it sizes the connection pool.
	Clients int
	// ClientsPerConn is how many clients share one connection (0 means
	// DefaultClientsPerConn). The connection count is rounded up to a
	// multiple of the endpoints.
	ClientsPerConn int
	// DialTimeout bounds connecting (0 means 5s).
	DialTimeout time.Duration
	// Memory is the store of ModeMemory (nil means a new one).
	Memory *Memory
}

// Conns returns the number of connections Open makes for cfg
// (core.ConnCount).
func (cfg Config) Conns() int {
	return core.ConnCount(cfg.Clients, cfg.ClientsPerConn, len(cfg.Endpoints))
}

// rotated returns the endpoints starting at index j mod len(eps).
func rotated(eps []string, j int) []string {
	if len(eps) == 0 {
		return nil
	}
	j %= len(eps)
	return append(slices.Clone(eps[j:]), eps[:j]...)
}

// Open connects to the system of cfg.Mode.
func Open(ctx context.Context, cfg Config) (System, error) {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.Mode != ModeMemory && len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("drivers: %s: no endpoints", cfg.Mode)
	}
	switch cfg.Mode {
	case ModeCausewayCausal, ModeCausewayStrong:
		return openCauseway(ctx, cfg)
	case ModeEtcdLin, ModeEtcdSer:
		return openEtcd(ctx, cfg)
	case ModeCausewayRaw:
		return openCausewayRaw(cfg)
	case ModeMemory:
		m := cfg.Memory
		if m == nil {
			m = NewMemory()
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknownMode, cfg.Mode, strings.Join(Modes, ", "))
}
