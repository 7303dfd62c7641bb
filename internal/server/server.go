package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/geo"
	"github.com/causeway-db/causeway/internal/grpcopts"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/host"
	"github.com/causeway-db/causeway/internal/membership"
	"github.com/causeway-db/causeway/internal/peer"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/raftutil"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/rpc"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/transport"
	"github.com/causeway-db/causeway/internal/wal"
)

// ErrForeignDataDir is returned for a data directory that holds files
// Causeway did not write.
var ErrForeignDataDir = errors.New("server: data directory is not a Causeway data directory")

// ErrDataDirInUse is returned when another process (another kvd) holds
// the data directory.
var ErrDataDirInUse = errors.New("server: the data directory is in use by another kvd process (stop it first, or give this one its own --data-dir)")

// The node's two database files (docs/adr/001) and its raft log
// directory (docs/adr/008).
const (
	stateFile = "state.db"
	raftFile  = "raft.db"
	walDir    = "wal"
	// damagedSuffix names where a damaged state database is moved
	// before it is rebuilt (the last one only).
	damagedSuffix = ".damaged"
)

// Server is one running node.
type Server struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry

	dirLock *os.File // flock on DataDir, held until Stop ends

	metaMu sync.Mutex // serializes gossip meta updates (updateMeta)
	// refresh is recentKeyspace's last answer from the leader of the
	// cluster configuration: when it was asked and its configuration.
	refresh struct {
		sync.Mutex
		started time.Time
		cfg     cluster.Config
	}

	db      *storage.DB // MVCC state
	logDB   *storage.DB // raft stable stores
	wal     *wal.WAL    // raft logs
	logs    *storage.RaftLogs
	network *transport.Network
	members *membership.Membership
	pool    *peer.Pool
	catalog *catalog.Catalog
	cluster *cluster.Cluster
	host    *host.Host
	router  *router.Router
	geo     *geo.Service
	grpc    *grpc.Server // client API
	// malformed answers undecodable requests to the client API
	// INVALID_ARGUMENT; its services register through it.
	malformed *grpcopts.Malformed
	kv        *rpc.KV      // the data service of both gRPC servers
	peer      *grpc.Server // peer port: raft, Node service, forwarded requests
	http      *http.Server

	clientLn, httpLn, peerLn net.Listener
	killed                   bool
	hostStop                 context.CancelFunc
	hostDone                 chan struct{}
	geoStop                  context.CancelFunc
	geoDone                  chan struct{}
	wan                      wanState    // the fault layer of --simulate-wan and --debug-faults (wan.go)
	gossip                   gossipWatch // gossip seeds and the site's view (rejoin.go)
	wg                       sync.WaitGroup
	stopOnce                 sync.Once
	stopHold                 stopHold // tests only (testhooks.go)

	// stopping is closed as Stop begins: background loops (the host's
	// reconciler, the catalog's leader loop, garbage collection) end at
	// once, before requests in flight drain.
	stopping chan struct{}
	// fatal is closed with the first fatal error (fatalErr): a failed
	// write-ahead log write or sync, or a stopped state machine.
	fatal     chan struct{}
	fatalOnce sync.Once
	fatalErr  error // written once, before fatal is closed
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
	cfg.Shard.FS = cfg.FS
	return &Server{
		cfg: cfg, log: logger.With("site", cfg.Site, "node", cfg.NodeID), reg: prometheus.NewRegistry(),
		stopping: make(chan struct{}), fatal: make(chan struct{}),
	}, nil
}

// Run serves until ctx ends or a component fails fatally, then stops the
// server. It returns the fatal error (nil when ctx ended first). Call it
// after Start.
func (s *Server) Run(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
	case <-s.fatal:
		err = s.fatalErr
		s.log.Error("fatal error; stopping the node", "err", err)
	}
	s.Stop()
	return err
}

// Fatal returns a channel closed when a component of the node failed
// fatally; Run then returns the error.
func (s *Server) Fatal() <-chan struct{} { return s.fatal }

// fail records the node's first fatal error.
func (s *Server) fail(err error) {
	s.fatalOnce.Do(func() {
		s.fatalErr = diskFull(s.cfg.DataDir, err)
		close(s.fatal)
	})
}

// fatalError returns the first fatal error, or nil.
func (s *Server) fatalError() error {
	select {
	case <-s.fatal:
		return s.fatalErr
	default:
		return nil
	}
}

