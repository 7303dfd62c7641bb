package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/causeway-db/causeway/client"
)

func (a *app) siteCommand() *cobra.Command {
	return groupCommand("site", "Remove a site that is gone for good", a.siteRemoveCommand())
}

func (a *app) siteRemoveCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "remove SITE [--force]",
		Short: "Remove a site that is gone for good from the cluster",
		Long: `Remove SITE, a site that will never return (its machines and disks are
lost), from the cluster for good: the cluster configuration drops it and
its vote (with three sites, losing one more then no longer stops
configuration changes), every keyspace that listed it drops it (the
default keyspace too), and the other sites stop keeping writes for it.
Writes it acknowledged and had not shipped are lost. Its name is never
taken back: a replacement site takes a new name. A node of SITE that comes
back later (its partition heals, its machine restarts on its disks) is
told by the other sites and stops with an error.

Without --force, a dry run: prints what the removal does and exits with
code 6. The answering node refuses (exit code 5) a site it reaches, and
its own site: ask a node of another site. A keyspace held by SITE alone is
refused too (exit code 2): add another site to it first. Exits with code 1
if the cluster has no such site, or removed it already.`,
		Args: oneName("SITE", "the name of the site to remove (kvctl cluster sites lists them)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			site := args[0]
			return a.withClient(cmd, false, func(ctx context.Context, c *client.Client) error {
				if !force {
					return a.siteRemoveDryRun(ctx, c, site)
				}
				resp, err := c.RemoveSite(ctx, site)
				if err != nil { // NotFound exits with ExitNotFound (ExitCode)
					return err
				}
				if a.json() {
					return writeJSON(a.env.Stdout, struct {
						Site          string   `json:"site"`
						Removed       bool     `json:"removed"`
						ConfigVersion uint64   `json:"config_version"`
						Sites         []string `json:"sites"`
					}{site, true, resp.GetConfigVersion(), resp.GetSites()})
				}
				_, err = fmt.Fprintf(a.env.Stdout, "site %s is removed from the cluster (configuration version %d); the cluster's sites: %s. Its name is not taken back: a replacement site takes a new name\n",
					site, resp.GetConfigVersion(), strings.Join(resp.GetSites(), ", "))
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "carry the removal out (without it: a dry run)")
	return cmd
}

// siteRemoveDryRun prints what removing site does, as the answering node
// sees the cluster, and exits with ExitNotForced.
func (a *app) siteRemoveDryRun(ctx context.Context, c *client.Client, site string) error {
	sites, err := c.Sites(ctx)
	if err != nil {
		return err
	}
	var state string
	var names []string
	for _, s := range sites.GetSites() {
		names = append(names, s.GetName())
		if s.GetName() == site {
			state = s.GetState()
		}
	}
	if state == "" {
		return withCode(ExitNotFound, fmt.Errorf("the cluster has no site %q (its sites: %s)", site, strings.Join(names, ", ")))
	}
	kss, err := c.ListKeyspaces(ctx)
	if err != nil {
		return err
	}
	var held []string
	for _, ks := range kss {
		if slices.Contains(ks.GetSites(), site) {
			held = append(held, ks.GetName())
		}
	}
	out := a.env.Stdout
	fmt.Fprintf(out, "dry run: removing site %s (%s from %s) from the cluster for good\n", site, state, sites.GetLocalSite())
	fmt.Fprintf(out, "  drops it from the cluster configuration and its vote; the cluster's sites become: %s\n",
		strings.Join(slices.DeleteFunc(names, func(n string) bool { return n == site }), ", "))
	fmt.Fprintf(out, "  drops it from the keyspaces: %s\n", strings.Join(held, ", "))
	fmt.Fprintf(out, "  loses the writes it acknowledged and had not shipped; its name is never taken back\n")
	if state == "local" || state == "up" {
		fmt.Fprintf(out, "  refused as things are: %s answers from %s; only a site gone for good is removed\n", site, sites.GetLocalSite())
	}
	return withCode(ExitNotForced, fmt.Errorf("dry run, nothing changed: to remove site %s for good, run again with --force", site))
}
