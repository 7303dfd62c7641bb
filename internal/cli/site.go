package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/client"
)

// Site-wide commands: cluster members, cluster shards, node drain and node
// remove. Any node of the site answers them, so unlike cluster status they
// make one call that fails over between --endpoints.

type jsonMember struct {
	NodeID     string `json:"node_id"`
	Site       string `json:"site"`
	State      string `json:"state"`
	Draining   bool   `json:"draining"`
	Replicas   uint32 `json:"replicas"`
	ClientAddr string `json:"client_addr"`
	PeerAddr   string `json:"peer_addr"`
	GossipAddr string `json:"gossip_addr"`
}

func (a *app) clusterMembersCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List the nodes of the site",
		Long: `Ask a node of the site (the first of --endpoints that answers) for the site's
nodes: gossip state (alive, suspect, dead, left; unknown for a node the site
catalog knows but gossip does not report), whether the node is draining, how
many shard replicas the placement map assigns it, and its client, peer and
gossip addresses. A last line gives the placement epoch, the node leading
the site catalog and the replicas per shard the site places (the largest kvd
--replicas of its alive nodes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Members(ctx)
				if err != nil {
					return err
				}
				if a.json() {
					doc := struct {
						PlacementEpoch   uint64       `json:"placement_epoch"`
						CatalogLeader    string       `json:"catalog_leader"`
						ReplicasPerShard uint32       `json:"replicas_per_shard,omitempty"`
						Members          []jsonMember `json:"members"`
					}{resp.GetPlacementEpoch(), resp.GetCatalogLeader(), resp.GetReplicasPerShard(), []jsonMember{}}
					for _, m := range resp.GetMembers() {
						doc.Members = append(doc.Members, jsonMember{
							NodeID: m.GetNodeId(), Site: m.GetSite(), State: m.GetState(), Draining: m.GetDraining(),
							Replicas: m.GetReplicas(), ClientAddr: m.GetClientAddr(), PeerAddr: m.GetPeerAddr(), GossipAddr: m.GetGossipAddr(),
						})
					}
					return writeJSON(a.env.Stdout, doc)
				}
				tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NODE\tSITE\tSTATE\tDRAINING\tREPLICAS\tCLIENT\tPEER\tGOSSIP")
				for _, m := range resp.GetMembers() {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", dash(m.GetNodeId()), dash(m.GetSite()), dash(m.GetState()),
						yesNo(m.GetDraining()), m.GetReplicas(), dash(m.GetClientAddr()), dash(m.GetPeerAddr()), dash(m.GetGossipAddr()))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				perShard := ""
				if r := resp.GetReplicasPerShard(); r > 0 {
					perShard = fmt.Sprintf(", %d replicas per shard (the largest kvd --replicas of the site's alive nodes)", r)
				}
				_, err = fmt.Fprintf(a.env.Stdout, "\nplacement epoch %d, catalog leader %s%s\n", resp.GetPlacementEpoch(), orNone(resp.GetCatalogLeader()), perShard)
				return err
			})
		},
	}
}

type jsonReplica struct {
	NodeID       string `json:"node_id"`
	Role         string `json:"role"`
	State        string `json:"state"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
}

type jsonSiteShard struct {
	Keyspace string        `json:"keyspace"`
	Shard    uint32        `json:"shard"`
	Leader   string        `json:"leader"`
	Replicas []jsonReplica `json:"replicas"`
}