// Registry returns the server's metrics registry.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Start opens storage, joins the site and begins serving. On error
// everything started so far is stopped again.
func (s *Server) Start() (err error) {
	emptyOnFailure := false
	defer func() {
		if err != nil {
			err = unusable(s.cfg.DataDir, diskFull(s.cfg.DataDir, err))
			s.Stop()
			if emptyOnFailure {
				err = emptyNewDataDir(s.cfg.DataDir, err)
			}
		}
	}()
	fresh, err := checkDataDir(s.cfg.DataDir)
	if err != nil {
		return err
	}
	if s.dirLock, err = lockDataDir(s.cfg.DataDir); err != nil {
		return err
	}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	dataDir := s.cfg.DataDir
	s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "causeway_data_dir_free_bytes",
		Help: "Bytes free for kvd on the file system of the data directory: the write-ahead log preallocates 64 MiB segments, and a node stops when a write fails for want of space (docs/operations.md, Disk space).",
	}, func() float64 {
		free, _, err := diskSpace(dataDir)
		if err != nil {
			return -1
		}
		return float64(free)
	}), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "causeway_data_dir_size_bytes",
		Help: "Size in bytes of the file system of the data directory.",
	}, func() float64 {
		_, total, err := diskSpace(dataDir)
		if err != nil {
			return -1
		}
		return float64(total)
	}), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "causeway_snapshot_bytes",
		Help: "Bytes of the files under <data-dir>/snapshots: the raft snapshots of every group (two per group, each about its shard's size), besides causeway_wal_bytes and causeway_storage_bytes.",
	}, func() float64 { return float64(dirBytes(filepath.Join(dataDir, "snapshots"))) }))
	skew := s.cfg.ClockSkew
	clock := causal.NewClock(func() uint64 { return uint64(time.Now().Add(skew).UnixMilli()) })

	// Listeners first, so that every address is known (port 0 in tests).
	if s.peerLn, err = net.Listen("tcp", s.cfg.PeerAddr); err != nil {
		return fmt.Errorf("peer listener: %w", err)
	}
	if s.clientLn, err = net.Listen("tcp", s.cfg.ClientAddr); err != nil {
		return fmt.Errorf("client listener: %w", err)
	}
	if s.httpLn, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	peerAddr := s.peerLn.Addr().String()
	if s.cfg.PeerAdvertise != "" {
		peerAddr = s.cfg.PeerAdvertise
	}
	clusterPeer := peerAddr
	if s.cfg.ClusterPeerAddr != "" {
		clusterPeer = s.cfg.ClusterPeerAddr
	}
	peerTCP, err := net.ResolveTCPAddr("tcp", peerAddr)
	if err != nil {
		return fmt.Errorf("peer address %q: %w", peerAddr, err)
	}
	clientAddr := advertised(s.clientLn.Addr(), peerTCP)

	maxMsg := s.cfg.Limits.MaxValueBytes + s.cfg.Limits.MaxKeyBytes + 1<<20
	if maxMsg < 64<<20 {
		maxMsg = 64 << 20
	}
	tcfg := transport.DefaultConfig(peerAddr)
	tcfg.MaxMsgBytes = maxMsg
	// An idle group's follower hears from its leader every one to two
	// CommitTimeouts; batching may add half of one (docs/adr/020), which
	// keeps the longest gap within HeartbeatTimeout and the lease.
	tcfg.BatchDelay = s.cfg.Shard.CommitTimeout / 2
	// Quiet groups' followers are kept in contact by one keepalive batch
	// per node pair (docs/adr/020, step 16): four per lease and per
	// follower timeout, so one lost keepalive costs nothing.
	tcfg.KeepaliveInterval = min(s.cfg.Shard.LeaderLeaseTimeout, s.cfg.Shard.HeartbeatTimeout) / 4
	poolOpts := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
		// Reconnect to a peer within a second of a partition healing
		// (gRPC's default backoff grows to two minutes).
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: tcfg.DialTimeout,
		}),
	}
	if err := s.initFaults(); err != nil {
		return err
	}
	var faults *faultnet.Host
	if s.cfg.Faults != nil {
		// Every connection and packet to another node goes through the
		// fault layer: raft, peer RPCs, forwarded requests, gossip.
		faults = s.cfg.Faults.Host(faultnet.Endpoint{Site: s.cfg.Site, Node: s.cfg.NodeID}, s.reg)
		faults.Register(peerAddr)
		faults.Register(clusterPeer)
		s.wan.host = faults
		tcfg.Dial = faults.Dial
		poolOpts = append(poolOpts, grpc.WithContextDialer(faults.Dial))
	}
	if s.network, err = transport.New(tcfg, s.log, s.reg); err != nil {
		return err
	}
	s.peer = grpc.NewServer(append(tcfg.ServerOptions(), grpc.ChainUnaryInterceptor(s.recoverUnary, s.incarnationUnary),
		grpc.ChainStreamInterceptor(s.incarnationStream))...)
	s.network.Register(s.peer)
	poolOpts = append(poolOpts, grpc.WithChainUnaryInterceptor(s.stampUnary), grpc.WithChainStreamInterceptor(s.stampStream))
	s.pool = peer.NewPool(poolOpts...)

	mcfg := membership.DefaultConfig(s.cfg.GossipAddr, membership.Meta{Site: s.cfg.Site, NodeID: s.cfg.NodeID, ClientAddr: clientAddr, PeerAddr: peerAddr, Replicas: uint8(s.cfg.Replicas)})
	mcfg.Profile = s.cfg.GossipProfile
	mcfg.Seeds = s.cfg.Join
	if faults != nil {
		mcfg.WrapTransport = faults.Transport
	}
	if s.members, err = membership.New(mcfg, s.log, s.reg); err != nil {
		return err
	}
	if faults != nil {
		faults.Register(s.members.Local().GossipAddr)
	}
	// A node on a new data directory that joins a site must not be one
	// the site counts as a voter: checked before any raft group opens,
	// and before raft.db is created, so that a refused start leaves the
	// directory empty and is refused again (docs/adr/027).
	if fresh && len(s.cfg.Join) > 0 && !guards.Off(guards.FreshIdentity) {
		if err := s.checkFreshIdentity(); err != nil {
			return err
		}
	}
	if err := s.openStorage(); err != nil {
		return err
	}
	if err := s.initIncarnation(fresh); err != nil {
		return err
	}
	keyspaces, err := s.openCluster(clusterPeer, clientAddr)
	if err != nil {
		// A new data directory whose join the cluster refused (the site
		// exists as another incarnation) holds only what this start
		// created: a site of its own, which the cluster never recorded.
		// Left there, a next start with --join, as the error advises,
		// would skip the check of its identity (it is not new any more:
		// docs/adr/027) and run as a voter of the real site without the
		// votes and logs it lost.
		emptyOnFailure = fresh && errors.Is(err, cluster.ErrJoinRefused)
		return err
	}
	catTrans, err := s.network.Transport(catalog.GroupName)
	if err != nil {
		return err
	}
	ccfg := catalog.DefaultConfig()
	ccfg.NodeID, ccfg.PeerAddr, ccfg.ClientAddr = s.cfg.NodeID, peerAddr, clientAddr
	ccfg.SnapshotDir, ccfg.FS = s.cfg.Shard.SnapshotDir, s.cfg.FS
	ccfg.Keyspaces = keyspaces
	ccfg.Replicas = s.cfg.Replicas
	ccfg.DeadGrace = s.cfg.DeadGrace
	ccfg.RecoverLost = s.cfg.RecoverCatalog
	ccfg.HeartbeatTimeout, ccfg.ElectionTimeout, ccfg.LeaderLeaseTimeout = s.cfg.Shard.HeartbeatTimeout, s.cfg.Shard.ElectionTimeout, s.cfg.Shard.LeaderLeaseTimeout
	ccfg.CommitTimeout, ccfg.LeaderHeartbeatTimeout = s.cfg.Shard.CommitTimeout, s.cfg.Shard.LeaderHeartbeatTimeout
	if ccfg.HeartbeatTimeout < time.Second {
		ccfg.RebalanceInterval = 200 * time.Millisecond
		ccfg.LeaderBalanceInterval = 2 * time.Second
	}
	if s.catalog, err = catalog.Open(ccfg, catalog.Deps{
		LogDB: s.logs, Transport: catTrans, Members: newSiteMembers(s.members, s.cfg.Site, s.cfg.NodeID, s.network.Incarnation),
		Shards: peer.Shards{Pool: s.pool}, Logger: s.log, Registry: s.reg,
		OnStale:  func(err error) { s.fail(err) },
		Notifier: peer.Nodes{Pool: s.pool, Site: s.cfg.Site, NodeID: s.cfg.NodeID},
	}, len(s.cfg.Join) == 0); err != nil {
		return err
	}

	s.host = host.New(host.Deps{
		NodeID: s.cfg.NodeID, Shard: s.cfg.Shard, DB: s.db, LogDB: s.logs, Transports: s.network,
		Base: shard.Deps{
			Clock: clock, Logger: s.log, Metrics: shard.NewMetrics(s.reg),
			OnFatal: func(err error) {
				if errors.Is(err, wal.ErrFailed) {
					// The replica ran into the node's failed log first:
					// the node stops on the log's failure (failWith).
					s.fail(s.walFailure())
					return
				}
				s.fail(fmt.Errorf("a shard replica stopped: %w", err))
			},
			Done:     s.stopping,
			Replicas: peer.Digests{Pool: s.pool},
		},
		Current: s.leaderMap,
		Logger:  s.log,
	})
	// Every clock reading must be above every version already stored.
	if err := s.db.View(func(tx *storage.Tx) error {
		tx.ForEachShard(func(st *storage.ShardTx) {
			_, maxHLC := st.Applied()
			clock.Observe(maxHLC)
		})
		return nil
	}); err != nil {
		return err
	}
	hctx, cancel := context.WithCancel(context.Background())
	s.hostStop, s.hostDone = cancel, make(chan struct{})
	go func() {
		defer close(s.hostDone)
		s.host.Run(hctx, s.catalog.Map)
	}()
	s.router = router.New(router.Config{Site: s.cfg.Site, NodeID: s.cfg.NodeID, CausalWait: s.cfg.CausalWait, MoveWait: s.cfg.SessionMoveWait, VersionRetention: s.cfg.Shard.VersionRetention, Unheard: s.unheard, Recent: s.recentKeyspace},
		keyspaces, s.host, s.catalog, s.pool, clock, s.log.With("component", "router"), router.NewMetrics(s.reg))

	rcfg := rpc.Config{Site: s.cfg.Site, NodeID: s.cfg.NodeID, Limits: s.cfg.Limits}
	m := rpc.NewMetrics(s.reg)
	kv := rpc.NewKV(rcfg, s.router, s.log, m)
	s.kv = kv
	malformed := grpcopts.NewMalformed()
	s.malformed = malformed
	s.grpc = grpc.NewServer(append(grpcopts.ServerOptions(), malformed.ServerOption(), grpc.MaxRecvMsgSize(maxMsg), grpc.MaxConcurrentStreams(maxClientStreams), grpc.ChainUnaryInterceptor(s.recoverUnary, s.incarnationUnary),
		grpc.ChainStreamInterceptor(s.incarnationStream))...)
	kvv1.RegisterKVServer(malformed.Registrar(s.grpc), kv)
	adminv1.RegisterAdminServer(malformed.Registrar(s.grpc), rpc.NewAdmin(rcfg, clientAddr, s.router, s.db, m).WithCluster(rpc.Cluster{Catalog: s.catalog, Members: s.members, Pool: s.pool}))
	kvv1.RegisterKVServer(s.peer, kv)
	peerv1.RegisterNodeServer(s.peer, peer.NewService(s.host, s.catalog, s.pool).OnRemoved(s.removed))
	s.startWAN()
	s.startGeo(m)
	s.followCluster()

	// GET patterns also serve HEAD; the mux answers other methods with 405
	// Method Not Allowed and "Allow: GET, HEAD".
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.readyz)
	if s.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	s.serve(s.peer, s.peerLn, "peer")
	s.serve(s.grpc, s.clientLn, "client")
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	}()
	if err := s.joinSite(fresh); err != nil {
		return err
	}
	s.watchGossip()
	s.watchReplicaAddresses()
	s.log.Info("kvd started", "client_addr", clientAddr, "peer_addr", peerAddr, "gossip_addr", s.members.Local().GossipAddr,
		"http_addr", s.HTTPAddr(), "data_dir", s.cfg.DataDir, "join", s.cfg.Join, "gossip_seeds", s.members.Seeds())
	return nil
}

