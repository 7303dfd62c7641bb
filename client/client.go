package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/grpcopts"
)

// maxRecvMsgBytes bounds a reply; scan pages and batch reads of large values
// exceed gRPC's default of 4 MiB.
const maxRecvMsgBytes = 256 << 20

// maxBackoffShift caps the exponential retry backoff at 32×RetryBackoff.
const maxBackoffShift = 5

// Client is a connection to a Causeway cluster carrying one causal session.
// It is safe for concurrent use; concurrent calls share (and merge into) the
// session.
type Client struct {
	cfg   Config
	log   *slog.Logger
	conns []*grpc.ClientConn
	kv    []kvv1.KVClient
	admin []adminv1.AdminClient
	geo   []adminv1.GeoClient
	cur   atomic.Int64 // index of the endpoint calls go to
	// failback is when (unix nanoseconds) calls go back to the first
	// endpoint after a failover; 0: not scheduled.
	failback atomic.Int64
	// fullNext: the next request carries the whole session, not the part
	// it needs, so that a site the session comes from elsewhere (after a
	// failover, or a token of another process) sees every floor it must
	// have applied (router.Arrive).
	fullNext atomic.Bool
	seq      atomic.Uint64 // last request id sequence number
	closed   atomic.Bool
	routes   *router // nil when leader routing is disabled
	// sites holds, per endpoint, the site its node reported (in a reply
	// header or its Status), or nil while unknown.
	sites []atomic.Pointer[string]

	streamsMu sync.Mutex
	streams   []*streamKV // every connection's call stream, to end on Close

	start starter // the pick of the endpoint to start with (start.go)

	mu struct {
		sync.Mutex
		session *causal.Session
		readTok readTokCache
	}
}

// New returns a client for cfg. It dials every endpoint at once but does
// not wait for the connections: the first calls wait until one is ready
// (see Config.Endpoints). ctx is not retained.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Endpoints = slices.Clone(cfg.Endpoints)
	sess, err := causal.DecodeSession(cfg.SessionToken)
	if err != nil {
		why := strings.TrimPrefix(err.Error(), causal.ErrMalformedToken.Error()+": ")
		return nil, fmt.Errorf("%w: %s", ErrMalformedSession, why)
	}
	if cfg.ClientID == "" {
		var b [12]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
		cfg.ClientID = hex.EncodeToString(b[:])
	}
	c := &Client{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.mu.session = sess

	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   5 * time.Second,
			},
			MinConnectTimeout: cfg.DialTimeout,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgBytes)),
	}, append(grpcopts.DialOptions(), cfg.DialOptions...)...)
	dial := func(addr string) (*grpc.ClientConn, error) { return grpc.NewClient(addr, dialOpts...) }
	for _, ep := range cfg.Endpoints {
		conn, err := dial(ep)
		if err != nil {
			_ = c.closeConns()
			return nil, fmt.Errorf("client: endpoint %q: %w", ep, err)
		}
		c.conns = append(c.conns, conn)
		c.kv = append(c.kv, c.kvClient(conn))
		c.admin = append(c.admin, adminv1.NewAdminClient(conn))
		c.geo = append(c.geo, adminv1.NewGeoClient(conn))
	}
	if !cfg.DisableLeaderRouting {
		c.routes = newRouter(cfg.RouteRefresh, func(addr string) (kvv1.KVClient, adminv1.AdminClient, *grpc.ClientConn, error) {
			if i := slices.Index(c.cfg.Endpoints, addr); i >= 0 {
				return c.kv[i], c.admin[i], nil, nil
			}
			conn, err := dial(addr)
			if err != nil {
				return nil, nil, nil, err
			}
			return c.kvClient(conn), adminv1.NewAdminClient(conn), conn, nil
		})
	}
	c.sites = make([]atomic.Pointer[string], len(cfg.Endpoints))
	c.fullNext.Store(len(cfg.SessionToken) > 0)
	c.startPick()
	return c, nil
}

// Close closes the connections. Calls in flight fail with an error that
// matches ErrClosed (a write among them may have been applied); later
// calls return ErrClosed. The session can still be exported with SessionToken.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.stopPick()
	return c.closeConns()
}

