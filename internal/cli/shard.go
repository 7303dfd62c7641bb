package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/client"
)

// recoverTimeout is the default deadline of shard recover: a forced
// recovery reopens a replica and waits for the site catalog.
const recoverTimeout = 30 * time.Second

func (a *app) shardCommand() *cobra.Command {
	return groupCommand("shard", "Shard maintenance", a.shardRecoverCommand())
}

const shardRecoverLong = `Recover a shard whose replica group lost its quorum for good (its voters'
nodes are gone and will not come back): the replica on NODE goes on as the
group's only voter, the placement map drops every other replica, and the site
grows the group back to its replication factor from NODE's data.

This can lose acknowledged writes: entries the lost voters committed but NODE
did not store are gone, and entries NODE stored but that were never committed
become committed. Without --force the command changes nothing: it shows the
group's replicas (in the placement map, whether gossip reports their node
alive, each replica's raft state, term, last log index and term, commit and
applied index), what may be lost, and warnings (for example another replica
with a longer log), and exits with code 6. Run it again with --force to carry
the recovery out.

It refuses a shard that has a leader or a live quorum of voters (nothing to
recover), a NODE that holds no replica of it or is not alive, and a forced
recovery while the site catalog has no leader (recover the catalog first:
kvd --recover-catalog, see docs/operations.md) (exit code 5). An unknown
keyspace, shard or node exits with code 1. The replicas given up are
deleted by their nodes if they ever return. --timeout defaults to 30s.`

func (a *app) shardRecoverCommand() *cobra.Command {
	var (
		shardID uint32
		node    string
		force   bool
	)
	cmd := &cobra.Command{
		Use:   "recover --shard ID --node NODE [--keyspace KS] [--force]",
		Short: "Recover a shard whose replica group lost its quorum for good",
		Long:  shardRecoverLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("shard") {
				return usageErrorf("--shard is required")
			}
			if node == "" {
				return usageErrorf("--node is required")
			}
			deadline := a.timeout
			if !cmd.Flags().Changed("timeout") {
				deadline = recoverTimeout
				a.attemptTimeout = recoverTimeout
			}
			return a.withClientDeadline(cmd, false, deadline, func(ctx context.Context, c *client.Client) error {
				resp, err := c.RecoverShard(ctx, a.keyspace, shardID, node, force)
				if err != nil {
					return err
				}
				if a.json() {
					if err := writeJSON(a.env.Stdout, recoveryJSON(resp)); err != nil {
						return err
					}
				} else if err := a.printRecovery(resp); err != nil {
					return err
				}
				if !resp.GetRecovered() {
					return withCode(ExitNotForced, fmt.Errorf("dry run, nothing changed: to make %s the only voter of %s/%d and give up %s, run again with --force",
						node, resp.GetKeyspace(), resp.GetShard(), orNone(strings.Join(resp.GetLost(), ", "))))
				}
				return nil
			})
		},
	}
	cmd.Flags().Uint32Var(&shardID, "shard", 0, "the shard's number within --keyspace (see kvctl cluster shards)")
	cmd.Flags().StringVar(&node, "node", "", "the node whose replica survives")
	cmd.Flags().BoolVar(&force, "force", false, "carry the recovery out (without it: a dry run)")
	return cmd
}

