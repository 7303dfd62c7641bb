// Package client is the Go client library of Causeway, a geo-replicated
// key-value database.
//
// A Client talks gRPC (api/proto/kv/v1 and api/proto/admin/v1) to one node
// at a time out of a list of endpoints, and owns four things a caller would
// otherwise have to get right by hand:
//
//   - The causal session. The client keeps the session of causal context
//     (package internal/causal) and sends with every data request the part
//     of it the request needs (the floors of the keys it reads); it merges
//     what every reply observed. Consecutive calls of one
//     Client therefore form one causal session: read-your-writes, monotonic
//     reads, monotonic writes and writes-follow-reads hold even when the
//     calls are served by different nodes or sites. SessionToken exports the
//     session and Config.SessionToken resumes it, so that separate processes
//     (kvctl invocations, stateless front ends) can continue one session.
//   - Retries. Calls failing with Unavailable, ResourceExhausted or Aborted,
//     and attempts that ran out of Config.RequestTimeout while the caller's
//     context is still live, are retried with exponential backoff up to
//     Config.MaxRetries times. Every mutation carries a request id
//     (Config.ClientID plus a sequence number) that stays the same across
//     retries, so the server applies a retried mutation at most once.
//     Request ids are remembered by each site, not across sites: once an
//     attempt of a mutation may have reached a node (anything but a
//     connection that could not be made), the mutation is retried only on
//     endpoints of that node's site, learned from replies or asked with
//     Status. When none of them answers, the call fails, and the mutation
//     may have been applied there; it is never applied a second time, under
//     another version, at another site. The error of a call that made
//     several attempts ends with how many and how long the call took in
//     all (the server's text describes the last attempt only), and the
//     error of a call a deadline cut also quotes the last answer a server
//     gave before it, unless it says the same. A call whose caller's
//     context ended as an attempt failed in a retryable way (the node
//     called could not reach the shard leader, say), or while it waited to
//     retry, fails with that attempt's error, which then says that the
//     context ended the call before it could be retried and how many
//     attempts it made, even one.
//     A keyspace that is not valid UTF-8 fails INVALID_ARGUMENT before
//     anything is sent. A message that gRPC refuses for its size (a value
//     far over the node's limit) fails INVALID_ARGUMENT after one attempt,
//     with a message that gives the limits: every retry would send it in
//     vain.
//   - Endpoint failover. New dials every endpoint at once; the first
//     calls wait until one is ready and start at the first, in the
//     configured order, whose connection is ready, once every endpoint
//     before it could not connect or is still connecting a while (at
//     least 300 ms) after it was ready: a node that takes connections and
//     answers nothing gets no call (a call whose context ends first fails
//     with its context's code, naming each endpoint and how far its
//     connection got). When an endpoint is unavailable the client moves to
//     the next one and stays there until that one fails in turn. An
//     attempt that runs out of time without an answer also moves it. A
//     read (Get, BatchGet, Scan, ScanAll, History, GetTxn) that may go to
//     another endpoint bounds each attempt to half of the time left to the
//     caller's deadline (at least 250 ms, at most Config.RequestTimeout),
//     so that a node that takes calls and answers none (stopped, hung) is
//     left within one call, which tries the next endpoint, and the calls
//     after it start there. A mutation's attempts keep
//     Config.RequestTimeout. A Put, Get or Delete that a node has not
//     answered for a second has the node probed (an Admin Status call on
//     the same connection, answered within a second, again every second);
//     a node that answers no probe (stopped, hung, cut off) is left as
//     UNAVAILABLE: the call fails over to the next endpoint (of the same
//     site, for a mutation that may have reached the node), or, sent
//     straight to a shard leader, goes on at the current endpoint. Other
//     calls, and mutations given a deadline shorter than two seconds,
//     sent to a hung node fail with DEADLINE_EXCEEDED (a mutation may
//     have reached the node) until the connection's keepalive drops it.
//   - Leader routing. Writes and STRONG reads of one key are served by the
//     leader of the key's shard. The client learns the shard leaders and the
//     nodes' addresses from the Admin API in the background (every
//     Config.RouteRefresh while in use, sooner when a leader fails or a
//     write's reply names another leader) and sends those calls straight
//     to the leader, saving the hop a node takes to forward them. Whenever
//     it does not know the leader, or the leader fails, the call goes to
//     the current endpoint as above. CAUSAL reads stay on the current
//     endpoint, where any replica serves them; calls pinned with
//     WithEndpoint are never rerouted. Config.DisableLeaderRouting turns it
//     off.
//   - Call streams. Put, Get and Delete travel as messages of one
//     long-lived stream per connection (KV.Stream), answered by id, which
//     costs both ends less than a unary gRPC call each; answers and errors
//     are those of the unary calls. Requests over 256 KiB, calls with
//     gRPC call options and every call to a server without the stream go
//     unary. Config.DisableCallStream sends every call unary.
//
// Errors returned by the data methods wrap the gRPC status error with the
// operation's name ("client: put: ..."), so status.Code(err) and
// status.FromError(err) work on them. Invalid arguments detected locally are
// reported as codes.InvalidArgument too. A failed CompareAndSwap returns a
// *ConflictError carrying the key's current version. A Get of a missing key
// is not an error: the returned Item has Found false.
//
// Package clienttest runs an in-memory fake node for testing code built on
// this package without a server.
//
// A Client is safe for concurrent use. Usage:
//
//	cfg := client.DefaultConfig()
//	cfg.Endpoints = []string{"10.0.0.1:7379", "10.0.0.2:7379"}
//	c, err := client.New(ctx, cfg)
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//
//	v, err := c.Put(ctx, []byte("greeting"), []byte("hello"))
//	if err != nil {
//		return err
//	}
//	it, err := c.Get(ctx, []byte("greeting")) // sees the put: same session
//	if err != nil {
//		return err
//	}
//	fmt.Printf("%s (version %s, found %v)\n", it.Value, it.Version, it.Found)
//
//	// Optimistic update: swap only if nobody wrote since our put.
//	_, err = c.CompareAndSwap(ctx, []byte("greeting"), client.ExpectVersion(v), []byte("hi"))
//	var conflict *client.ConflictError
//	if errors.As(err, &conflict) {
//		fmt.Println("lost the race; current version", conflict.Current)
//	}
package client