// kvClient returns the data client of conn: on its call stream
// (callstream.go) unless Config.DisableCallStream.
func (c *Client) kvClient(conn *grpc.ClientConn) kvv1.KVClient {
	if c.cfg.DisableCallStream {
		return kvv1.NewKVClient(conn)
	}
	k := newStreamKV(conn)
	c.streamsMu.Lock()
	c.streams = append(c.streams, k)
	c.streamsMu.Unlock()
	return k
}

func (c *Client) closeConns() error {
	c.streamsMu.Lock()
	streams := c.streams
	c.streamsMu.Unlock()
	for _, k := range streams {
		k.close()
	}
	var errs []error
	if c.routes != nil {
		errs = c.routes.close()
	}
	for _, conn := range c.conns {
		if err := conn.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Endpoints returns the configured endpoints.
func (c *Client) Endpoints() []string { return slices.Clone(c.cfg.Endpoints) }

// ClientID returns the id carried by the request ids of this client's
// mutations.
func (c *Client) ClientID() string { return c.cfg.ClientID }

// SessionToken exports the client's causal session as an opaque token for
// Config.SessionToken. It is nil while the session is empty.
func (c *Client) SessionToken() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.session.Encode()
}

// dest is the endpoint a request goes to: its index in Config.Endpoints,
// and whether the caller pinned it with WithEndpoint.
type dest struct {
	ep     int
	pinned bool
}

// at returns the dest of a request of o sent to endpoint ep.
func (o callOptions) at(ep int) dest { return dest{ep: ep, pinned: o.endpoint != ""} }

// movesLocked reports whether a request to to takes the session to a site
// other than the one that served it last: to's node is of another site,
// or, for a pinned endpoint, of a site not known yet. That site first
// waits until it holds the session's causal past (router.Arrive): given
// the whole session, only for the versions the session observed; given a
// part, for every other site's writes up to the session's newest
// timestamp, which takes the other sites' heartbeats and cannot end while
// any site is cut off from it. So such a request carries the whole
// session. (REQUIRES: c.mu.)
func (c *Client) movesLocked(to dest) bool {
	last := c.mu.session.Site
	if last == "" || to.ep < 0 || to.ep >= len(c.sites) {
		return false
	}
	if s := c.sites[to.ep].Load(); s != nil {
		return *s != last
	}
	return to.pinned
}

// readHeader returns the request header of a read of keys sent to to: it
// carries only the floors the server needs for them (see
// causal.Session.ForRead), or the whole session when it moves.
func (c *Client) readHeader(keyspace string, to dest, keys ...[]byte) *kvv1.RequestHeader {
	c.mu.Lock()
	defer c.mu.Unlock()
	sess := c.mu.session
	if c.fullNext.Swap(false) || c.movesLocked(to) {
		return &kvv1.RequestHeader{Keyspace: keyspace, Session: c.fullToken()}
	}
	// Keys without a floor of their own all get the same part (MaxHLC,
	// PastHLC, the fallbacks, every shard floor of the keyspace): reuse its
	// encoding while none of those changed (ShardGeneration counts
	// changes of shard floors and fallbacks).
	floorless := true
	for _, k := range keys {
		if sess.HasKeyFloor(keyspace, k) {
			floorless = false
			break
		}
	}
	rc := &c.mu.readTok
	if floorless && rc.tok != nil && rc.keyspace == keyspace && rc.gen == sess.ShardGeneration() &&
		rc.maxHLC == sess.MaxHLC && rc.pastHLC == sess.PastHLC && rc.site == sess.Site && rc.cluster == sess.Cluster {
		return &kvv1.RequestHeader{Keyspace: keyspace, Session: rc.tok}
	}
	// Without the key's shard, ForRead includes every shard floor of the
	// keyspace (at most its shard count).
	tok := sess.ForRead(keyspace, keys, nil).Encode()
	if floorless {
		*rc = readTokCache{keyspace: keyspace, gen: sess.ShardGeneration(), maxHLC: sess.MaxHLC, pastHLC: sess.PastHLC, site: sess.Site, cluster: sess.Cluster, tok: tok}
	}
	return &kvv1.RequestHeader{Keyspace: keyspace, Session: tok}
}

// fullToken encodes the whole session (REQUIRES: c.mu).
func (c *Client) fullToken() []byte {
	full := c.mu.session.Clone()
	full.Partial = false
	return full.Encode()
}

// readTokCache is the encoded read part of the session for keys without
// a key floor; the token bytes are shared by requests and never modified.
type readTokCache struct {
	keyspace        string
	gen             uint64
	maxHLC, pastHLC uint64
	site            string // the session's last site: a move is sent
	cluster         uint64
	tok             []byte
}

// scanHeader returns the request header of a scan of [start, end) sent
// to to.
func (c *Client) scanHeader(keyspace string, to dest, start, end []byte) *kvv1.RequestHeader {
	c.mu.Lock()
	if c.fullNext.Swap(false) || c.movesLocked(to) {
		defer c.mu.Unlock()
		return &kvv1.RequestHeader{Keyspace: keyspace, Session: c.fullToken()}
	}
	part := c.mu.session.ForScan(keyspace, start, end)
	c.mu.Unlock()
	return &kvv1.RequestHeader{Keyspace: keyspace, Session: part.Encode()}
}

// writeHeader returns the request header of a mutation: it carries the
// largest HLC the session saw, which the new version will exceed, and the
// session's dependencies, which the write will carry to other sites. It
// also returns that part, for writeDone. A write that takes the session
// to another site (to) carries the whole session.
func (c *Client) writeHeader(keyspace string, to dest) (*kvv1.RequestHeader, *causal.Session) {
	c.mu.Lock()
	var part *causal.Session
	if c.fullNext.Swap(false) || c.movesLocked(to) {
		part = c.mu.session.Clone()
		part.Partial = false
	} else {
		part = c.mu.session.ForWrite()
	}
	c.mu.Unlock()
	return &kvv1.RequestHeader{Keyspace: keyspace, Session: part.Encode()}, part
}

// writeDone drops the dependencies a successful write carried: the
// session now depends on the write instead (its reply, merged, added it).
func (c *Client) writeDone(sent *causal.Session) {
	if sent == nil {
		return
	}
	c.mu.Lock()
	c.mu.session.DropDeps(sent)
	c.mu.Unlock()
}

// mergeReply folds what a reply observed into the session. A reply without
// a session token (from a server that returns none) records the versions
// the caller passes instead.
func (c *Client) mergeReply(h *kvv1.ResponseHeader, keyspace string, items ...observed) {
	tok := h.GetSession()
	if len(tok) == 0 {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, it := range items {
			if !it.v.IsZero() {
				c.mu.session.Observe(keyspace, it.key, it.v)
			}
		}
		return
	}
	s, err := causal.DecodeSession(tok)
	if err != nil {
		c.log.Warn("client: ignoring malformed session token in reply", "node", h.GetNodeId(), "err", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.session.Merge(s)
}

// observed is a version a reply returned for a key.
type observed struct {
	key []byte
	v   Version
}

// observe records a version the client received for a key outside a
// reply header (the current version of a compare-and-swap conflict).
func (c *Client) observe(keyspace string, key []byte, v Version) {
	if v.IsZero() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.session.Observe(keyspace, key, v)
}

// requestID returns a fresh request id for one mutation; every attempt of
// the mutation carries the same one.
func (c *Client) requestID() *kvv1.RequestID {
	return &kvv1.RequestID{ClientId: c.cfg.ClientID, Seq: c.seq.Add(1)}
}

// invoke runs call against the current endpoint, retrying and failing over
// as described in the package documentation. call receives the attempt's
// context and the index of the endpoint to use.
func (c *Client) invoke(ctx context.Context, o callOptions, call func(ctx context.Context, ep int) error) error {
	if c.closed.Load() {
		return ErrClosed
	}
	pinned := -1
	if o.endpoint != "" {
		pinned = slices.Index(c.cfg.Endpoints, o.endpoint)
		if pinned < 0 {
			return invalidArgument("endpoint %q is not configured", o.endpoint)
		}
	}
	if !utf8.ValidString(o.keyspace) {
		// gRPC would fail to encode the request (INTERNAL): it is the
		// caller's argument that is wrong.
		return invalidArgument("keyspace %s is not valid UTF-8", strconv.QuoteToASCII(truncate(o.keyspace, maxQuotedKeyspace)))
	}
	n := len(c.cfg.Endpoints)
	if pinned < 0 {
		if err := c.waitStart(ctx); err != nil {
			return err
		}
	}
	failovers := 0
	// stay is, once an attempt of a mutation may have reached a node, the
	// site of that node: the mutation may be applied there, and only a
	// node of that site recognizes its request id, so the retries stay at
	// that site. Another site would apply it a second time, with another
	// version. Empty while no attempt may have reached a node, or when
	// the node's site is unknown.
	var stay string
	// answered is the last error a server answered with before the
	// attempt's deadline: when a later attempt ends only by the caller's
	// deadline, it says why the call did not succeed.
	var answered error
	start := time.Now()
	for attempt := 0; ; attempt++ {
		ep := pinned
		if ep < 0 {
			ep = int(c.cur.Load())
			if fb := c.failback.Load(); ep != 0 && fb != 0 && time.Now().UnixNano() >= fb && c.failback.CompareAndSwap(fb, 0) {
				c.cur.Store(0)
				ep = 0
				c.fullNext.Store(true)
				if c.routes != nil {
					c.routes.reset()
				}
				c.log.Debug("client: back to the first endpoint", "endpoint", c.cfg.Endpoints[0])
			}
		}
		actx, cancel := context.WithTimeout(ctx, c.attemptTimeout(ctx, o, pinned < 0 && n > 1))
		err := call(actx, ep)
		cut := actx.Err() != nil || cutByServer(actx, err)
		cancel()
		if err == nil {
			return nil
		}
		if c.closed.Load() && ctx.Err() == nil && closedUnder(err) {
			return errClosedInFlight(err)
		}
		if !cut {
			answered = err
		}
		if cerr := ctx.Err(); cerr != nil && !fromContext(err) {
			if retry, _ := retryable(context.Background(), err); retry {
				// The attempt failed in a way another attempt may fix
				// (a node that could not reach a shard leader, a leader
				// being elected), but the caller's context ended as it
				// did: the error says so, or it would read as the
				// client's giving up on the first failure.
				return callError(err, cut, answered, cerr, attempt+1, time.Since(start))
			}
		}
		retry, failover := retryable(ctx, err)
		failover = failover && pinned < 0 && n > 1
		if o.mutation && stay == "" && failover && mayHaveReached(err) {
			stay = c.endpointSite(ctx, ep)
		}
		next := ep
		if failover {
			next = c.nextEndpoint(ctx, ep, stay)
			failover = next != ep
		}
		if failover {
			// The next attempt, of this call or of the next one when this
			// one does not retry, goes to the next endpoint.
			if c.cur.CompareAndSwap(int64(ep), int64(next)) {
				c.movedTo(next)
			}
			c.log.Debug("client: failing over", "from", c.cfg.Endpoints[ep], "to", c.cfg.Endpoints[next], "err", err)
		}
		if tooLarge(err) {
			return tooLargeError(err)
		}
		if !retry || attempt >= c.cfg.MaxRetries || c.closed.Load() {
			return callError(err, cut, answered, nil, attempt+1, time.Since(start))
		}
		if failover {
			failovers++
			if failovers < n {
				continue // try every other endpoint once before backing off
			}
		}
		wait := c.backoff(attempt)
		c.log.Debug("client: retrying", "endpoint", c.cfg.Endpoints[ep], "attempt", attempt+1, "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			var ended error
			if !fromContext(err) {
				ended = ctx.Err()
			}
			return callError(err, cut, answered, ended, attempt+1, time.Since(start))
		case <-t.C:
		}
	}
}

// movedTo does what follows the move of the calls to endpoint ep (a
// failover, or the pick of the endpoint to start with): the next request
// carries the whole session, the routes of the old endpoint's site go,
// and the client goes back to the first endpoint FailbackAfter later.
func (c *Client) movedTo(ep int) {
	c.fullNext.Store(true)
	if c.routes != nil {
		c.routes.reset()
	}
	if c.cfg.FailbackAfter > 0 && ep != 0 {
		c.failback.Store(time.Now().Add(c.cfg.FailbackAfter).UnixNano())
	}
}

// minReadAttempt is the least time an attempt of a read is given when
// attemptTimeout splits the caller's time.
const minReadAttempt = 250 * time.Millisecond

// attemptTimeout returns how long the next attempt of a call may take:
// RequestTimeout, or for a read that may go to another endpoint (others)
// at most half of the time the caller's deadline leaves, and no less than
// minReadAttempt. A node that accepts calls and answers none (stopped,
// hung, cut off after the connection was made) is then left within one
// call, which tries the next endpoint, and so do the calls after it:
// bounded by RequestTimeout alone, every call with a shorter deadline
// would end on that node until the connection's keepalive dropped it.
// A mutation keeps RequestTimeout: once an attempt may have reached a
// node, its retries stay at that node's site.
func (c *Client) attemptTimeout(ctx context.Context, o callOptions, others bool) time.Duration {
	d := c.cfg.RequestTimeout
	if !o.read || !others {
		return d
	}
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(dl)/2, minReadAttempt))
	}
	return d
}