// advertised is the client address other nodes and tools are told: the
// listener's, or, when it binds every interface, the peer address's host
// with the client port.
func advertised(client, peer net.Addr) string {
	c, ok1 := client.(*net.TCPAddr)
	p, ok2 := peer.(*net.TCPAddr)
	if ok1 && ok2 && c.IP.IsUnspecified() && !p.IP.IsUnspecified() {
		return net.JoinHostPort(p.IP.String(), fmt.Sprint(c.Port))
	}
	return client.String()
}

func (s *Server) serve(g *grpc.Server, ln net.Listener, name string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := g.Serve(ln); err != nil {
			s.log.Error("grpc server stopped", "server", name, "err", err)
		}
	}()
}

// openStorage opens the raft stable stores (raft.db) and logs (the
// write-ahead log; both fsynced: they make writes durable, docs/adr/008)
// and the state database (derived from the raft snapshots and logs, so not
// fsynced; rebuilt when a machine restart may have torn it). See
// docs/adr/006.
func (s *Server) openStorage() (err error) {
	id := storage.Identity{Site: s.cfg.Site, NodeID: s.cfg.NodeID}
	logCfg := storage.DefaultConfig(filepath.Join(s.cfg.DataDir, raftFile), id)
	logCfg.Name = "raft"
	logCfg.NoSync = s.cfg.NoSync
	fi, serr := os.Stat(logCfg.Path)
	raftExisted := serr == nil
	if raftExisted && fi.Mode().IsRegular() && fi.Size() == 0 {
		if err := checkEmptyRaftFile(s.cfg.DataDir, logCfg.Path); err != nil {
			return err
		}
	}
	if s.logDB, err = storage.Open(logCfg, s.log, s.reg); err != nil {
		if errors.Is(err, storage.ErrCorrupt) {
			// raft.db holds raft's votes and terms: nothing else has them.
			return fmt.Errorf("%w; refusing to start (see \"A damaged data directory\" in docs/operations.md)", err)
		}
		return err
	}
	walCfg := wal.DefaultConfig(filepath.Join(s.cfg.DataDir, walDir))
	walCfg.NoSync, walCfg.FS = s.cfg.NoSync, s.cfg.FS
	// Once raft.db records that the logs are in wal/, a missing or emptied
	// log is refused before anything is created in its place: a log
	// created empty would let the next start (a supervisor's restart) go
	// on without the entries.
	if walCfg.Existing, err = storage.RaftLogsMoved(s.logDB); err != nil {
		return err
	}
	if s.wal, err = wal.Open(walCfg, s.log, s.reg); err != nil {
		if errors.Is(err, wal.ErrMissing) {
			return fmt.Errorf("%w: %s says the raft logs are in the write-ahead log: %w; refusing to start without them (see \"A damaged data directory\" in docs/operations.md)",
				storage.ErrMissingLog, s.logDB.Path(), err)
		}
		return err
	}
	// A failed write or sync of the log: etcd exits too. What the file
	// holds after it is unknown until the next start reads it.
	s.failWith(s.wal.Failed(), s.walFailure)
	// A failed commit of raft.db: a raft term or vote it was to save is
	// not durable, and the group cannot follow a newer term without it.
	s.failWith(s.logDB.WriteFailed(), func() error {
		return fmt.Errorf("raft's terms and votes cannot be saved: %w", s.logDB.WriteErr())
	})
	if s.logs, err = storage.OpenRaftLogs(s.logDB, s.wal, s.log); err != nil {
		return err
	}
	stateCfg := storage.DefaultConfig(filepath.Join(s.cfg.DataDir, stateFile), id)
	stateCfg.Name = "state"
	stateCfg.Derived = true
	stateCfg.BootID = s.cfg.BootID
	if stateCfg.BootID == "" {
		stateCfg.BootID = storage.BootID()
	}
	if _, serr := os.Stat(stateCfg.Path); raftExisted && errors.Is(serr, os.ErrNotExist) {
		s.log.Warn("the state database is missing; rebuilding shard state from raft snapshots and logs", "path", stateCfg.Path)
	}
	s.db, err = storage.Open(stateCfg, s.log, s.reg)
	if errors.Is(err, storage.ErrCorrupt) {
		// The state database is derived: rebuild it from the raft
		// snapshots and logs (their own checksums vouch for them), and
		// keep the damaged file aside for whoever checks the disk (a
		// file of its own for every damage found: none replaces another).
		damaged := stateCfg.Path + damagedSuffix
		if _, serr := os.Stat(damaged); serr == nil {
			damaged += "-" + time.Now().UTC().Format("20060102T150405.000000000Z")
		}
		s.log.Error("the state database is damaged (a disk or file-system fault: check the disk); moving it aside and rebuilding shard state from raft snapshots and logs",
			"reason", err, "moved_to", damaged)
		if rerr := os.Rename(stateCfg.Path, damaged); rerr != nil {
			return fmt.Errorf("rebuild state: %w", rerr)
		}
		if rerr := os.Remove(storage.MarkerPath(stateCfg.Path)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return fmt.Errorf("rebuild state: %w", rerr)
		}
		s.db, err = storage.Open(stateCfg, s.log, s.reg)
	}
	if errors.Is(err, storage.ErrUnclean) || errors.Is(err, storage.ErrStale) {
		if errors.Is(err, storage.ErrStale) {
			s.log.Warn("the state database was written by an earlier version; rebuilding shard state from raft snapshots and logs", "reason", err)
		} else {
			s.log.Warn("the machine restarted while the node was running; rebuilding shard state from raft snapshots and logs", "reason", err)
		}
		for _, p := range []string{stateCfg.Path, storage.MarkerPath(stateCfg.Path)} {
			if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				return fmt.Errorf("rebuild state: %w", rerr)
			}
		}
		s.db, err = storage.Open(stateCfg, s.log, s.reg)
	}
	if err != nil {
		return err
	}
	// A failed apply or commit of the state database's open transaction
	// lost applies that replicas already count as done: the node stops,
	// and the next start replays them from the raft log.
	db := s.db
	s.failWith(db.Failed(), db.Err)
	// A stored version that fails its checksum: what else the disk
	// changed is unknown. The next start finds the damage when it opens
	// the file, moves it aside and rebuilds it.
	s.failWith(db.Damaged(), func() error {
		return fmt.Errorf("%w; the node stops: its next start moves the state database aside and rebuilds it from raft snapshots and logs (check the disk)", db.DamagedErr())
	})
	return nil
}