func (a *app) clusterShardsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "shards [--keyspace KS]",
		Short: "List the shards of the site and their replicas",
		Long: `Ask a node of the site (the first of --endpoints that answers) for every
shard of --keyspace (of every keyspace if --keyspace is not given) with its
replicas as the placement map assigns them: one row per replica with the
shard's leader, the replica's node and role (voter or learner), and its raft
state, commit and applied index as reported by the node holding it
("unreachable" if that node did not answer). A last line gives the
placement epoch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keyspace := ""
			if cmd.Flags().Changed("keyspace") {
				keyspace = a.keyspace
			}
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Shards(ctx, keyspace)
				if err != nil {
					return err
				}
				if a.json() {
					doc := struct {
						Keyspace       string          `json:"keyspace,omitempty"`
						PlacementEpoch uint64          `json:"placement_epoch"`
						Shards         []jsonSiteShard `json:"shards"`
					}{keyspace, resp.GetPlacementEpoch(), []jsonSiteShard{}}
					for _, sh := range resp.GetShards() {
						js := jsonSiteShard{Keyspace: sh.GetKeyspace(), Shard: sh.GetShard(), Leader: sh.GetLeader(), Replicas: []jsonReplica{}}
						for _, r := range sh.GetReplicas() {
							js.Replicas = append(js.Replicas, jsonReplica{NodeID: r.GetNodeId(), Role: role(r), State: r.GetState(),
								CommitIndex: r.GetCommitIndex(), AppliedIndex: r.GetAppliedIndex()})
						}
						doc.Shards = append(doc.Shards, js)
					}
					return writeJSON(a.env.Stdout, doc)
				}
				tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "KEYSPACE\tSHARD\tLEADER\tNODE\tROLE\tSTATE\tCOMMIT\tAPPLIED")
				for _, sh := range resp.GetShards() {
					if len(sh.GetReplicas()) == 0 {
						fmt.Fprintf(tw, "%s\t%d\t%s\t-\t-\t-\t-\t-\n", sh.GetKeyspace(), sh.GetShard(), dash(sh.GetLeader()))
					}
					for _, r := range sh.GetReplicas() {
						fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n", sh.GetKeyspace(), sh.GetShard(), dash(sh.GetLeader()),
							dash(r.GetNodeId()), role(r), dash(r.GetState()), r.GetCommitIndex(), r.GetAppliedIndex())
					}
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.env.Stdout, "\nplacement epoch %d, %d shards\n", resp.GetPlacementEpoch(), len(resp.GetShards()))
				return err
			})
		},
	}
}

func role(r *adminv1.ShardReplica) string {
	if r.GetVoter() {
		return "voter"
	}
	return "learner"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (a *app) nodeCommand() *cobra.Command {
	return groupCommand("node", "Node maintenance", a.drainCommand(), a.removeCommand())
}

// oneName accepts exactly one non-empty argument, named name in the
// command's usage and described by what.
func oneName(name, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usageErrorf("%s needs %s, %s", cmd.CommandPath(), name, what)
		case len(args) > 1:
			return usageErrorf("%s takes one %s, got %d arguments: %q", cmd.CommandPath(), name, len(args), args)
		case args[0] == "":
			return usageErrorf("%s is empty", name)
		}
		return nil
	}
}

func (a *app) removeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NODE",
		Short: "Remove a node that is gone for good from the site",
		Long: `Remove NODE, a node that will never return, from its site for good: the site
catalog forgets it, cluster members no longer lists it, and its node id is
never taken back. A kvd that runs under that id again is stopped with an
error (it would come back on data the site gave up), and one started on an
empty data directory under it is refused: use the machine again with an
empty data directory and a new --node-id.

The site refuses (exit code 5, with the reason and what to do) a node that
gossip reports alive or suspect (to retire a running node, drain it with
node drain --wait and stop it first), one that the placement map still
assigns shard replicas, and one that still votes in the site catalog: the
site re-creates the replicas, and gives up the catalog seat, of a node down
for longer than kvd's --dead-grace.

Prints the placement epoch that records the removal. Exits with code 1 if
the site does not know NODE or removed it already.`,
		Args: oneName("NODE", "the id of the node to remove (kvctl cluster members lists the site's nodes)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				resp, err := c.RemoveNode(ctx, node)
				if err != nil { // NotFound exits with ExitNotFound (ExitCode)
					return err
				}
				if a.json() {
					return writeJSON(a.env.Stdout, struct {
						NodeID         string `json:"node_id"`
						Removed        bool   `json:"removed"`
						PlacementEpoch uint64 `json:"placement_epoch"`
						PeerAddr       string `json:"peer_addr"`
						ClientAddr     string `json:"client_addr"`
					}{node, true, resp.GetPlacementEpoch(), resp.GetPeerAddr(), resp.GetClientAddr()})
				}
				_, err = fmt.Fprintf(a.env.Stdout, "node %s is removed from the site (placement epoch %d); its id is not taken back: "+
					"wipe its data directory, and start the machine again with a new --node-id\n", node, resp.GetPlacementEpoch())
				return err
			})
		},
	}
}

// drainWaitTimeout is the default deadline of node drain --wait.
const drainWaitTimeout = 10 * time.Minute

// drainAttemptTimeout bounds each call of node drain --wait, whose
// deadline is much longer than one call should take.
const drainAttemptTimeout = 5 * time.Second

// drainPollInterval is how often node drain --wait asks for progress;
// tests shorten it.
var drainPollInterval = time.Second

func (a *app) drainCommand() *cobra.Command {
	var undo, wait bool
	cmd := &cobra.Command{
		Use:   "drain NODE [--undo] [--wait]",
		Short: "Move every shard replica off a node",
		Long: `Mark NODE draining: the site moves each shard replica the node holds to other