// fromContext reports whether err is a context's end (the attempt's or
// the caller's), as gRPC reports it.
func fromContext(err error) bool {
	code := status.Code(err)
	return code == codes.DeadlineExceeded || code == codes.Canceled
}

// closedUnder reports whether err is how gRPC fails a call whose
// connection or call stream Close ended: CANCELED (the stream's context,
// or "the client connection is closing") or UNAVAILABLE.
func closedUnder(err error) bool {
	code := status.Code(err)
	return code == codes.Canceled || code == codes.Unavailable
}

// errClosedInFlight is the error of a call that Close ended while it was
// in flight: ErrClosed, not the "context canceled" gRPC reports, which
// would blame the caller's context. A mutation may have been applied.
func errClosedInFlight(err error) error {
	return fmt.Errorf("%w: Close ended the call in flight (a write may have been applied; %v)", ErrClosed, status.Convert(err).Message())
}

// mayHaveReached reports whether a failed attempt may have reached a node
// (and so, for a mutation, been applied): every retryable failure but a
// connection that could not be made.
func mayHaveReached(err error) bool {
	return !strings.HasPrefix(status.Convert(err).Message(), "connection error:")
}

// endpointSite returns the site of endpoint ep's node: the one its replies
// named, or else the one its Status reports now; empty if unknown.
func (c *Client) endpointSite(ctx context.Context, ep int) string {
	if s := c.sites[ep].Load(); s != nil {
		return *s
	}
	ctx, cancel := context.WithTimeout(ctx, min(c.cfg.RequestTimeout, 2*time.Second))
	defer cancel()
	st, err := c.admin[ep].Status(ctx, &adminv1.StatusRequest{})
	if err != nil || st.GetSite() == "" {
		return ""
	}
	c.noteSite(ep, st.GetSite())
	return st.GetSite()
}