// walFailure is the node's fatal error once its write-ahead log failed.
func (s *Server) walFailure() error {
	return fmt.Errorf("the raft write-ahead log cannot be written: %w", s.wal.Err())
}

// failWith stops the node with why() once failed is closed (a nil channel
// never is).
func (s *Server) failWith(failed <-chan struct{}, why func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-failed:
			s.fail(why())
		case <-s.stopping:
		}
	}()
}

// lostFound is the directory fsck keeps at the root of a file system.
const lostFound = "lost+found"

// emptyNewDataDir removes what a failed first start created in dir, a
// data directory that was empty when it began (but for lost+found), so
// that the next start finds it new again. err is the start's error.
func emptyNewDataDir(dir string, err error) error {
	entries, rerr := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == lostFound && e.IsDir() {
			continue
		}
		if rerr = os.RemoveAll(filepath.Join(dir, e.Name())); rerr != nil {
			break
		}
	}
	if rerr != nil {
		return fmt.Errorf("%w (and emptying the new data directory %s again failed: %v; empty it before the next start)", err, dir, rerr)
	}
	return fmt.Errorf("%w (the new data directory %s is left empty)", err, dir)
}

// checkDataDir creates dir if needed and refuses one that holds anything
// other than Causeway's files. fresh reports a new directory: one without
// raft.db, so empty. The lost+found directory of a file system whose root
// is the data directory (a disk or volume given to kvd alone) is not
// counted.
func checkDataDir(dir string) (fresh bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("data dir: %w", err)
	}
	all, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("data dir: %w", err)
	}
	entries := slices.DeleteFunc(all, func(e os.DirEntry) bool { return e.Name() == lostFound && e.IsDir() })
	hasRaft := false
	var foreign []string
	for _, e := range entries {
		switch e.Name() {
		case raftFile:
			hasRaft = true
		case stateFile:
		case "snapshots", walDir, stateFile + ".open", stateFile + ".open.tmp", stateFile + damagedSuffix, clusterFile, clusterFile + ".tmp", clusterFile + damagedSuffix:
		default:
			// Damaged files kept aside: one per damage found.
			if !strings.HasPrefix(e.Name(), stateFile+damagedSuffix+"-") && !strings.HasPrefix(e.Name(), clusterFile+damagedSuffix+"-") {
				foreign = append(foreign, e.Name())
			}
		}
	}
	if len(foreign) > 0 {
		return false, fmt.Errorf("%w: %s contains %q; point --data-dir at an empty or Causeway directory", ErrForeignDataDir, dir, foreign)
	}
	// state.db is derived from raft.db (and the snapshots); the reverse is
	// not true, so a directory without raft.db is never started on.
	if len(entries) > 0 && !hasRaft {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return false, fmt.Errorf("%w: %s has no %s but holds %q: raft's terms, votes and the site incarnation are gone (or the directory was copied without it); refusing to start on partial data (see \"A damaged data directory\" in docs/operations.md)",
			ErrForeignDataDir, dir, raftFile, names)
	}
	return !hasRaft, nil
}

