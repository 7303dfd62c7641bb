package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdStore measures an etcd cluster stretched over the sites: one
// clientv3 client per site, each talking to that site's member only. A put
// at the first site is answered once that member applied it (a follower
// forwards it to the leader, which commits it with a majority); a site
// serves it once a serializable read at its member finds it (the member's
// own state, no round trip to the leader).
type etcdStore struct {
	clients []*clientv3.Client
	addrs   []string
}

func openEtcd(ctx context.Context, addrs []string) (*etcdStore, error) {
	s := &etcdStore{addrs: addrs}
	for _, a := range addrs {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{a},
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
			Context:     context.WithoutCancel(ctx),
		})
		if err != nil {
			s.close()
			return nil, fmt.Errorf("etcd %s: %w", a, err)
		}
		s.clients = append(s.clients, c)
	}
	return s, nil
}

func (s *etcdStore) put(ctx context.Context, key []byte) error {
	_, err := s.clients[0].Put(ctx, string(key), "v")
	return err
}

// visible reads the keys in one read-only transaction of serializable
// gets, which the member serves from its own state.
func (s *etcdStore) visible(ctx context.Context, j int, keys [][]byte) ([]bool, error) {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(string(k), clientv3.WithSerializable(), clientv3.WithKeysOnly())
	}
	resp, err := s.clients[j].Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	found := make([]bool, len(keys))
	for i, r := range resp.Responses {
		if i < len(found) {
			found[i] = len(r.GetResponseRange().GetKvs()) > 0
		}
	}
	return found, nil
}

// describe names each site's member and the leader.
func (s *etcdStore) describe(ctx context.Context, res *result) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	names := map[uint64]string{}
	if ml, err := s.clients[0].MemberList(ctx); err == nil {
		for _, m := range ml.Members {
			names[m.ID] = m.Name
		}
	}
	name := func(id uint64) string {
		if n, ok := names[id]; ok && n != "" {
			return n
		}
		return strconv.FormatUint(id, 16)
	}
	for i, c := range s.clients {
		st, err := c.Status(ctx, s.addrs[i])
		if err != nil {
			continue
		}
		res.Names[i] = name(st.Header.MemberId)
		if i == 0 {
			res.Leader = name(st.Leader)
		}
	}
}

func (s *etcdStore) partition(context.Context) (func(), error) {
	return nil, errors.New("-partition is Causeway's")
}

func (s *etcdStore) close() {
	for _, c := range s.clients {
		c.Close()
	}
}
