package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
)

// Leader-aware routing. A write, or a STRONG read of one key, is served by
// the leader of the key's shard; sent to another node it costs a
// forwarding hop. The client keeps a routing table (keyspace shard counts,
// shard → leader node, node → client address), learnt from the Admin API
// (Shards and Members) in the background, and corrected by the replies of
// writes, which come from the shard leader and name it. A call uses the
// table only when it is fresh enough and names the key's leader; otherwise,
// and after a routed attempt fails, it goes to the current endpoint as
// before (any node forwards). The table never blocks a call.

const (
	// minRouteRefreshGap spaces refreshes asked for by failures or hints.
	minRouteRefreshGap = time.Second
	// A table older than routeStaleFactor refresh intervals, and at least
	// minRouteStale (refreshes failing), is not used for leaders.
	routeStaleFactor = 3
	minRouteStale    = 30 * time.Second
)

// routeTable is an immutable snapshot of the site's routing.
type routeTable struct {
	at      time.Time
	shards  map[string]uint32          // keyspace → shard count
	leaders map[placement.Shard]string // shard → leader node id
	addrs   map[string]string          // node id → client address
}

// router owns the table, the refresh goroutines and the connections to
// nodes that are not configured endpoints.
type router struct {
	interval time.Duration
	// connect returns the KV and Admin clients of a node's client
	// address, and the connection if the router made it (and must close
	// it).
	connect func(addr string) (kvv1.KVClient, adminv1.AdminClient, *grpc.ClientConn, error)

	wg sync.WaitGroup // refresh goroutines

	mu struct {
		sync.Mutex
		table       *routeTable
		refreshing  bool
		cancel      context.CancelFunc // of the refresh in flight; close calls it
		lastAttempt time.Time
		conns       map[string]*grpc.ClientConn // by client address
		kv          map[string]kvv1.KVClient
		admin       map[string]adminv1.AdminClient
		closed      bool
		gen         uint64 // bumped by reset: older refreshes are dropped
	}
}

// reset forgets the table (the client moved to an endpoint of another
// site, whose leaders differ): the next call refreshes it from there.
func (r *router) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.table = nil
	r.mu.lastAttempt = time.Time{}
	r.mu.gen++
	if r.mu.cancel != nil {
		r.mu.cancel()
	}
	r.mu.refreshing = false
}

func newRouter(interval time.Duration, connect func(string) (kvv1.KVClient, adminv1.AdminClient, *grpc.ClientConn, error)) *router {
	r := &router{interval: interval, connect: connect}
	r.mu.conns = map[string]*grpc.ClientConn{}
	r.mu.kv = map[string]kvv1.KVClient{}
	r.mu.admin = map[string]adminv1.AdminClient{}
	return r
}

// leaderConn is the leader of a shard as leaderFor returns it: its KV
// client, and its Admin client on the same connection (to probe it).
type leaderConn struct {
	kv    kvv1.KVClient
	admin adminv1.AdminClient
}

// leaderFor returns the clients of the leader of key's shard and the
// shard, or nil when the table cannot tell (unknown, stale, no leader).
// It starts a background refresh when the table is due for one.
func (r *router) leaderFor(keyspace string, key []byte, refresh func(context.Context) (*routeTable, error)) (*leaderConn, placement.Shard, string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.mu.table
	if t == nil || now.Sub(t.at) > r.interval {
		r.refreshLocked(now, refresh, r.interval)
	}
	if t == nil || now.Sub(t.at) > max(routeStaleFactor*r.interval, minRouteStale) {
		return nil, placement.Shard{}, ""
	}
	n := t.shards[keyspace]
	if n == 0 {
		return nil, placement.Shard{}, ""
	}
	sh := placement.Shard{Keyspace: keyspace, ID: placement.ShardOf(key, n)}
	id := t.leaders[sh]
	addr := t.addrs[id]
	if addr == "" || r.mu.closed {
		return nil, sh, ""
	}
	kv, ok := r.mu.kv[addr]
	admin := r.mu.admin[addr]
	if !ok {
		var conn *grpc.ClientConn
		var err error
		if kv, admin, conn, err = r.connect(addr); err != nil {
			return nil, sh, ""
		}
		if conn != nil {
			r.mu.conns[addr] = conn
		}
		r.mu.kv[addr] = kv
		r.mu.admin[addr] = admin
	}
	return &leaderConn{kv: kv, admin: admin}, sh, id
}

