package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/client"
)

// nodeResult is the outcome of a per-node call to one endpoint.
type nodeResult[T any] struct {
	endpoint string
	val      T
	err      error
}

// eachEndpoint calls fn once per configured endpoint, concurrently, pinned
// to that endpoint, and returns the results in endpoint order.
func eachEndpoint[T any](ctx context.Context, c *client.Client, fn func(ctx context.Context, pin client.Option) (T, error)) []nodeResult[T] {
	eps := c.Endpoints()
	out := make([]nodeResult[T], len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		out[i].endpoint = ep
		wg.Go(func() {
			out[i].val, out[i].err = fn(ctx, client.WithEndpoint(ep))
		})
	}
	wg.Wait()
	return out
}

// endpointsError summarises the failures of a per-node command: nil if
// every endpoint answered, else the first failure (with its exit code).
func endpointsError[T any](rs []nodeResult[T]) error {
	var first *nodeResult[T]
	failed := 0
	for i, r := range rs {
		if r.err != nil {
			failed++
			if first == nil {
				first = &rs[i]
			}
		}
	}
	switch {
	case failed == 0:
		return nil
	case len(rs) == 1:
		return rs[0].err
	}
	return withCode(ExitCode(first.err), fmt.Errorf("%d of %d endpoints failed; %s: %s", failed, len(rs), first.endpoint, errorMessage(first.err)))
}

func (a *app) clusterCommand() *cobra.Command {
	return groupCommand("cluster", "Inspect the cluster", a.clusterStatusCommand(), a.clusterMembersCommand(), a.clusterShardsCommand(), a.clusterSitesCommand(), a.clusterRepairCommand())
}

type jsonShard struct {
	Keyspace          string `json:"keyspace"`
	Shard             uint32 `json:"shard"`
	State             string `json:"state"`
	Leader            string `json:"leader"`
	Term              uint64 `json:"term"`
	CommitIndex       uint64 `json:"commit_index"`
	AppliedIndex      uint64 `json:"applied_index"`
	LastSnapshotIndex uint64 `json:"last_snapshot_index"`
}

type jsonNode struct {
	Endpoint      string      `json:"endpoint"`
	Error         string      `json:"error,omitempty"`
	NodeID        string      `json:"node_id,omitempty"`
	Site          string      `json:"site,omitempty"`
	Version       string      `json:"version,omitempty"`
	ClientAddr    string      `json:"client_addr,omitempty"`
	UptimeSeconds uint64      `json:"uptime_seconds,omitempty"`
	StorageBytes  uint64      `json:"storage_bytes,omitempty"`
	Keyspaces     []string    `json:"keyspaces,omitempty"`
	Shards        []jsonShard `json:"shards,omitempty"`
}

