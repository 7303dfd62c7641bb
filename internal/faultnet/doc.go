// Package faultnet injects network faults into every kind of traffic a
// node sends: the raft transport, peer RPCs, forwarded requests, gossip
// (memberlist's Transport) and, later, the cross-site streams. It backs the
// tests' partitions and delays and the product's simulated wide-area
// network.
//
// A Net holds the fault rules and the endpoints they apply to. An endpoint
// is a node (site and node id); each node registers the addresses it
// listens on (Net.Register) and sends through its Host (Net.Host): the
// Host's Dial is the dialer of the node's gRPC connections, and its
// Transport wraps the node's memberlist transport. Traffic to an address
// nobody registered passes untouched, and a node without a Net has no
// faultnet code on its path at all.
//
// Rules apply per directed pair of nodes and per directed pair of sites;
// the rule of a message is the node pair's rule combined with its site
// pair's rule (delays and jitters add, losses combine, down if either is
// down). A Rule can:
//
//   - delay: every message from one endpoint to another is delivered
//     Delay plus a uniform [0, Jitter) later. Streams keep their order (a
//     later write is never delivered before an earlier one, as in TCP).
//   - lose: a packet (memberlist's UDP) is dropped with probability Loss;
//     on a stream, a lost segment is retransmitted, so it arrives
//     RetransmitDelay later instead (TCP semantics), and order is kept.
//   - partition (Down): packets are dropped, new connections fail, and on
//     established connections nothing is delivered in that direction until
//     the link heals; what was written meanwhile is delivered then, as TCP
//     retransmits it. One-way partitions cut one direction only.
//
// Two more inputs shape a message's rule. A simulated WAN (ParseWAN,
// Net.SetWAN; kvd --simulate-wan) adds a delay to every message between
// nodes of two different sites, resolved per site pair as nodes register,
// and none inside a site. A node can be cut off from a whole site
// (Net.IsolateFromSite; kvctl debug partition), which makes every link
// between it and that site's nodes down both ways until HealIsolation.
// Both are for tests and demonstrations only.
//
// A Host reports causeway_faultnet_messages_total{site,fault}, the
// messages to and from each remote site that were delayed, dropped
// (lost) or cut (partition), and causeway_faultnet_partitioned{site}.
//
// A stream connection is wrapped on the dialing side only: the dialer's
// Host applies the rule from itself to the peer to what it writes and the
// rule from the peer to itself to what it reads, so each direction is
// faulted once whatever the other side runs.
//
// Goroutines: a wrapped connection owns two, one delivering its writes and
// one receiving its reads; both end once the connection is closed and its
// last writes were delivered (or dropped after Linger on a link that stays
// down). A delayed packet is one timer. The Net itself starts none.
package faultnet
