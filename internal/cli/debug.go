package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/causeway-db/causeway/client"
)

// Debug commands: network faults injected by a node, for tests and
// demonstrations only. They act on every node of --endpoints.

type jsonDebugNode struct {
	Endpoint         string   `json:"endpoint"`
	Error            string   `json:"error,omitempty"`
	NodeID           string   `json:"node_id,omitempty"`
	Site             string   `json:"site,omitempty"`
	PartitionedSites []string `json:"partitioned_sites"`
}

func (a *app) debugCommand() *cobra.Command {
	return groupCommand("debug", "Inject network faults (test and demo only)", a.debugPartitionCommand(), a.debugHealCommand())
}

func (a *app) debugPartitionCommand() *cobra.Command {
	var site string
	cmd := &cobra.Command{
		Use:   "partition --site SITE",
		Short: "Make nodes drop their traffic to and from a site (test and demo only)",
		Long: `Make every node of --endpoints drop all its traffic to and from the nodes of
SITE, as if the network between them were cut, until kvctl debug heal. The
nodes must run kvd with --debug-faults (test and demo only; see
docs/operations.md). Partitions add up: partitioning from a second site keeps
the first.

Exits with code 2 for an unknown site or the node's own, and 5 if a node does
not run with --debug-faults.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if site == "" {
				return usageErrorf("--site is required")
			}
			if strings.Contains(site, ",") {
				return usageErrorf("--site %q names more than one site: partition from one site per command (partitions add up)", site)
			}
			return a.debugEach(cmd, func(ctx context.Context, c *client.Client, pin client.Option) ([]string, error) {
				return c.DebugPartition(ctx, site, pin)
			})
		},
	}
	cmd.Flags().StringVar(&site, "site", "", "the site to cut the nodes off from")
	return cmd
}

func (a *app) debugHealCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "heal",
		Short: "Undo every debug partition of the nodes (test and demo only)",
		Long: `Make every node of --endpoints carry its traffic to and from every site again,
undoing kvctl debug partition. Connections held during the partition resume.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.debugEach(cmd, func(ctx context.Context, c *client.Client, pin client.Option) ([]string, error) {
				return nil, c.DebugHeal(ctx, pin)
			})
		},
	}
}

// debugEach runs fn on every endpoint and prints, per node, the sites it
// is cut off from afterwards.
func (a *app) debugEach(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client, pin client.Option) ([]string, error)) error {
	return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
		rs := eachEndpoint(ctx, c, func(ctx context.Context, pin client.Option) (jsonDebugNode, error) {
			st, err := c.Status(ctx, pin)
			if err != nil {
				return jsonDebugNode{}, err
			}
			n := jsonDebugNode{NodeID: st.GetNodeId(), Site: st.GetSite()}
			n.PartitionedSites, err = fn(ctx, c, pin)
			if n.PartitionedSites == nil {
				n.PartitionedSites = []string{}
			}
			return n, err
		})
		nodes := make([]jsonDebugNode, 0, len(rs))
		for _, r := range rs {
			n := r.val
			n.Endpoint = r.endpoint
			if r.err != nil {
				n.Error = errorMessage(r.err)
			}
			nodes = append(nodes, n)
		}
		if a.json() {
			if err := writeJSON(a.env.Stdout, struct {
				Nodes []jsonDebugNode `json:"nodes"`
			}{nodes}); err != nil {
				return err
			}
		} else {
			for _, n := range nodes {
				switch {
				case n.Error != "":
					if len(nodes) > 1 { // a single failure is the command's error
						fmt.Fprintf(a.env.Stderr, "kvctl: %s: %s\n", n.Endpoint, n.Error)
					}
				case len(n.PartitionedSites) == 0:
					fmt.Fprintf(a.env.Stdout, "node %s of %s carries traffic to and from every site\n", n.NodeID, n.Site)
				default:
					fmt.Fprintf(a.env.Stdout, "node %s of %s now drops traffic to and from: %s\n", n.NodeID, n.Site, strings.Join(n.PartitionedSites, ", "))
				}
			}
		}
		return endpointsError(rs)
	})
}