// noteSite records that endpoint ep's node is of site.
func (c *Client) noteSite(ep int, site string) {
	if site == "" {
		return
	}
	if s := c.sites[ep].Load(); s == nil || *s != site {
		c.sites[ep].Store(&site)
	}
}

// nextEndpoint returns the endpoint after ep to fail over to: the next
// one, or with stay set the next one of site stay. It returns ep when no
// other endpoint is of site stay.
func (c *Client) nextEndpoint(ctx context.Context, ep int, stay string) int {
	n := len(c.cfg.Endpoints)
	for i := 1; i < n; i++ {
		next := (ep + i) % n
		if stay == "" || c.endpointSite(ctx, next) == stay {
			return next
		}
	}
	return ep
}

// cutByServer reports whether err is the server's end of the attempt's
// deadline: gRPC passes the deadline on, and the server's copy can run
// out a moment before the client's, so the attempt ends DEADLINE_EXCEEDED
// while actx still has a few milliseconds left. A DEADLINE_EXCEEDED the
// server chose to answer (a causal floor not reached in time) comes well
// before the deadline.
func cutByServer(actx context.Context, err error) bool {
	dl, ok := actx.Deadline()
	return ok && status.Code(err) == codes.DeadlineExceeded && time.Until(dl) < 100*time.Millisecond
}