// refreshLocked starts a background refresh unless one runs or one started
// less than gap ago. REQUIRES: r.mu.
func (r *router) refreshLocked(now time.Time, refresh func(context.Context) (*routeTable, error), gap time.Duration) {
	if r.mu.refreshing || r.mu.closed || now.Sub(r.mu.lastAttempt) < gap {
		return
	}
	r.mu.refreshing = true
	r.mu.lastAttempt = now
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.cancel = cancel
	gen := r.mu.gen
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		t, err := refresh(ctx)
		r.mu.Lock()
		defer r.mu.Unlock()
		if gen != r.mu.gen {
			return // reset meanwhile
		}
		r.mu.refreshing = false
		r.mu.cancel = nil
		if err == nil {
			r.mu.table = t
		}
	}()
}

// invalidate forgets the leader of sh (a routed attempt failed) and asks
// for a refresh.
func (r *router) invalidate(sh placement.Shard, refresh func(context.Context) (*routeTable, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.mu.table; t != nil && t.leaders[sh] != "" {
		r.mu.table = t.withLeader(sh, "")
	}
	r.refreshLocked(time.Now(), refresh, minRouteRefreshGap)
}

// learn records that node id answered a write of key: it leads the key's
// shard. A node the table does not know triggers a refresh.
func (r *router) learn(keyspace string, key []byte, id string, refresh func(context.Context) (*routeTable, error)) {
	if id == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.mu.table
	if t == nil || t.shards[keyspace] == 0 {
		return
	}
	sh := placement.Shard{Keyspace: keyspace, ID: placement.ShardOf(key, t.shards[keyspace])}
	if t.leaders[sh] == id {
		return
	}
	if _, known := t.addrs[id]; !known {
		r.refreshLocked(time.Now(), refresh, minRouteRefreshGap)
		return
	}
	r.mu.table = t.withLeader(sh, id)
}

// withLeader returns a copy of t with sh led by id ("" for unknown).
func (t *routeTable) withLeader(sh placement.Shard, id string) *routeTable {
	c := *t
	c.leaders = make(map[placement.Shard]string, len(t.leaders))
	for k, v := range t.leaders {
		c.leaders[k] = v
	}
	c.leaders[sh] = id
	return &c
}

// close stops refreshes and closes the connections the router dialled.
func (r *router) close() []error {
	r.mu.Lock()
	r.mu.closed = true
	if r.mu.cancel != nil {
		r.mu.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, conn := range r.mu.conns {
		if err := conn.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// fetchRoutes builds a routing table from one node's Admin API.
func fetchRoutes(ctx context.Context, admin adminv1.AdminClient, now func() time.Time) (*routeTable, error) {
	shards, err := admin.Shards(ctx, &adminv1.ShardsRequest{})
	if err != nil {
		return nil, err
	}
	members, err := admin.Members(ctx, &adminv1.MembersRequest{})
	if err != nil {
		return nil, err
	}
	t := &routeTable{
		at:      now(),
		shards:  map[string]uint32{},
		leaders: map[placement.Shard]string{},
		addrs:   map[string]string{},
	}
	for _, s := range shards.GetShards() {
		t.shards[s.GetKeyspace()] = max(t.shards[s.GetKeyspace()], s.GetShard()+1)
		if s.GetLeader() != "" {
			t.leaders[placement.Shard{Keyspace: s.GetKeyspace(), ID: s.GetShard()}] = s.GetLeader()
		}
	}
	for _, m := range members.GetMembers() {
		if m.GetClientAddr() != "" && (m.GetState() == "alive" || m.GetState() == "suspect") {
			t.addrs[m.GetNodeId()] = m.GetClientAddr()
		}
	}
	return t, nil
}