nodes (the new replica catches up before the old one is removed) and gives it
no new ones, so that the node can then be stopped without losing redundancy.
With --undo the node takes replicas again as the site rebalances.

Without --wait the command returns once the site catalog recorded the change,
printing the placement epoch. With --wait it then asks the site every second
how many replicas NODE still holds, printing the count, until it holds none
(--wait with --undo returns at once). --timeout bounds the whole command; with
--wait it defaults to 10m.

If the site then has fewer live nodes that are not draining than replicas
per shard (kvd --replicas), for example a three-node site with one node
dead, or any node of a three-node site, the drain goes ahead but the shards
run with fewer replicas: the command says so first, on stderr (which
keyspaces, how many replicas instead of how many, and which nodes do not
count), and again on its first and last lines (and as "warning" in JSON).

Exits with code 1 if the site does not know NODE, and 4 if the time ran out.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			if node == "" {
				return usageErrorf("NODE is empty")
			}
			wait = wait && !undo
			deadline := a.timeout
			if wait {
				if !cmd.Flags().Changed("timeout") {
					deadline = drainWaitTimeout
				}
				if deadline == 0 || deadline > drainAttemptTimeout {
					a.attemptTimeout = drainAttemptTimeout
				}
			}
			return a.withClientDeadline(cmd, false, deadline, func(ctx context.Context, c *client.Client) error {
				var short *drainShortfall
				if !undo {
					short = checkDrain(ctx, c, node)
					if short != nil {
						fmt.Fprintf(a.env.Stderr, "kvctl: warning: %s; draining anyway (kvctl node drain %s --undo reverts it)\n", short, node)
					}
				}
				epoch, err := c.Drain(ctx, node, undo)
				if status.Code(err) == codes.NotFound {
					return withCode(ExitNotFound, fmt.Errorf("node %q not found in the site of the node that answered; kvctl cluster members lists the site's nodes", node))
				}
				if err != nil {
					return err
				}
				doc := struct {
					NodeID         string  `json:"node_id"`
					Draining       bool    `json:"draining"`
					PlacementEpoch uint64  `json:"placement_epoch"`
					Waited         bool    `json:"waited"`
					Replicas       *uint32 `json:"replicas,omitempty"`
					Warning        string  `json:"warning,omitempty"`
				}{NodeID: node, Draining: !undo, PlacementEpoch: epoch, Waited: wait}
				if short != nil {
					doc.Warning = short.String()
				}
				if !a.json() {
					what := "draining"
					if undo {
						what = "no longer draining"
					}
					fmt.Fprintf(a.env.Stdout, "node %s is %s (placement epoch %d)%s\n", node, what, epoch, short.suffix())
				}
				if wait {
					left, err := a.waitDrained(ctx, c, node, epoch, deadline, short)
					if err != nil {
						return err
					}
					doc.Replicas = &left
				}
				if a.json() {
					return writeJSON(a.env.Stdout, doc)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&undo, "undo", false, "stop draining NODE: let it take replicas again")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until NODE holds no shard replicas, printing progress")
	return cmd
}

// waitDrained polls Members until node, draining, holds no replicas in a
// placement map at least as new as epoch (the drain's). It prints the
// replicas left after every poll: on stdout in text output, on stderr in
// JSON output (whose stdout is one document). It returns the replicas
// left (0).
func (a *app) waitDrained(ctx context.Context, c *client.Client, node string, epoch uint64, deadline time.Duration, short *drainShortfall) (uint32, error) {
	progress := a.env.Stdout
	if a.json() {
		progress = a.env.Stderr
	}
	left := "unknown"
	stopped := func() error {
		if ctx.Err() == context.DeadlineExceeded {
			return withCode(ExitUnavailable, fmt.Errorf("timed out after %v waiting for node %s to drain (replicas left: %s)", deadline, node, left))
		}
		return fmt.Errorf("stopped waiting for node %s to drain (replicas left: %s): %w", node, left, ctx.Err())
	}
	for {
		resp, err := c.Members(ctx)
		switch {
		case ctx.Err() != nil:
			return 0, stopped()
		case err != nil:
			if ExitCode(err) != ExitUnavailable {
				return 0, err
			}
			fmt.Fprintf(progress, "%s: %s; retrying\n", node, errorMessage(err))
		case resp.GetPlacementEpoch() < epoch:
			// A node whose catalog replica has not applied the drain yet.
			fmt.Fprintf(progress, "%s: waiting for placement epoch %d (the answering node is at %d)\n", node, epoch, resp.GetPlacementEpoch())
		default:
			m := findMember(resp, node)
			switch {
			case m == nil:
				fmt.Fprintf(progress, "%s: not listed by the site yet\n", node)
			case !m.GetDraining():
				return 0, fmt.Errorf("node %s is no longer draining (undone by someone else?) with %s left", node, replicas(m.GetReplicas()))
			case m.GetReplicas() == 0:
				fmt.Fprintf(progress, "%s: drained, 0 replicas left (placement epoch %d)%s\n", node, resp.GetPlacementEpoch(), short.suffix())
				return 0, nil
			default:
				left = fmt.Sprint(m.GetReplicas())
				fmt.Fprintf(progress, "%s: %s left\n", node, replicas(m.GetReplicas()))
			}
		}
		if sleepCtx(ctx, drainPollInterval) != nil {
			return 0, stopped()
		}
	}
}

// drainShortfall describes a drain after which the site has fewer live
// nodes that are not draining than replicas per shard: the shards of
// Keyspaces then run with Live replicas (at most) instead of Want.
type drainShortfall struct {
	Node      string
	Want      uint32   // replicas per shard (kvd --replicas)
	Live      []string // the live nodes left to hold replicas
	Others    []string // the site's other nodes that cannot: "n3 (dead)"
	Keyspaces []string
}

func (d *drainShortfall) String() string {
	live := "no live node"
	if len(d.Live) > 0 {
		live = fmt.Sprintf("%d live %s (%s)", len(d.Live), plural(len(d.Live), "node", "nodes"), strings.Join(d.Live, ", "))
	}
	why := ""
	if len(d.Others) > 0 {
		why = "; not counted: " + strings.Join(d.Others, ", ")
	}
	return fmt.Sprintf("with %s drained the site has %s that %s not draining%s, for %d replicas per shard (kvd --replicas): "+
		"the shards of %s %s will run with %s instead of %d until nodes are added or come back",
		d.Node, live, plural(len(d.Live), "is", "are"), why, d.Want,
		plural(len(d.Keyspaces), "keyspace", "keyspaces"), strings.Join(d.Keyspaces, ", "), replicas(uint32(len(d.Live))), d.Want)
}

// suffix is what progress lines of a drain with a shortfall end with.
func (d *drainShortfall) suffix() string {
	if d == nil {
		return ""
	}
	return fmt.Sprintf("; shards will run with %s instead of %d (see the warning)", replicas(uint32(len(d.Live))), d.Want)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// checkDrain returns the shortfall that draining node leaves the site
// with, or nil if the site keeps enough live nodes that are not draining
// for every shard's replicas, or if it could not tell (the drain itself
// reports an unreachable site; an older node does not give the replicas
// per shard).
func checkDrain(ctx context.Context, c *client.Client, node string) *drainShortfall {
	m, err := c.Members(ctx)
	if err != nil || findMember(m, node) == nil || m.GetReplicasPerShard() == 0 {
		return nil
	}
	sh, err := c.Shards(ctx, "")
	if err != nil {
		return nil
	}
	d := &drainShortfall{Node: node, Want: m.GetReplicasPerShard()}
	for _, s := range sh.GetShards() {
		if !slices.Contains(d.Keyspaces, s.GetKeyspace()) {
			d.Keyspaces = append(d.Keyspaces, s.GetKeyspace())
		}
	}
	for _, mem := range m.GetMembers() {
		switch id := mem.GetNodeId(); {
		case id == node:
		case mem.GetState() != "alive":
			d.Others = append(d.Others, fmt.Sprintf("%s (%s)", id, mem.GetState()))
		case mem.GetDraining():
			d.Others = append(d.Others, id+" (draining)")
		default:
			d.Live = append(d.Live, id)
		}
	}
	if len(d.Keyspaces) == 0 || uint32(len(d.Live)) >= d.Want || len(d.Live) == 0 {
		// Enough nodes; or none, which the site refuses.
		return nil
	}
	slices.Sort(d.Keyspaces)
	return d
}

// replicas renders a replica count.
func replicas(n uint32) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}

func findMember(resp *adminv1.MembersResponse, node string) *adminv1.Member {
	for _, m := range resp.GetMembers() {
		if m.GetNodeId() == node {
			return m
		}
	}
	return nil
}

// sleepCtx waits for d or until ctx is done (then returning its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
