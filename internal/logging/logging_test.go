package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestRaftRoutineLevels: what hashicorp/raft logs at ERROR while a peer
// restarts (a rolling restart) or when a leader steps down for a newer
// term is logged below ERROR; raft's real errors keep ERROR. The records
// go through a real hclog logger, as the raft groups' do.
func TestRaftRoutineLevels(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	hl := HCLog(log, "raft", hclog.Warn)
	cases := []struct {
		log  func()
		want string
	}{
		{func() {
			hl.Error("failed to appendEntries to", "peer", "{Voter n2 127.0.0.1:7912}", "error", `transport: append_entries to 127.0.0.1:7912: rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:7912: connect: connection refused"`)
		}, "level=WARN"},
		{func() {
			hl.Error("failed to heartbeat to", "peer", "127.0.0.1:7912", "backoff time", "10ms", "error", `append_entries_batched to 127.0.0.1:7912: transport: unknown raft group: rpc error: code = NotFound desc = transport: unknown raft group: "default/5"`)
		}, "level=WARN"},
		{func() {
			hl.Error("failed to pipeline appendEntries", "peer", "{Voter n2 127.0.0.1:7912}", "error", "transport: pipeline to 127.0.0.1:7912: append pipeline closed")
		}, "level=WARN"},
		{func() { hl.Error("peer has newer term, stopping replication", "peer", "{Voter n2 127.0.0.1:7912}") }, "level=INFO"},
		{func() {
			hl.Error("failed to make requestVote RPC", "target", "{Voter n2 127.0.0.1:7912}", "error", `transport: request_vote to 127.0.0.1:7912: rpc error: code = Unavailable desc = connection error`, "term", 4)
		}, "level=WARN"},
		// Real errors stay errors.
		{func() {
			hl.Error("failed to appendEntries to", "peer", "{Voter n2 127.0.0.1:7912}", "error", "rpc error: code = ResourceExhausted desc = message larger than max")
		}, "level=ERROR"},
		{func() { hl.Error("failed to get log", "index", 7, "error", "log not found") }, "level=ERROR"},
		{func() { hl.Warn("rejecting vote request since our last term is greater") }, "level=WARN"},
	}
	// memberlist logs through Writer, with its own tags.
	w := Writer(log)
	cases = append(cases,
		struct {
			log  func()
			want string
		}{func() {
			_, _ = w.Write([]byte("2026/12/07 13:35:10 [ERR] memberlist: Failed to send gossip to 127.0.0.1:7903: write udp 127.0.0.1:7913->127.0.0.1:7903: use of closed network connection\n"))
		}, "level=INFO"},
		struct {
			log  func()
			want string
		}{func() {
			_, _ = w.Write([]byte("2026/12/07 13:35:10 [ERR] memberlist: Failed to send gossip to 127.0.0.1:7903: write udp: message too long\n"))
		}, "level=ERROR"},
	)
	for i, c := range cases {
		buf.Reset()
		c.log()
		line := buf.String()
		if !strings.Contains(line, c.want) {
			t.Errorf("case %d: want %s: %s", i, c.want, line)
		}
	}
}
