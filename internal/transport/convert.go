package transport

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// This file converts between hashicorp/raft's messages and their protobuf
// mirrors. The *FromProto functions of requests validate what a peer sent:
// they return ErrInvalidRequest for anything raft could choke on (a panic in
// raft.DecodeConfiguration, non-contiguous entries, an unknown entry type).
//
// The converters copy every field of raft's messages, including the ones
// raft marks deprecated (AppendEntriesRequest.Leader,
// RequestVoteRequest.Candidate, RequestVoteResponse.Peers): raft still sends
// and reads them on its compatibility paths, and a transport that dropped
// them would change what raft sees.
//
//lint:file-ignore SA1019 the deprecated fields of raft's messages are carried on purpose (see above)

// maxGroupLen bounds a group name.
const maxGroupLen = 256

func validGroup(g string) error {
	if g == "" || len(g) > maxGroupLen {
		return invalidf("group name must have 1 to %d bytes", maxGroupLen)
	}
	return nil
}

func headerToProto(h raft.RPCHeader) *peerv1.RaftHeader {
	return &peerv1.RaftHeader{ProtocolVersion: int64(h.ProtocolVersion), Id: h.ID, Addr: h.Addr}
}

// headerFromProto converts a header; a request must have one.
func headerFromProto(h *peerv1.RaftHeader, required bool) (raft.RPCHeader, error) {
	if h == nil {
		if required {
			return raft.RPCHeader{}, invalidf("missing header")
		}
		return raft.RPCHeader{}, nil
	}
	if h.ProtocolVersion < int64(raft.ProtocolVersionMin) || h.ProtocolVersion > int64(raft.ProtocolVersionMax) {
		return raft.RPCHeader{}, invalidf("unsupported protocol version %d", h.ProtocolVersion)
	}
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(h.ProtocolVersion), ID: h.Id, Addr: h.Addr}, nil
}

func timeToNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nanosToTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// decodeConfiguration validates raft's encoding of a configuration;
// raft.DecodeConfiguration panics on malformed input.
func decodeConfiguration(buf []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = invalidf("malformed configuration: %v", r)
		}
	}()
	raft.DecodeConfiguration(buf)
	return nil
}

// isHeartbeat reports whether req is a heartbeat, by the rule of
// raft.NetworkTransport: raft sends those and only those from its heartbeat
// loop, and answers them on the fast path.
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	leader := req.Addr
	if len(leader) == 0 {
		leader = req.Leader
	}
	return req.Term != 0 && leader != nil &&
		req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

func appendEntriesToProto(group string, r *raft.AppendEntriesRequest) *peerv1.AppendEntriesRequest {
	m := &peerv1.AppendEntriesRequest{
		Group:             group,
		Header:            headerToProto(r.RPCHeader),
		Term:              r.Term,
		Leader:            r.Leader,
		PrevLogEntry:      r.PrevLogEntry,
		PrevLogTerm:       r.PrevLogTerm,
		LeaderCommitIndex: r.LeaderCommitIndex,
	}
	if len(r.Entries) > 0 {
		m.Entries = make([]*peerv1.LogEntry, len(r.Entries))
		for i, e := range r.Entries {
			m.Entries[i] = &peerv1.LogEntry{
				Index:              e.Index,
				Term:               e.Term,
				Type:               uint32(e.Type),
				Data:               e.Data,
				Extensions:         e.Extensions,
				AppendedAtUnixNano: timeToNanos(e.AppendedAt),
			}
		}
	}
	return m
}