// callError returns the error of a call whose last attempt failed with
// err. The server's text describes that attempt only (a wait it timed, a
// change it did not see taken), so when the call made several attempts
// the error also says how many and how long the whole call took. If the
// last attempt was cut by a deadline and an earlier one was answered, the
// error (with err's code) also says what the server answered, unless err
// says it already (with other times or versions): a wait that the server
// explained (a session moving between sites, a write waiting for other
// sites) is otherwise reported as a bare deadline. ended is the caller's
// context's error when it ended the call before err could be retried:
// the error says so, and how many attempts the call made, even one. A
// status error keeps its code and details.
func callError(err error, cut bool, answered, ended error, attempts int, took time.Duration) error {
	var notes []string
	if cut && answered != nil && answered != err {
		msg, last := status.Convert(answered).Message(), status.Convert(err).Message()
		if !strings.Contains(last, msg) && withoutNumbers(last) != withoutNumbers(msg) {
			notes = append(notes, "the last answer before it: "+msg)
		}
	}
	if ended != nil {
		notes = append(notes, fmt.Sprintf("the caller's context ended (%v) before it could be retried", ended))
	}
	switch {
	case attempts > 1:
		notes = append(notes, fmt.Sprintf("the call made %d attempts in %v", attempts, took.Round(time.Millisecond)))
	case ended != nil:
		notes = append(notes, fmt.Sprintf("the call made 1 attempt in %v", took.Round(time.Millisecond)))
	}
	if len(notes) == 0 {
		return err
	}
	note := " (" + strings.Join(notes, "; ") + ")"
	if se, ok := err.(interface{ GRPCStatus() *status.Status }); ok && se.GRPCStatus() != nil {
		p := se.GRPCStatus().Proto()
		p.Message += note
		return status.FromProto(p).Err()
	}
	return fmt.Errorf("%w%s", err, note)
}