type jsonRecoveryReplica struct {
	NodeID       string `json:"node_id"`
	Role         string `json:"role"`
	Alive        bool   `json:"alive"`
	MemberState  string `json:"member_state"`
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	LastIndex    uint64 `json:"last_index"`
	LastLogTerm  uint64 `json:"last_log_term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Leader       string `json:"leader,omitempty"`
}

type jsonRecovery struct {
	Keyspace       string                `json:"keyspace"`
	Shard          uint32                `json:"shard"`
	NodeID         string                `json:"node_id"`
	DryRun         bool                  `json:"dry_run"`
	Recovered      bool                  `json:"recovered"`
	Replicas       []jsonRecoveryReplica `json:"replicas"`
	Voters         []string              `json:"voters"`
	Lost           []string              `json:"lost"`
	MayLoseAfter   uint64                `json:"may_lose_after_index"`
	Warnings       []string              `json:"warnings"`
	PlacementEpoch uint64                `json:"placement_epoch"`
	Generation     uint64                `json:"generation"`
}

func recoveryJSON(r *adminv1.RecoverShardResponse) jsonRecovery {
	doc := jsonRecovery{
		Keyspace: r.GetKeyspace(), Shard: r.GetShard(), NodeID: r.GetNodeId(), DryRun: !r.GetRecovered(), Recovered: r.GetRecovered(),
		Replicas: []jsonRecoveryReplica{}, Voters: nonNil(r.GetVoters()), Lost: nonNil(r.GetLost()), Warnings: nonNil(r.GetWarnings()),
		PlacementEpoch: r.GetPlacementEpoch(), Generation: r.GetGeneration(), MayLoseAfter: survivorOf(r).GetCommitIndex(),
	}
	for _, rep := range r.GetReplicas() {
		role := "learner"
		if rep.GetVoter() {
			role = "voter"
		}
		doc.Replicas = append(doc.Replicas, jsonRecoveryReplica{
			NodeID: rep.GetNodeId(), Role: role, Alive: rep.GetAlive(), MemberState: rep.GetMemberState(), State: rep.GetState(),
			Term: rep.GetTerm(), LastIndex: rep.GetLastIndex(), LastLogTerm: rep.GetLastLogTerm(), CommitIndex: rep.GetCommitIndex(),
			AppliedIndex: rep.GetAppliedIndex(), Leader: rep.GetLeader(),
		})
	}
	return doc
}

// survivorOf returns the survivor's replica of a recovery report.
func survivorOf(r *adminv1.RecoverShardResponse) *adminv1.RecoveryReplica {
	for _, rep := range r.GetReplicas() {
		if rep.GetNodeId() == r.GetNodeId() {
			return rep
		}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// printRecovery prints a recovery report as text: the replicas, what may
// be lost, the warnings, and the outcome of a forced recovery.
func (a *app) printRecovery(r *adminv1.RecoverShardResponse) error {
	out := a.env.Stdout
	shard := fmt.Sprintf("%s/%d", r.GetKeyspace(), r.GetShard())
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tMEMBER\tSTATE\tTERM\tLAST INDEX\tLAST TERM\tCOMMIT\tAPPLIED")
	for _, rep := range r.GetReplicas() {
		role := "learner"
		if rep.GetVoter() {
			role = "voter"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", rep.GetNodeId(), role, dash(rep.GetMemberState()), dash(rep.GetState()),
			rep.GetTerm(), rep.GetLastIndex(), rep.GetLastLogTerm(), rep.GetCommitIndex(), rep.GetAppliedIndex())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	node, lost := r.GetNodeId(), orNone(strings.Join(r.GetLost(), ", "))
	fmt.Fprintf(out, "\nshard %s: raft voters as %s knows them: %s\n", shard, node, orNone(strings.Join(r.GetVoters(), ", ")))
	if sv := survivorOf(r); sv != nil {
		fmt.Fprintf(out, "%s's replica: log up to index %d (term %d), committed up to %d as far as it knows, applied up to %d, term %d\n",
			node, sv.GetLastIndex(), sv.GetLastLogTerm(), sv.GetCommitIndex(), sv.GetAppliedIndex(), sv.GetTerm())
		fmt.Fprintf(out, "what may be lost: entries committed by the lost voters (%s) but not stored on %s are lost; "+
			"acknowledged writes after index %d could be lost. Entries %s stored after index %d that were never committed become committed.\n",
			lost, node, sv.GetCommitIndex(), node, sv.GetCommitIndex())
	}
	for _, w := range r.GetWarnings() {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	if r.GetRecovered() {
		_, err := fmt.Fprintf(out, "recovered: %s is the only voter of shard %s (generation %d, placement epoch %d); gave up %s. "+
			"The site now grows the group back from %s's data.\n", node, shard, r.GetGeneration(), r.GetPlacementEpoch(), lost, node)
		return err
	}
	_, err := fmt.Fprintf(out, "dry run: a forced recovery makes %s the only voter of shard %s (generation %d) and gives up %s\n",
		node, shard, r.GetGeneration(), lost)
	return err
}
