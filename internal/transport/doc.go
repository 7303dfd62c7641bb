// Package transport carries the raft traffic of every raft group hosted by a
// node over one gRPC service (causeway.peer.v1.Raft) on the node's peer port.
//
// A Network is created once per node. Register adds its service to the
// node's peer gRPC server, which should be created with
// Config.ServerOptions (gRPC's default 4 MiB message limit is too small for
// large AppendEntries batches); Transport(group) opens the raft.Transport of one
// group (it also implements raft.WithClose and raft.WithPreVote, and its
// pipelines raft.AppendPipeline). Every request names its group, so all
// groups share the server and, on the sending side, one grpc.ClientConn per
// peer address (dialled lazily, kept until Network.Close).
//
// Contract:
//
//   - Incoming requests are validated, then handed to the group's consumer
//     channel as a raft.RPC; the handler waits for raft's answer, bounded by
//     the RPC's context and by the group transport's Close. A request for a
//     group this node does not host fails with codes.NotFound (raft retries;
//     normal while a replica is being created), a malformed one with
//     codes.InvalidArgument, a request raft answered with an error with
//     codes.Unknown. Nothing a peer sends makes this package panic.
//   - Every request carries the generation of the sender's replica of the
//     group (SetGeneration; docs/adr/014). One of another generation than
//     the receiving replica's is refused with codes.FailedPrecondition and
//     a peerv1.GenerationRefusal detail naming the receiver's (ErrGeneration
//     on the sending side). When either end shows that a newer generation
//     exists, the owner's OnNewerGeneration function is told; it may take
//     the newer generation (a replica with no state) and the request is
//     then served.
//   - Heartbeats (AppendEntries without entries, previous entry or commit
//     index) skip the consumer channel: they go to the handler raft set with
//     SetHeartbeatHandler, on the gRPC handler's goroutine, as in
//     raft.NetworkTransport.
//   - Unary RPCs are bounded by Config.RPCTimeout, InstallSnapshot by
//     Config.SnapshotTimeout. InstallSnapshot is a client stream: the request
//     first, then the snapshot in chunks of Config.SnapshotChunkBytes.
//   - AppendEntriesPipeline is one bidirectional stream per (group,
//     follower); the receiver answers requests one at a time in order, so
//     responses arrive in order. At most Config.MaxInFlight requests are
//     unanswered; the oldest one must be answered within RPCTimeout of being
//     sent or the pipeline fails (raft then falls back to plain
//     AppendEntries).
//   - A pipelined AppendEntries that carries nothing new (no entries, no
//     newer commit index: raft's message to an idle group's follower every
//     CommitTimeout) travels, when every earlier unanswered request of its
//     pipeline did too, in an AppendEntriesBatch with those of other groups
//     bound for the same node, Config.BatchDelay after the first of them
//     (batch.go). The receiver answers each as AppendEntries; the pipeline
//     hands raft the answers in its order. Entries sent meanwhile send the
//     batch at once. A peer that answers Unimplemented gets them one by one
//     for a minute.
//   - A leader's group transport tells a follower a commit index raft's
//     own messages did not carry within Config.CommitPushDelay
//     (commitpush.go). These pushes travel in the same AppendEntriesBatch
//     as the idle groups' messages, which is then sent CommitPushDelay
//     after the first push, or one by one to a peer that does not take
//     batches.
//   - With Config.KeepaliveInterval (the default), a leader's node sends
//     each node that follows one of its quiet groups (raft's messages to
//     that follower carry nothing new) a heartbeat of the group's term
//     every interval, all of them in one AppendEntriesBatch per node; the
//     follower's raft takes it on its heartbeat fast path. While a
//     keepalive the follower answered with success in that term was sent
//     within two intervals, raft's replication and heartbeats to it wait
//     without a timer (raft.WithQuiet, the node's copy of hashicorp/raft)
//     and the leader's lease counts that keepalive as contact; a failed
//     or unanswered keepalive, new entries or a new commit index wake
//     them (quiet.go). raft's own message that carries nothing new, when
//     it sends one, is answered by the leader's transport without being
//     sent under the same condition. Keepalives stop once raft stops
//     replicating to the follower (no open pipeline, or no request for
//     four intervals while not waiting quietly). VerifyLeader's
//     heartbeats are always sent.
//   - Closing a group transport unregisters the group (its name may be
//     opened again), fails its waiting handlers with codes.Unavailable and
//     closes its pipelines. Closing the Network closes every group transport
//     and every outgoing connection. An incoming pipeline stream ends when
//     its sender closes it, or at its next request after the group closed;
//     an idle group's stream may carry no request for a long time (its
//     messages travel in batches), so the peer server is stopped with Stop,
//     not GracefulStop.
//
// Goroutines: the Network starts one of its own, which sends keepalives
// (none with KeepaliveInterval 0); Close stops it. Incoming handlers run on
// the gRPC server's goroutines and return when raft answers, the RPC's
// context ends or the group transport closes. The InstallSnapshot handler is
// the only caller of the stream's Recv: raft's goroutine reads the snapshot
// through a reader that asks the handler for each chunk, and the reader
// fails once the handler has returned. Each outgoing pipeline owns one
// goroutine that receives its responses; it stops when the pipeline is
// closed (by raft, by the group transport's Close or by the Network's
// Close). The grpc.ClientConns' goroutines stop in Network.Close.
package transport