// withoutNumbers returns msg with every run of digits and dots replaced by
// "#": two answers of the server that differ only in the times or
// versions they name say the same.
func withoutNumbers(msg string) string {
	var b strings.Builder
	num := false
	for _, r := range msg {
		if r >= '0' && r <= '9' || r == '.' && num {
			if !num {
				b.WriteByte('#')
			}
			num = true
			continue
		}
		num = false
		b.WriteRune(r)
	}
	return b.String()
}

// routeKey names the key a call is about, for leader routing; learn
// reports that a successful reply comes from the key's shard leader (true
// for writes, which the server answers from the leader).
type routeKey struct {
	keyspace string
	key      []byte
	learn    bool
}

// invokeKV is invoke for a KV call about one key that the shard leader
// serves best. Unless the call is pinned or routing is off, each attempt
// first goes straight to the leader the routing table names; if that
// fails in a retryable way, the attempt (and the rest of the call) goes to
// the current endpoint instead, which forwards as needed.
// A nil rk never routes.
func (c *Client) invokeKV(ctx context.Context, o callOptions, rk *routeKey, call func(ctx context.Context, kv kvv1.KVClient, to dest) (*kvv1.ResponseHeader, error)) error {
	routed := c.routes != nil && o.endpoint == "" && rk != nil
	return c.invoke(ctx, o, func(ctx context.Context, ep int) error {
		if routed {
			// The routes name the leaders of the site of the current
			// endpoint, ep.
			if lc, sh, _ := c.routes.leaderFor(rk.keyspace, rk.key, c.fetchRoutes); lc != nil {
				h, err := watchNode(ctx, lc.admin, func(ctx context.Context) (*kvv1.ResponseHeader, error) {
					return call(ctx, lc.kv, o.at(ep))
				})
				if err == nil {
					if rk.learn {
						c.routes.learn(rk.keyspace, rk.key, h.GetNodeId(), c.fetchRoutes)
					}
					return nil
				}
				retry, _ := retryable(context.Background(), err)
				if retry {
					// The next attempts (and calls) do not go straight
					// to that node until the table names it again.
					c.routes.invalidate(sh, c.fetchRoutes)
				}
				if !retry || ctx.Err() != nil {
					return err
				}
				c.log.Debug("client: leader route failed; using the endpoint", "shard", sh.String(), "err", err)
				routed = false
			}
		}
		h, err := watchNode(ctx, c.admin[ep], func(ctx context.Context) (*kvv1.ResponseHeader, error) {
			return call(ctx, c.kv[ep], o.at(ep))
		})
		if err == nil {
			c.noteSite(ep, h.GetSite())
		}
		if err == nil && rk != nil && rk.learn && c.routes != nil {
			c.routes.learn(rk.keyspace, rk.key, h.GetNodeId(), c.fetchRoutes)
		}
		return err
	})
}