// appendEntriesFromProto validates and converts an incoming request.
func appendEntriesFromProto(m *peerv1.AppendEntriesRequest) (*raft.AppendEntriesRequest, error) {
	if err := validGroup(m.GetGroup()); err != nil {
		return nil, err
	}
	h, err := headerFromProto(m.GetHeader(), true)
	if err != nil {
		return nil, err
	}
	if m.GetTerm() == 0 {
		return nil, invalidf("term must be positive")
	}
	if m.GetPrevLogTerm() > m.GetTerm() {
		return nil, invalidf("previous log term %d is newer than term %d", m.GetPrevLogTerm(), m.GetTerm())
	}
	r := &raft.AppendEntriesRequest{
		RPCHeader:         h,
		Term:              m.GetTerm(),
		Leader:            m.GetLeader(),
		PrevLogEntry:      m.GetPrevLogEntry(),
		PrevLogTerm:       m.GetPrevLogTerm(),
		LeaderCommitIndex: m.GetLeaderCommitIndex(),
	}
	if n := len(m.GetEntries()); n > 0 {
		r.Entries = make([]*raft.Log, n)
		// Each raft.Log is allocated on its own: raft (and log caches) keep
		// pointers to entries.
		next, prevTerm := m.GetPrevLogEntry()+1, m.GetPrevLogTerm()
		for i, e := range m.GetEntries() {
			if e == nil {
				return nil, invalidf("entry %d is missing", i)
			}
			if e.GetIndex() != next || next == 0 {
				return nil, invalidf("entry %d has index %d, want %d", i, e.GetIndex(), next)
			}
			if e.GetTerm() < prevTerm || e.GetTerm() > m.GetTerm() || e.GetTerm() == 0 {
				return nil, invalidf("entry %d has term %d, outside [%d, %d]", i, e.GetTerm(), prevTerm, m.GetTerm())
			}
			if e.GetType() > uint32(raft.LogConfiguration) {
				return nil, invalidf("entry %d has unknown type %d", i, e.GetType())
			}
			if raft.LogType(e.GetType()) == raft.LogConfiguration {
				if err := decodeConfiguration(e.GetData()); err != nil {
					return nil, fmt.Errorf("entry %d: %w", i, err)
				}
			}
			r.Entries[i] = &raft.Log{
				Index:      e.GetIndex(),
				Term:       e.GetTerm(),
				Type:       raft.LogType(e.GetType()),
				Data:       e.GetData(),
				Extensions: e.GetExtensions(),
				AppendedAt: nanosToTime(e.GetAppendedAtUnixNano()),
			}
			next, prevTerm = next+1, e.GetTerm()
		}
	}
	return r, nil
}

func appendEntriesResponseToProto(r *raft.AppendEntriesResponse) *peerv1.AppendEntriesResponse {
	return &peerv1.AppendEntriesResponse{
		Header:         headerToProto(r.RPCHeader),
		Term:           r.Term,
		LastLog:        r.LastLog,
		Success:        r.Success,
		NoRetryBackoff: r.NoRetryBackoff,
	}
}

func appendEntriesResponseFromProto(m *peerv1.AppendEntriesResponse, r *raft.AppendEntriesResponse) error {
	h, err := headerFromProto(m.GetHeader(), false)
	if err != nil {
		return err
	}
	*r = raft.AppendEntriesResponse{
		RPCHeader:      h,
		Term:           m.GetTerm(),
		LastLog:        m.GetLastLog(),
		Success:        m.GetSuccess(),
		NoRetryBackoff: m.GetNoRetryBackoff(),
	}
	return nil
}

func requestVoteToProto(group string, r *raft.RequestVoteRequest) *peerv1.RequestVoteRequest {
	return &peerv1.RequestVoteRequest{
		Group:              group,
		Header:             headerToProto(r.RPCHeader),
		Term:               r.Term,
		Candidate:          r.Candidate,
		LastLogIndex:       r.LastLogIndex,
		LastLogTerm:        r.LastLogTerm,
		LeadershipTransfer: r.LeadershipTransfer,
	}
}

