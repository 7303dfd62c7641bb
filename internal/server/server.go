package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/rpc"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// ErrForeignDataDir is returned for a data directory that holds files
// Causeway did not write.
var ErrForeignDataDir = errors.New("server: data directory is not a Causeway data directory")

// The node's two database files (docs/adr/001).
const (
	stateFile = "state.db"
	raftFile  = "raft.db"
)

// Server is one running node.
type Server struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry

	db     *storage.DB // MVCC state
	logDB  *storage.DB // raft logs
	groups []*shard.Group
	router *router.Router
	grpc   *grpc.Server
	http   *http.Server

	clientLn, httpLn net.Listener
	wg               sync.WaitGroup
	stopOnce         sync.Once
}

// New checks cfg and returns a server that Start will run.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	cfg.Shard.SnapshotDir = filepath.Join(cfg.DataDir, "snapshots")
	return &Server{cfg: cfg, log: logger.With("site", cfg.Site, "node", cfg.NodeID), reg: prometheus.NewRegistry()}, nil
}

// Registry returns the server's metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Start opens storage, starts every shard group and begins serving. On
// error everything started so far is stopped again.
func (s *Server) Start() (err error) {
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if err := checkDataDir(s.cfg.DataDir); err != nil {
		return err
	}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := s.openStorage(); err != nil {
		return err
	}
	clock := causal.NewClock(func() uint64 { return uint64(time.Now().UnixMilli()) })
	shardMetrics := shard.NewMetrics(s.reg)
	keyspace := rpc.DefaultKeyspace
	groups := make([]*shard.Group, s.cfg.Shards)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for i := range groups {
		wg.Add(1)
		go func(i int) { // groups open in parallel: each replays its log
			defer wg.Done()
			id := storage.ShardID{Keyspace: keyspace, Shard: uint32(i)}
			_, trans := raft.NewInmemTransport(raft.ServerAddress(s.cfg.NodeID + "/" + id.String()))
			g, err := shard.Open(id, s.cfg.Shard, shard.Deps{
				DB: s.db, LogDB: s.logDB, Clock: clock, Logger: s.log, Metrics: shardMetrics,
				NodeID: s.cfg.NodeID, Transport: trans,
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			groups[i] = g
		}(i)
	}
	wg.Wait()
	for _, g := range groups {
		if g != nil {
			s.groups = append(s.groups, g)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Every clock reading must be above every version already stored.
	for _, g := range groups {
		if err := g.Read(func(tx *storage.ShardTx) error {
			_, maxHLC := tx.Applied()
			clock.Observe(maxHLC)
			return nil
		}); err != nil {
			return err
		}
	}
	s.router = router.New(map[string][]*shard.Group{keyspace: groups})

	rcfg := rpc.Config{Site: s.cfg.Site, NodeID: s.cfg.NodeID, Limits: s.cfg.Limits, CausalWait: s.cfg.CausalWait}
	m := rpc.NewMetrics(s.reg)
	maxMsg := s.cfg.Limits.MaxValueBytes + s.cfg.Limits.MaxKeyBytes + 1<<20
	if maxMsg < 4<<20 {
		maxMsg = 4 << 20
	}
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(maxMsg),
		grpc.ChainUnaryInterceptor(s.recoverUnary),
	)
	if s.clientLn, err = net.Listen("tcp", s.cfg.ClientAddr); err != nil {
		return fmt.Errorf("client listener: %w", err)
	}
	kvv1.RegisterKVServer(s.grpc, rpc.NewKV(rcfg, s.router, clock, s.log, m))
	adminv1.RegisterAdminServer(s.grpc, rpc.NewAdmin(rcfg, s.clientLn.Addr().String(), s.router, s.db, m))
	if s.httpLn, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", s.readyz)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(s.clientLn); err != nil {
			s.log.Error("grpc server stopped", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()
	s.log.Info("kvd started", "client_addr", s.ClientAddr(), "http_addr", s.HTTPAddr(),
		"data_dir", s.cfg.DataDir, "shards", len(groups))
	return nil
}

// openStorage opens the raft log database (fsynced: it is what makes
// writes durable) and the state database (derived from the raft snapshots
// and logs, so not fsynced; rebuilt when a machine restart may have torn
// it). See docs/adr/006.
func (s *Server) openStorage() (err error) {
	id := storage.Identity{Site: s.cfg.Site, NodeID: s.cfg.NodeID}
	logCfg := storage.DefaultConfig(filepath.Join(s.cfg.DataDir, raftFile), id)
	logCfg.Name = "raft"
	logCfg.NoSync = s.cfg.NoSync
	if s.logDB, err = storage.Open(logCfg, s.log, s.reg); err != nil {
		return err
	}
	stateCfg := storage.DefaultConfig(filepath.Join(s.cfg.DataDir, stateFile), id)
	stateCfg.Name = "state"
	stateCfg.Derived = true
	stateCfg.BootID = s.cfg.BootID
	if stateCfg.BootID == "" {
		stateCfg.BootID = storage.BootID()
	}
	s.db, err = storage.Open(stateCfg, s.log, s.reg)
	if errors.Is(err, storage.ErrUnclean) {
		s.log.Warn("the machine restarted while the node was running; rebuilding shard state from raft snapshots and logs", "reason", err)
		for _, p := range []string{stateCfg.Path, storage.MarkerPath(stateCfg.Path)} {
			if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				return fmt.Errorf("rebuild state: %w", rerr)
			}
		}
		s.db, err = storage.Open(stateCfg, s.log, s.reg)
	}
	return err
}

// checkDataDir creates dir if needed and refuses one that holds anything
// other than Causeway's files.
func checkDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	hasRaft := false
	var foreign []string
	for _, e := range entries {
		switch e.Name() {
		case raftFile:
			hasRaft = true
		case stateFile:
		case "snapshots", stateFile + ".open", stateFile + ".open.tmp":
		default:
			foreign = append(foreign, e.Name())
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("%w: %s contains %q; point --data-dir at an empty or Causeway directory", ErrForeignDataDir, dir, foreign)
	}
	// state.db is derived from raft.db (and the snapshots); the reverse is
	// not true, so a directory without raft.db is never started on.
	if len(entries) > 0 && !hasRaft {
		return fmt.Errorf("%w: %s has no %s; refusing to start on partial data", ErrForeignDataDir, dir, raftFile)
	}
	return nil
}

// recoverUnary turns a panic in a handler into an Internal error instead of
// crashing the node.
func (s *Server) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in request handler", "method", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
			err = status.Errorf(codes.Internal, "internal error in %s", info.FullMethod)
		}
	}()
	return h(ctx, req)
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	for _, g := range s.groups {
		if g.Leader() == "" {
			http.Error(w, fmt.Sprintf("shard %s has no leader", g.ID()), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ready")
}

// ClientAddr returns the address the client API listens on.
func (s *Server) ClientAddr() string {
	if s.clientLn == nil {
		return ""
	}
	return s.clientLn.Addr().String()
}

// HTTPAddr returns the address of the HTTP endpoint.
func (s *Server) HTTPAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// Groups returns the shard groups hosted by this node.
func (s *Server) Groups() []*shard.Group { return s.groups }

// Stop stops serving, lets in-flight requests finish (up to
// ShutdownGrace), and closes every component in reverse start order.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if s.grpc != nil {
			done := make(chan struct{})
			go func() { s.grpc.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(s.cfg.ShutdownGrace):
				s.grpc.Stop()
			}
		} else if s.clientLn != nil {
			_ = s.clientLn.Close()
		}
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = s.http.Shutdown(ctx)
			cancel()
		} else if s.httpLn != nil {
			_ = s.httpLn.Close()
		}
		s.wg.Wait()
		var wg sync.WaitGroup
		for _, g := range s.groups {
			wg.Add(1)
			go func(g *shard.Group) {
				defer wg.Done()
				if err := g.Close(); err != nil {
					s.log.Warn("closing shard", "shard", g.ID().String(), "err", err)
				}
			}(g)
		}
		wg.Wait()
		for _, db := range []*storage.DB{s.db, s.logDB} {
			if db != nil {
				if err := db.Close(); err != nil {
					s.log.Warn("closing storage", "db", db.Path(), "err", err)
				}
			}
		}
		s.log.Info("kvd stopped")
	})
}