// A node that stopped answering without closing its connections (a
// process stopped with SIGSTOP, hung, or cut off by a link that drops its
// packets) fails no call made to it: a call sent to it, straight to it as
// a shard's leader or as the current endpoint, would wait for the whole
// attempt (a mutation's is RequestTimeout, 10 s by default), far longer
// than the shard takes to elect another leader (2 to 6 s). So a call
// still unanswered after probeAfter has the node probed with an Admin
// Status call on the same connection, again every probeAfter, and a
// probe unanswered within probeTimeout ends the call as UNAVAILABLE: a
// call sent to a leader goes on at the current endpoint, which forwards
// it to the shard's leader (the new one once elected) and watches its
// own forward the same way; a call to the endpoint fails over to the
// next endpoint (of the same site, for a mutation that may have reached
// the node). A node that is only slow (a write waiting for an election,
// or for other sites) answers its probes and keeps the call. A mutation
// so sent twice applies once (its request id).
const (
	probeAfter   = time.Second
	probeTimeout = time.Second
)

// watchNode runs call, a call to the node admin reaches, and ends it as
// UNAVAILABLE when the node stops answering (see probeAfter).
func watchNode(ctx context.Context, admin adminv1.AdminClient, call func(context.Context) (*kvv1.ResponseHeader, error)) (*kvv1.ResponseHeader, error) {
	if admin == nil {
		return call(ctx)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	var silent atomic.Bool
	probe := time.AfterFunc(probeAfter, func() {
		for {
			pctx, pcancel := context.WithTimeout(cctx, probeTimeout)
			_, err := admin.Status(pctx, &adminv1.StatusRequest{})
			pcancel()
			if code := status.Code(err); (code == codes.DeadlineExceeded || code == codes.Unavailable) && cctx.Err() == nil {
				silent.Store(true)
				cancel()
				return
			}
			select {
			case <-done:
				return
			case <-cctx.Done():
				return
			case <-time.After(probeAfter):
			}
		}
	})
	h, err := call(cctx)
	close(done)
	probe.Stop()
	if err != nil && silent.Load() {
		return nil, status.Errorf(codes.Unavailable, "client: the node stopped answering (no answer to a status probe within %v)", probeTimeout)
	}
	return h, err
}

// fetchRoutes reads the routing table from the current endpoint.
func (c *Client) fetchRoutes(ctx context.Context) (*routeTable, error) {
	ctx, cancel := context.WithTimeout(ctx, min(c.cfg.RequestTimeout, 5*time.Second))
	defer cancel()
	return fetchRoutes(ctx, c.admin[c.cur.Load()], time.Now)
}

// retryable classifies a failed attempt: whether to retry it and whether
// to move to another endpoint first. Nothing is retried once the caller's
// context is done.
func retryable(ctx context.Context, err error) (retry, failover bool) {
	if ctx.Err() != nil {
		return false, false
	}
	switch status.Code(err) {
	case codes.Unavailable:
		return true, true
	case codes.DeadlineExceeded:
		// The attempt's RequestTimeout expired (or the server gave up
		// waiting for causality) while the caller still has time: the node
		// may be partitioned or behind, so try another.
		return true, true
	case codes.ResourceExhausted:
		// gRPC's refusal of a message over its size limit is the same on
		// every attempt.
		return !tooLarge(err), false
	case codes.Aborted:
		return true, false
	}
	return false, false
}

// tooLarge reports whether err is gRPC refusing a message of the call over
// its size limit, at the node (a request) or here (a reply): the message
// would be refused again on every attempt.
func tooLarge(err error) bool {
	st := status.Convert(err)
	return st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max")
}

// tooLargeError turns gRPC's refusal of a message over its size limit into
// an InvalidArgument error that says what the limits are: the node's own
// limit on values (kvd --max-value-bytes) is lower and answered with its
// own message, so a request refused by gRPC holds a value far over it.
func tooLargeError(err error) error {
	return invalidArgument("the message is larger than gRPC accepts (%s): a node refuses keys over 4 KiB and values over its --max-value-bytes (1 MiB by default), and a reply is at most 64 MiB: send smaller values or ask for fewer keys per call", status.Convert(err).Message())
}

// backoff returns the jittered wait before retry number attempt+1.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.RetryBackoff << min(attempt, maxBackoffShift)
	if d <= 1 {
		return d
	}
	return d/2 + time.Duration(mrand.Int64N(int64(d/2)+1))
}