// checkEmptyRaftFile refuses an empty raft.db (path) in a data directory
// that holds anything else. bbolt would initialize it as a new database:
// the node would go on with its raft terms and votes reset (and could
// vote twice in a term), and without its site incarnation. Only a crash
// while the very first start created raft.db, before any other file, can
// leave it empty.
func checkEmptyRaftFile(dir, path string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	var others []string
	for _, e := range entries {
		// lost+found: the data directory may be a file system's root.
		if e.Name() != raftFile && e.Name() != lostFound {
			others = append(others, e.Name())
		}
	}
	if len(others) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s is empty (0 bytes), but the data directory holds %q: raft's terms, votes and the site incarnation are gone; refusing to start (see \"A damaged data directory\" in docs/operations.md)",
		storage.ErrCorrupt, path, others)
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

// readyz answers Ready, and with a ready node, a warning while gossip
// and the site catalog disagree on the node's site (siteCutOff).
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := s.Ready(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
	if why := s.siteCutOff(); why != "" {
		fmt.Fprintln(w, "warning: "+why)
	}
}

// Ready reports whether the node can serve: the site catalog has a leader,
// every replica the placement map assigns to this node is open, and each
// of them knows its shard's leader. Without a catalog leader, the reason
// says which of the catalog's other voters gossip shows alive.
func (s *Server) Ready() error {
	if err := s.fatalError(); err != nil {
		return fmt.Errorf("stopping on a fatal error: %w", err)
	}
	if s.wal != nil {
		if err := s.wal.Err(); err != nil { // before Run has seen it
			return fmt.Errorf("cannot write: %w", err)
		}
	}
	if s.logDB != nil {
		if err := s.logDB.WriteErr(); err != nil {
			return fmt.Errorf("cannot write: %w", err)
		}
	}
	select {
	case <-s.stopping:
		return errors.New("stopping")
	default:
	}
	if s.catalog == nil || s.host == nil {
		return errors.New("starting")
	}
	if id, _ := s.catalog.Leader(); id == "" {
		return errors.New(s.noLeaderReason())
	}
	if m, _ := s.catalog.Map(); !s.hosts(m) {
		return errors.New("shard replicas are still opening")
	}
	for _, g := range s.host.Groups() {
		if g.Leader() == "" {
			return fmt.Errorf("shard %s has no leader", g.ID())
		}
		if !g.CaughtUp() {
			return fmt.Errorf("shard %s is still applying its log", g.ID())
		}
	}
	return nil
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
func (s *Server) Groups() []*shard.Group {
	if s.host == nil {
		return nil
	}
	return s.host.Groups()
}

// Router returns the node's router.
func (s *Server) Router() *router.Router { return s.router }

// Catalog returns the node's catalog replica.
func (s *Server) Catalog() *catalog.Catalog { return s.catalog }

// Host returns the node's shard replicas.
func (s *Server) Host() *host.Host { return s.host }

// Members returns the gossip members this node knows, itself included.
func (s *Server) Members() []membership.Member {
	if s.members == nil {
		return nil
	}
	return s.members.Members()
}

// PeerAddr returns the address of the peer port.
func (s *Server) PeerAddr() string {
	if s.peerLn == nil {
		return ""
	}
	return s.peerLn.Addr().String()
}

// GossipAddr returns the address gossip listens on.
func (s *Server) GossipAddr() string {
	if s.members == nil {
		return ""
	}
	return s.members.Local().GossipAddr
}

// hosts reports whether every replica the map assigns to this node is open.
func (s *Server) hosts(m placement.Map) bool {
	if len(m.Shards) == 0 {
		return false
	}
	for sh, reps := range m.Shards {
		for _, r := range reps {
			if string(r.Node) == s.cfg.NodeID && s.host.Group(sh) == nil {
				return false
			}
		}
	}
	return true
}

// Kill stops the node abruptly, as a crash would as far as the rest of the
// site can tell: no graceful gossip leave, in-flight requests cut off.
// Storage is still closed cleanly so the process can go on (tests).
func (s *Server) Kill() {
	s.killed = true
	if s.grpc != nil {
		s.grpc.Stop()
	}
	if s.peer != nil {
		s.peer.Stop()
	}
	s.Stop()
}

// maxClientStreams bounds the calls in flight on one client connection
// (HTTP/2 streams); a client's later calls wait for their turn on its side.
// Unbounded, one connection could make the node start a goroutine and hold
// a request for as many calls as it sent.
const maxClientStreams = 4096

// handOffWait bounds how long Stop waits for the leadership transfers of
// the shards the node leads.
const handOffWait = 3 * time.Second

// handOff hands the leadership of the shards, the catalog and the
// cluster group this node leads to other nodes, all at once, and waits for
// the transfers until ctx ends.
func (s *Server) handOff(ctx context.Context) {
	var wg sync.WaitGroup
	group := func(name string, handOff func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := handOff(ctx); {
			case err == nil:
				s.log.Info("handed the leadership of a group to another node", "group", name)
			case !errors.Is(err, raftutil.ErrNotLeading) && !errors.Is(err, raftutil.ErrNoOtherVoter):
				s.log.Warn("handing off the leadership of a group", "group", name, "err", err)
			}
		}()
	}
	if s.catalog != nil {
		group("site catalog", s.catalog.HandOff)
	}
	if s.cluster != nil {
		group("cluster configuration group", s.cluster.HandOff)
	}
	handed, failed := s.host.HandOff(ctx)
	if handed > 0 {
		s.log.Info("handed the leadership of shards to other nodes", "shards", handed)
	}
	if len(failed) > 0 {
		ids := make([]string, 0, len(failed))
		for id := range failed {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		s.log.Warn("could not hand the leadership of shards to another node: they elect a leader once their followers' heartbeat timeout passes",
			"shards", ids, "err", failed[ids[0]])
	}
	wg.Wait()
}

// Stop hands the leadership of the shards, the catalog and the cluster
// group the node leads to other nodes (up to handOffWait), stops serving, lets in-flight requests finish (up
// to ShutdownGrace), and closes every component in reverse start order.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		if !s.killed {
			s.log.Info("kvd stopping: handing the leadership of its groups to other nodes, then finishing the requests in flight",
				"hand_off_wait", min(s.cfg.ShutdownGrace, handOffWait), "shutdown_grace", s.cfg.ShutdownGrace)
		}
		if s.network != nil && !s.killed {
			// From now on the node takes no leadership: the catalog's
			// leader balancing, which still counts it alive, would hand
			// shards back to it while it finishes, and they would have
			// no leader after it exits (transport/stopping.go).
			s.network.RefuseLeadership()
		}
		// Background loops first, at once: nothing new is started while
		// requests in flight drain.
		close(s.stopping)
		s.stopGeo()
		if s.hostStop != nil {
			s.hostStop()
			<-s.hostDone
		}
		if s.catalog != nil {
			s.catalog.StopLeading()
		}
		if s.host != nil && !s.killed && !guards.Off(guards.LeaderHandOff) {
			// The shards this node leads get a leader elsewhere now, not
			// an election timeout after it stopped answering. A killed
			// node (a crash, in tests) hands nothing off.
			ctx, cancel := context.WithTimeout(context.Background(), min(s.cfg.ShutdownGrace, handOffWait))
			s.handOff(ctx)
			cancel()
		}
		s.stopHold.wait()
		graceful := func(g *grpc.Server) {
			done := make(chan struct{})
			go func() { g.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-time.After(s.cfg.ShutdownGrace):
				g.Stop()
			}
		}
		if s.kv != nil {
			// Call streams end once their calls are answered: a graceful
			// stop would otherwise wait for the clients to close them.
			s.kv.Drain()
		}
		if s.grpc != nil {
			graceful(s.grpc)
		}
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = s.http.Shutdown(ctx)
			cancel()
		}
		if s.host != nil {
			s.host.Close()
		}
		if s.catalog != nil {
			if err := s.catalog.Close(); err != nil {
				s.log.Warn("closing catalog", "err", err)
			}
		}
		if s.cluster != nil {
			if err := s.cluster.Close(); err != nil {
				s.log.Warn("closing the cluster configuration group", "err", err)
			}
		}
		if s.members != nil {
			if !s.killed {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = s.members.Leave(ctx)
				cancel()
			}
			_ = s.members.Shutdown()
		}
		if s.peer != nil {
			s.peer.Stop()
		}
		if s.network != nil {
			_ = s.network.Close()
		}
		if s.pool != nil {
			s.pool.Close()
		}
		for _, ln := range []net.Listener{s.clientLn, s.httpLn, s.peerLn} {
			if ln != nil {
				_ = ln.Close()
			}
		}
		s.wg.Wait()
		for _, db := range []*storage.DB{s.db, s.logDB} {
			if db != nil {
				if err := db.Close(); err != nil {
					s.log.Warn("closing storage", "db", db.Path(), "err", err)
				}
			}
		}
		if s.wal != nil {
			if err := s.wal.Close(); err != nil {
				s.log.Warn("closing the raft log", "err", err)
			}
		}
		if s.dirLock != nil {
			_ = s.dirLock.Close()
		}
		s.log.Info("kvd stopped")
	})
}

// dirBytes returns the bytes of the regular files under dir (0 if it
// cannot be read); a file removed while it is walked is skipped.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile, or unreadable: not counted
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
