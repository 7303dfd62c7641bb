package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/client"
)

// Cluster-wide commands: the sites of the cluster and its keyspaces. Any
// node of any site answers them (keyspace changes go through the cluster
// configuration's leader), so they make one call that fails over between
// --endpoints.

type jsonSiteNode struct {
	ID         string `json:"id"`
	ClientAddr string `json:"client_addr"`
	PeerAddr   string `json:"peer_addr"`
	Alive      bool   `json:"alive"`
}

type jsonSite struct {
	Name       string         `json:"name"`
	State      string         `json:"state"`
	Voter      bool           `json:"voter"`
	RTTSeconds float64        `json:"rtt_seconds"`
	LagSeconds float64        `json:"lag_seconds"`
	LagEntries uint64         `json:"lag_entries"`
	Nodes      []jsonSiteNode `json:"nodes"`
}

func (a *app) clusterSitesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "sites",
		Short: "List the sites of the cluster",
		Long: `Ask a node (the first of --endpoints that answers) for every site of the
cluster: its state as that node sees it (local, up, unreachable, or skipped
while chains route around it), its nodes, the measured round trip to it and
the replication lag towards it (age of the oldest update not applied there
yet, and how many wait). A last line gives the cluster configuration's
version and leader.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				resp, err := c.Sites(ctx)
				if err != nil {
					return err
				}
				if a.json() {
					doc := struct {
						LocalSite     string     `json:"local_site"`
						ConfigVersion uint64     `json:"config_version"`
						ConfigLeader  string     `json:"config_leader"`
						Sites         []jsonSite `json:"sites"`
					}{resp.GetLocalSite(), resp.GetConfigVersion(), resp.GetConfigLeader(), []jsonSite{}}
					for _, s := range resp.GetSites() {
						js := jsonSite{Name: s.GetName(), State: s.GetState(), Voter: s.GetVoter(), RTTSeconds: s.GetRttSeconds(),
							LagSeconds: s.GetLagSeconds(), LagEntries: s.GetLagEntries(), Nodes: []jsonSiteNode{}}
						for _, n := range s.GetNodes() {
							js.Nodes = append(js.Nodes, jsonSiteNode{ID: n.GetId(), ClientAddr: n.GetClientAddr(), PeerAddr: n.GetPeerAddr(), Alive: n.GetAlive()})
						}
						doc.Sites = append(doc.Sites, js)
					}
					return writeJSON(a.env.Stdout, doc)
				}
				tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SITE\tSTATE\tVOTER\tRTT\tLAG\tWAITING\tNODES")
				for _, s := range resp.GetSites() {
					var nodes []string
					for _, n := range s.GetNodes() {
						nodes = append(nodes, n.GetId()+"@"+n.GetClientAddr())
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.GetName(), dash(s.GetState()), yesNo(s.GetVoter()),
						seconds(s.GetRttSeconds()), seconds(s.GetLagSeconds()), s.GetLagEntries(), dash(strings.Join(nodes, ",")))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.env.Stdout, "\nlocal site %s, configuration version %d, leader %s\n", resp.GetLocalSite(), resp.GetConfigVersion(), orNone(resp.GetConfigLeader()))
				return err
			})
		},
	}
}

// seconds prints a duration in seconds, "-" for zero (unknown or none).
func seconds(s float64) string {
	if s == 0 {
		return "-"
	}
	if s < 1 {
		return fmt.Sprintf("%.1fms", s*1000)
	}
	return fmt.Sprintf("%.2fs", s)
}

func (a *app) keyspaceCommand() *cobra.Command {
	return groupCommand("keyspace", "Create and inspect keyspaces",
		a.keyspaceCreateCommand(), a.keyspaceListCommand(), a.keyspaceShowCommand(), a.keyspaceSetSitesCommand())
}

type jsonKeyspace struct {
	Name   string     `json:"name"`
	Shards uint32     `json:"shards"`
	Sites  []string   `json:"sites"`
	Joins  []jsonJoin `json:"joins,omitempty"`
}

// jsonJoin is a site's join of a keyspace; the progress is known when the
// answering node is of that site.
type jsonJoin struct {
	Site           string `json:"site"`
	ConfigVersion  uint64 `json:"config_version"`
	Known          bool   `json:"progress_known"`
	Complete       bool   `json:"complete"`
	ShardsComplete uint32 `json:"shards_complete,omitempty"`
	Waiting        string `json:"waiting,omitempty"`
}

// joinLine describes a site's join of keyspace ks for the text output.
func joinLine(ks string, j *adminv1.KeyspaceJoin) string {
	line := fmt.Sprintf("keyspace %s: site %s joined at configuration version %d: ", ks, j.GetSite(), j.GetConfigVersion())
	switch {
	case !j.GetKnown():
		return line + fmt.Sprintf("ask a node of site %s for its progress", j.GetSite())
	case j.GetComplete():
		return line + "complete"
	default:
		return line + fmt.Sprintf("%d of %d shards complete, %s; its reads of the keyspace are refused until all are", j.GetShardsComplete(), j.GetShards(), j.GetWaiting())
	}
}

// printKeyspaces prints keyspaces: in JSON an array, or with one an
// object.
func (a *app) printKeyspaces(one bool, kss ...*adminv1.Keyspace) error {
	if a.json() {
		out := []jsonKeyspace{}
		for _, ks := range kss {
			jk := jsonKeyspace{Name: ks.GetName(), Shards: ks.GetShards(), Sites: append([]string{}, ks.GetSites()...)}
			for _, j := range ks.GetJoins() {
				jk.Joins = append(jk.Joins, jsonJoin{Site: j.GetSite(), ConfigVersion: j.GetConfigVersion(), Known: j.GetKnown(), Complete: j.GetComplete(),
					ShardsComplete: j.GetShardsComplete(), Waiting: j.GetWaiting()})
			}
			out = append(out, jk)
		}
		if one && len(out) == 1 {
			return writeJSON(a.env.Stdout, out[0])
		}
		return writeJSON(a.env.Stdout, out)
	}
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEYSPACE\tSHARDS\tSITES")
	for _, ks := range kss {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", ks.GetName(), ks.GetShards(), dash(strings.Join(ks.GetSites(), ",")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, ks := range kss {
		for _, j := range ks.GetJoins() {
			fmt.Fprintln(a.env.Stdout, joinLine(ks.GetName(), j))
		}
	}
	return nil
}

// siteList parses --sites.
func siteList(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, usageErrorf("--sites needs at least one site")
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			return nil, usageErrorf("--sites %q has an empty site name", v)
		}
		out = append(out, s)
	}
	return out, nil
}

func (a *app) keyspaceCreateCommand() *cobra.Command {
	var sites string
	var shards uint32
	cmd := &cobra.Command{
		Use:   "create NAME --sites S1,S2,... [--shards N]",
		Short: "Create a keyspace held by some sites",
		Long: `Create a keyspace with a fixed number of shards (the same at every site),
