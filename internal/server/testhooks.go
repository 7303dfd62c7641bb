package server

import "github.com/causeway-db/causeway/internal/storage"

// FailRaftDBWritesForTest makes every later commit of s's raft.db (raft's
// terms and votes) fail with err, as a full or failing disk fails it
// (storage.FailWritesForTest): the node stops at the first term or vote
// it must save. Only tests may call it (the test-hooks rule of
// internal/lint).
func FailRaftDBWritesForTest(s *Server, err error) {
	storage.FailWritesForTest(s.logDB, err)
}
