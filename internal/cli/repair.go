package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/client"
)

// clusterRepairCommand runs anti-entropy on demand.
func (a *app) clusterRepairCommand() *cobra.Command {
	var keyspace string
	var shard int
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Compare this site's shards with the other sites and send what differs (anti-entropy)",
		Long: `Run anti-entropy now, from the nodes given by --endpoints: for every shard a
node leads (all keyspaces, --keyspace K, or --keyspace K --shard N), compare
its digest with each other site holding the keyspace and send the newest
versions of what differs. Versions merge by last-writer-wins, so a repair
never undoes a newer write. Anti-entropy also runs on its own (every five
minutes per shard, and when a site needs updates its chain no longer holds);
this command is for after an incident. Give every node of the site as
--endpoints to cover every shard; shards a node does not lead are skipped
with a note. One line is printed per shard and site, then a total. Exits
with code 4 if a shard-site pair could not be repaired (a site out of
reach) or no endpoint leads its shard. Without --timeout the
repair may run for up to an hour.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ro := client.RepairOptions{Keyspace: keyspace}
			if cmd.Flags().Changed("shard") {
				if keyspace == "" {
					return usageErrorf("--shard needs --keyspace")
				}
				if shard < 0 {
					return usageErrorf("invalid --shard %d", shard)
				}
				v := uint32(shard)
				ro.Shard = &v
			}
			// A repair compares every shard with every other site: it
			// outlasts the default --timeout of single requests.
			d := a.timeout
			if f := cmd.Flag("timeout"); f == nil || !f.Changed {
				d = time.Hour
			}
			return a.withClientDeadline(cmd, false, d, func(ctx context.Context, c *client.Client) error {
				var sent uint64
				var done int
				// Every shard-site pair: repaired by some endpoint, failed,
				// or only skipped by endpoints that do not lead the shard.
				type pair struct {
					ks    string
					shard uint32
					site  string
				}
				const (
					pairNotLed = iota + 1
					pairFailed
					pairDone
				)
				pairs := map[pair]int{}
				for _, ep := range c.Endpoints() {
					err := c.Repair(ctx, ro, func(p *adminv1.RepairProgress) {
						k := pair{p.Keyspace, p.Shard, p.Site}
						if p.Error != "" {
							what, st := "failed", pairFailed
							if p.NotLeader {
								what, st = "skipped", pairNotLed
							}
							pairs[k] = max(pairs[k], st)
							if !a.json() {
								fmt.Fprintf(a.env.Stdout, "[%d/%d] %s/%d -> %s: %s: %s\n", p.Done, p.Total, p.Keyspace, p.Shard, p.Site, what, p.Error)
							}
							return
						}
						pairs[k] = pairDone
						done++
						sent += p.KeysSent
						if a.json() {
							_ = writeJSON(a.env.Stdout, map[string]any{"endpoint": ep, "keyspace": p.Keyspace, "shard": p.Shard, "site": p.Site,
								"slots_differing": p.SlotsDiffering, "keys_sent": p.KeysSent, "done": p.Done, "total": p.Total})
							return
						}
						fmt.Fprintf(a.env.Stdout, "[%d/%d] %s/%d -> %s: %d of %d slots differ, %d keys sent\n", p.Done, p.Total, p.Keyspace, p.Shard, p.Site, p.SlotsDiffering, p.SlotsCompared, p.KeysSent)
					}, client.WithEndpoint(ep))
					if err != nil {
						return fmt.Errorf("%s: %w", ep, err)
					}
				}
				var failed, notLed int
				for _, st := range pairs {
					switch st {
					case pairFailed:
						failed++
					case pairNotLed:
						notLed++
					}
				}
				if !a.json() {
					fmt.Fprintf(a.env.Stdout, "repaired %d shard-site pairs, %d keys sent; %d failed, %d not led by any endpoint\n", done, sent, failed, notLed)
				}
				switch {
				case failed > 0:
					return withCode(ExitUnavailable, fmt.Errorf("%d shard-site pairs could not be repaired (see above); run the repair again once the sites are reachable", failed))
				case notLed > 0:
					return withCode(ExitUnavailable, fmt.Errorf("%d shard-site pairs were not repaired: no endpoint leads their shard; give every node of the site as --endpoints", notLed))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&keyspace, "keyspace", "", "only this keyspace (default: every keyspace of the site)")
	cmd.Flags().IntVar(&shard, "shard", 0, "only this shard of --keyspace")
	return cmd
}
