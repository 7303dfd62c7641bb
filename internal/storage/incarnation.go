package storage

import (
	"encoding/binary"
	"fmt"
)

// SiteIncarnation returns the incarnation of the node's site recorded in
// this database, 0 if none is (docs/adr/029).
func (db *DB) SiteIncarnation() (uint64, error) {
	var v uint64
	err := db.View(func(tx *Tx) error {
		sealed := tx.btx.Bucket(bucketMeta).Get(metaIncarnation)
		if sealed == nil {
			return nil
		}
		b, err := unseal("site incarnation", metaIncarnation, sealed)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if len(b) != 8 {
			return fmt.Errorf("%w: site incarnation of %d bytes", ErrCorrupt, len(b))
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	return v, err
}

// SetSiteIncarnation durably records the incarnation of the node's site.
// It refuses to replace another one: a node belongs to one incarnation of
// its site for the life of its data directory.
func (db *DB) SetSiteIncarnation(v uint64) error {
	if v == 0 {
		return fmt.Errorf("storage: site incarnation 0")
	}
	return db.Update(func(tx *Tx) error {
		m := tx.btx.Bucket(bucketMeta)
		if sealed := m.Get(metaIncarnation); sealed != nil {
			b, err := unseal("site incarnation", metaIncarnation, sealed)
			if err != nil || len(b) != 8 {
				return fmt.Errorf("%w: the site incarnation is damaged (%v)", ErrCorrupt, err)
			}
			if cur := binary.BigEndian.Uint64(b); cur != v {
				return fmt.Errorf("storage: the site incarnation is %016x already, not %016x", cur, v)
			}
			return nil
		}
		return m.Put(metaIncarnation, seal(metaIncarnation, binary.BigEndian.AppendUint64(nil, v)))
	})
}