held by the listed sites; the list's order is the chain order of its
replication. Every listed site creates the keyspace's shards. Writes and
reads of the keyspace at a site that does not hold it fail, naming the
sites that do.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := siteList(sites)
			if err != nil {
				return err
			}
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				ks, err := c.CreateKeyspace(ctx, args[0], shards, list)
				if err != nil {
					return err
				}
				return a.printKeyspaces(true, ks)
			})
		},
	}
	cmd.Flags().StringVar(&sites, "sites", "", "comma-separated sites that hold the keyspace, in chain order (required)")
	cmd.Flags().Uint32Var(&shards, "shards", 16, "number of shards (fixed for the keyspace's life)")
	return cmd
}

func (a *app) keyspaceListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the keyspaces of the cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				kss, err := c.ListKeyspaces(ctx)
				if err != nil {
					return err
				}
				return a.printKeyspaces(false, kss...)
			})
		},
	}
}

func (a *app) keyspaceShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Describe a keyspace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				ks, err := c.GetKeyspace(ctx, args[0])
				if err != nil {
					return err
				}
				return a.printKeyspaces(true, ks)
			})
		},
	}
}

func (a *app) keyspaceSetSitesCommand() *cobra.Command {
	var sites string
	var force bool
	cmd := &cobra.Command{
		Use:   "set-sites NAME --sites S1,S2,...",
		Short: "Change the sites that hold a keyspace",
		Long: `Change the sites that hold a keyspace and their chain order. A site added
creates the keyspace's shards and receives its data from the others; a site
removed stops serving it. The default keyspace lives on every site.

Removing a site that the answering node cannot reach is refused unless
--force is given: writes that site acknowledged and has not shipped stay on
it, and reach the keyspace's other sites only if it is added back.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			list, err := siteList(sites)
			if err != nil {
				return err
			}
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				var opts []client.Option
				if force {
					opts = append(opts, client.WithForce())
				}
				ks, err := c.SetKeyspaceSites(ctx, args[0], list, opts...)
				if err != nil {
					return err
				}
				return a.printKeyspaces(true, ks)
			})
		},
	}
	cmd.Flags().StringVar(&sites, "sites", "", "comma-separated sites that hold the keyspace, in chain order (required)")
	cmd.Flags().BoolVar(&force, "force", false, "remove sites the answering node cannot reach (their unshipped writes stay on them)")
	return cmd
}