func requestVoteFromProto(m *peerv1.RequestVoteRequest) (*raft.RequestVoteRequest, error) {
	if err := validGroup(m.GetGroup()); err != nil {
		return nil, err
	}
	h, err := headerFromProto(m.GetHeader(), true)
	if err != nil {
		return nil, err
	}
	if m.GetTerm() == 0 {
		return nil, invalidf("term must be positive")
	}
	if m.GetLastLogTerm() > m.GetTerm() {
		return nil, invalidf("last log term %d is newer than term %d", m.GetLastLogTerm(), m.GetTerm())
	}
	return &raft.RequestVoteRequest{
		RPCHeader:          h,
		Term:               m.GetTerm(),
		Candidate:          m.GetCandidate(),
		LastLogIndex:       m.GetLastLogIndex(),
		LastLogTerm:        m.GetLastLogTerm(),
		LeadershipTransfer: m.GetLeadershipTransfer(),
	}, nil
}

func requestVoteResponseToProto(r *raft.RequestVoteResponse) *peerv1.RequestVoteResponse {
	return &peerv1.RequestVoteResponse{
		Header:  headerToProto(r.RPCHeader),
		Term:    r.Term,
		Peers:   r.Peers,
		Granted: r.Granted,
	}
}

func requestVoteResponseFromProto(m *peerv1.RequestVoteResponse, r *raft.RequestVoteResponse) error {
	h, err := headerFromProto(m.GetHeader(), false)
	if err != nil {
		return err
	}
	*r = raft.RequestVoteResponse{RPCHeader: h, Term: m.GetTerm(), Peers: m.GetPeers(), Granted: m.GetGranted()}
	return nil
}

func requestPreVoteToProto(group string, r *raft.RequestPreVoteRequest) *peerv1.RequestPreVoteRequest {
	return &peerv1.RequestPreVoteRequest{
		Group:        group,
		Header:       headerToProto(r.RPCHeader),
		Term:         r.Term,
		LastLogIndex: r.LastLogIndex,
		LastLogTerm:  r.LastLogTerm,
	}
}

func requestPreVoteFromProto(m *peerv1.RequestPreVoteRequest) (*raft.RequestPreVoteRequest, error) {
	if err := validGroup(m.GetGroup()); err != nil {
		return nil, err
	}
	h, err := headerFromProto(m.GetHeader(), true)
	if err != nil {
		return nil, err
	}
	if m.GetTerm() == 0 {
		return nil, invalidf("term must be positive")
	}
	if m.GetLastLogTerm() > m.GetTerm() {
		return nil, invalidf("last log term %d is newer than term %d", m.GetLastLogTerm(), m.GetTerm())
	}
	return &raft.RequestPreVoteRequest{
		RPCHeader:    h,
		Term:         m.GetTerm(),
		LastLogIndex: m.GetLastLogIndex(),
		LastLogTerm:  m.GetLastLogTerm(),
	}, nil
}

func requestPreVoteResponseToProto(r *raft.RequestPreVoteResponse) *peerv1.RequestPreVoteResponse {
	return &peerv1.RequestPreVoteResponse{Header: headerToProto(r.RPCHeader), Term: r.Term, Granted: r.Granted}
}

func requestPreVoteResponseFromProto(m *peerv1.RequestPreVoteResponse, r *raft.RequestPreVoteResponse) error {
	h, err := headerFromProto(m.GetHeader(), false)
	if err != nil {
		return err
	}
	*r = raft.RequestPreVoteResponse{RPCHeader: h, Term: m.GetTerm(), Granted: m.GetGranted()}
	return nil
}

func timeoutNowToProto(group string, r *raft.TimeoutNowRequest) *peerv1.TimeoutNowRequest {
	return &peerv1.TimeoutNowRequest{Group: group, Header: headerToProto(r.RPCHeader)}
}

func timeoutNowFromProto(m *peerv1.TimeoutNowRequest) (*raft.TimeoutNowRequest, error) {
	if err := validGroup(m.GetGroup()); err != nil {
		return nil, err
	}
	h, err := headerFromProto(m.GetHeader(), true)
	if err != nil {
		return nil, err
	}
	return &raft.TimeoutNowRequest{RPCHeader: h}, nil
}