func (a *app) clusterStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show every endpoint's node, site and shard replicas",
		Long: `Ask every node listed in --endpoints for its status and print a table of the
nodes and one of their shard replicas (raft state, leader, term, commit and
applied index). Exits with code 4 if some endpoint did not answer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				rs := eachEndpoint(ctx, c, func(ctx context.Context, pin client.Option) (*adminv1.StatusResponse, error) {
					return c.Status(ctx, pin)
				})
				var err error
				if a.json() {
					err = writeJSON(a.env.Stdout, struct {
						Nodes []jsonNode `json:"nodes"`
					}{statusJSON(rs)})
				} else {
					err = a.printStatus(rs)
				}
				if err != nil {
					return err
				}
				return endpointsError(rs)
			})
		},
	}
}

func statusJSON(rs []nodeResult[*adminv1.StatusResponse]) []jsonNode {
	nodes := make([]jsonNode, 0, len(rs))
	for _, r := range rs {
		n := jsonNode{Endpoint: r.endpoint}
		if r.err != nil {
			n.Error = errorMessage(r.err)
			nodes = append(nodes, n)
			continue
		}
		st := r.val
		n.NodeID, n.Site, n.Version, n.ClientAddr = st.GetNodeId(), st.GetSite(), st.GetVersion(), st.GetClientAddr()
		n.UptimeSeconds, n.StorageBytes, n.Keyspaces = st.GetUptimeSeconds(), st.GetStorageBytes(), st.GetKeyspaces()
		for _, sh := range st.GetShards() {
			n.Shards = append(n.Shards, jsonShard{
				Keyspace: sh.GetKeyspace(), Shard: sh.GetShard(), State: sh.GetState(), Leader: sh.GetLeader(),
				Term: sh.GetTerm(), CommitIndex: sh.GetCommitIndex(), AppliedIndex: sh.GetAppliedIndex(),
				LastSnapshotIndex: sh.GetLastSnapshotIndex(),
			})
		}
		nodes = append(nodes, n)
	}
	return nodes
}

func (a *app) printStatus(rs []nodeResult[*adminv1.StatusResponse]) error {
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDPOINT\tNODE\tSITE\tVERSION\tUPTIME\tSTORAGE\tKEYSPACES")
	shards := 0
	var failed []string
	for _, r := range rs {
		if r.err != nil {
			// A row of its own width would break the table's columns:
			// the error is printed below it.
			fmt.Fprintf(tw, "%s\t(error)\t-\t-\t-\t-\t-\n", r.endpoint)
			failed = append(failed, fmt.Sprintf("%s: error: %s", r.endpoint, errorMessage(r.err)))
			continue
		}
		st := r.val
		shards += len(st.GetShards())
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.endpoint, dash(st.GetNodeId()), dash(st.GetSite()), dash(st.GetVersion()),
			humanUptime(st.GetUptimeSeconds()), humanBytes(st.GetStorageBytes()), dash(strings.Join(st.GetKeyspaces(), ",")))
	}
	if len(failed) > 0 {
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(a.env.Stdout)
		for _, f := range failed {
			fmt.Fprintln(a.env.Stdout, f)
		}
	}
	if shards > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "NODE\tSITE\tKEYSPACE\tSHARD\tSTATE\tLEADER\tTERM\tCOMMIT\tAPPLIED\tSNAPSHOT")
		for _, r := range rs {
			if r.err != nil {
				continue
			}
			st := r.val
			for _, sh := range st.GetShards() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\n", dash(st.GetNodeId()), dash(st.GetSite()),
					sh.GetKeyspace(), sh.GetShard(), dash(sh.GetState()), dash(sh.GetLeader()), sh.GetTerm(),
					sh.GetCommitIndex(), sh.GetAppliedIndex(), sh.GetLastSnapshotIndex())
			}
		}
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) adminCommand() *cobra.Command {
	return groupCommand("admin", "Maintenance operations", a.snapshotCommand())
}

func (a *app) snapshotCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot [--keyspace KS]",
		Short: "Force a raft snapshot on every endpoint's node",
		Long: `Ask every node listed in --endpoints to snapshot (and truncate the raft log
of) the shard replicas it hosts: those of --keyspace if given, else of every
keyspace. Prints the number of replicas snapshotted per node.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keyspace := ""
			if cmd.Flags().Changed("keyspace") {
				keyspace = a.keyspace
			}
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				rs := eachEndpoint(ctx, c, func(ctx context.Context, pin client.Option) (int, error) {
					return c.Snapshot(ctx, keyspace, pin)
				})
				var err error
				if a.json() {
					type node struct {
						Endpoint  string `json:"endpoint"`
						Snapshots int    `json:"snapshots"`
						Error     string `json:"error,omitempty"`
					}
					doc := struct {
						Keyspace string `json:"keyspace,omitempty"`
						Nodes    []node `json:"nodes"`
					}{Keyspace: keyspace}
					for _, r := range rs {
						n := node{Endpoint: r.endpoint, Snapshots: r.val}
						if r.err != nil {
							n.Error = errorMessage(r.err)
						}
						doc.Nodes = append(doc.Nodes, n)
					}
					err = writeJSON(a.env.Stdout, doc)
				} else {
					tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "ENDPOINT\tSNAPSHOTS")
					for _, r := range rs {
						if r.err != nil {
							fmt.Fprintf(tw, "%s\terror: %s\n", r.endpoint, errorMessage(r.err))
							continue
						}
						fmt.Fprintf(tw, "%s\t%d\n", r.endpoint, r.val)
					}
					err = tw.Flush()
				}
				if err != nil {
					return err
				}
				return endpointsError(rs)
			})
		},
	}
}