func timeoutNowResponseToProto(r *raft.TimeoutNowResponse) *peerv1.TimeoutNowResponse {
	return &peerv1.TimeoutNowResponse{Header: headerToProto(r.RPCHeader)}
}

func timeoutNowResponseFromProto(m *peerv1.TimeoutNowResponse, r *raft.TimeoutNowResponse) error {
	h, err := headerFromProto(m.GetHeader(), false)
	if err != nil {
		return err
	}
	*r = raft.TimeoutNowResponse{RPCHeader: h}
	return nil
}

func installSnapshotToProto(group string, r *raft.InstallSnapshotRequest) *peerv1.InstallSnapshotRequest {
	return &peerv1.InstallSnapshotRequest{
		Group:              group,
		Header:             headerToProto(r.RPCHeader),
		SnapshotVersion:    int64(r.SnapshotVersion),
		Term:               r.Term,
		Leader:             r.Leader,
		LastLogIndex:       r.LastLogIndex,
		LastLogTerm:        r.LastLogTerm,
		Peers:              r.Peers,
		Configuration:      r.Configuration,
		ConfigurationIndex: r.ConfigurationIndex,
		Size:               r.Size,
	}
}

func installSnapshotFromProto(m *peerv1.InstallSnapshotRequest) (*raft.InstallSnapshotRequest, error) {
	if err := validGroup(m.GetGroup()); err != nil {
		return nil, err
	}
	h, err := headerFromProto(m.GetHeader(), true)
	if err != nil {
		return nil, err
	}
	switch v := m.GetSnapshotVersion(); {
	case v < int64(raft.SnapshotVersionMin) || v > int64(raft.SnapshotVersionMax):
		return nil, invalidf("unsupported snapshot version %d", v)
	case m.GetTerm() == 0:
		return nil, invalidf("term must be positive")
	case m.GetLastLogTerm() > m.GetTerm():
		return nil, invalidf("last log term %d is newer than term %d", m.GetLastLogTerm(), m.GetTerm())
	case m.GetSize() < 0:
		return nil, invalidf("negative snapshot size %d", m.GetSize())
	case m.GetConfigurationIndex() > m.GetLastLogIndex():
		return nil, invalidf("configuration index %d is after the snapshot's index %d", m.GetConfigurationIndex(), m.GetLastLogIndex())
	}
	if m.GetSnapshotVersion() > 0 {
		if err := decodeConfiguration(m.GetConfiguration()); err != nil {
			return nil, err
		}
	}
	return &raft.InstallSnapshotRequest{
		RPCHeader:          h,
		SnapshotVersion:    raft.SnapshotVersion(m.GetSnapshotVersion()),
		Term:               m.GetTerm(),
		Leader:             m.GetLeader(),
		LastLogIndex:       m.GetLastLogIndex(),
		LastLogTerm:        m.GetLastLogTerm(),
		Peers:              m.GetPeers(),
		Configuration:      m.GetConfiguration(),
		ConfigurationIndex: m.GetConfigurationIndex(),
		Size:               m.GetSize(),
	}, nil
}

func installSnapshotResponseToProto(r *raft.InstallSnapshotResponse) *peerv1.InstallSnapshotResponse {
	return &peerv1.InstallSnapshotResponse{Header: headerToProto(r.RPCHeader), Term: r.Term, Success: r.Success}
}

func installSnapshotResponseFromProto(m *peerv1.InstallSnapshotResponse, r *raft.InstallSnapshotResponse) error {
	h, err := headerFromProto(m.GetHeader(), false)
	if err != nil {
		return err
	}
	*r = raft.InstallSnapshotResponse{RPCHeader: h, Term: m.GetTerm(), Success: m.GetSuccess()}
	return nil
}
