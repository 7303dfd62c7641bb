package membership

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/memberlist"
)

// Size limits of the Meta fields, in bytes. With them the encoded Meta is at
// most MaxMetaSize bytes, well inside memberlist's limit of 512 bytes, which
// leaves room for fields a later meta version may add.
const (
	// MaxNameLen is the longest Site or NodeID (the rule of server.Config
	// and storage.ValidSiteName: 1 to 63 lowercase letters, digits, '-').
	MaxNameLen = 63
	// MaxAddrLen is the longest ClientAddr or PeerAddr.
	MaxAddrLen = 128
	// MaxMetaSize is the largest encoding MarshalBinary produces.
	MaxMetaSize = 1 + 2*(1+MaxNameLen) + 2*(2+MaxAddrLen) + 8 + 1 + 1
)

// metaVersion is the version byte MarshalBinary writes for a Meta without
// an Incarnation; metaVersionIncarnation, followed by the version-1
// fields and the incarnation (8 bytes, big endian), for one with;
// metaVersionReach, followed by the version-2 fields and Unreachable (1
// byte), for one with both; metaVersionReplicas, followed by the version-3
// fields (Unreachable even when 0) and Replicas (1 byte), for one with an
// Incarnation and Replicas.
const (
	metaVersion            = 1
	metaVersionIncarnation = 2
	metaVersionReach       = 3
	metaVersionReplicas    = 4
)

// Compile-time check that every valid Meta fits memberlist's node meta.
var _ [memberlist.MetaMaxSize - MaxMetaSize]struct{}

// Meta is what a node tells the others about itself. It travels as the
// memberlist node meta of the node named Site + "/" + NodeID.
type Meta struct {
	// Site is the node's site (1 to 63 lowercase letters, digits, '-').
	Site string
	// NodeID names the node within its site (same rule as Site).
	NodeID string
	// ClientAddr is the host:port of the node's client gRPC API.
	ClientAddr string
	// PeerAddr is the host:port of the node's node-to-node API.
	PeerAddr string
	// Incarnation is the node's site incarnation (docs/adr/029), 0 while
	// it has none.
	Incarnation uint64
	// Unreachable is how many other sites the node could not reach lately
	// (docs/adr/031): the site catalog prefers shard leaders that reach
	// as many sites as their site's best connected node. Announced only
	// with an Incarnation.
	Unreachable uint8
	// Replicas is the node's --replicas, 0 when not announced (a node of
	// an older release): the site catalog's leader compares the site's
	// values. Announced only with an Incarnation.
	Replicas uint8
}

// Name is the node's memberlist name, Site + "/" + NodeID. Names are unique
// in a cluster.
func (m Meta) Name() string { return m.Site + "/" + m.NodeID }

// Validate checks every field of m. Its errors wrap ErrInvalidMeta.
func (m Meta) Validate() error {
	if !validName(m.Site) {
		return fmt.Errorf("%w: site %q: use 1-%d lowercase letters, digits or '-'", ErrInvalidMeta, m.Site, MaxNameLen)
	}
	if !validName(m.NodeID) {
		return fmt.Errorf("%w: node id %q: use 1-%d lowercase letters, digits or '-'", ErrInvalidMeta, m.NodeID, MaxNameLen)
	}
	if err := validAddr(m.ClientAddr); err != nil {
		return fmt.Errorf("%w: client address %q: %v", ErrInvalidMeta, m.ClientAddr, err)
	}
	if err := validAddr(m.PeerAddr); err != nil {
		return fmt.Errorf("%w: peer address %q: %v", ErrInvalidMeta, m.PeerAddr, err)
	}
	return nil
}

// MarshalBinary encodes m: a version byte (1, or 2 with an Incarnation),
// then Site, NodeID, ClientAddr and PeerAddr, each as a uvarint length and
// its bytes, then for version 2 the Incarnation, 8 bytes big endian. It
// fails if m is not valid. A node of an older release reads a version 2
// meta as its version-1 prefix.
func (m Meta) MarshalBinary() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 1+4*2+len(m.Site)+len(m.NodeID)+len(m.ClientAddr)+len(m.PeerAddr))
	version := byte(metaVersion)
	if m.Incarnation != 0 {
		version = metaVersionIncarnation
		if m.Unreachable != 0 {
			version = metaVersionReach
		}
		if m.Replicas != 0 {
			version = metaVersionReplicas
		}
	}
	b = append(b, version)
	for _, f := range [...]string{m.Site, m.NodeID, m.ClientAddr, m.PeerAddr} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	if m.Incarnation != 0 {
		b = binary.BigEndian.AppendUint64(b, m.Incarnation)
		if version >= metaVersionReach {
			b = append(b, m.Unreachable)
		}
		if version >= metaVersionReplicas {
			b = append(b, m.Replicas)
		}
	}
	return b, nil
}

// UnmarshalBinary decodes b, which usually comes from another process, into
// m. It never panics; malformed input returns an error wrapping
// ErrMalformedMeta, and a well-formed but invalid Meta one wrapping
// ErrInvalidMeta. Lengths must be minimal uvarints. Version 1 must have no trailing bytes; a later version is
// read as its version-1 prefix, so that newer nodes may append fields.
func (m *Meta) UnmarshalBinary(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty", ErrMalformedMeta)
	}
	if len(b) > memberlist.MetaMaxSize {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrMalformedMeta, len(b), memberlist.MetaMaxSize)
	}
	version := b[0]
	if version == 0 {
		return fmt.Errorf("%w: version 0", ErrMalformedMeta)
	}
	rest := b[1:]
	var fields [4]string
	limits := [4]int{MaxNameLen, MaxNameLen, MaxAddrLen, MaxAddrLen}
	for i := range fields {
		n, k := binary.Uvarint(rest)
		if k <= 0 || k != uvarintLen(n) {
			return fmt.Errorf("%w: field %d: bad length", ErrMalformedMeta, i)
		}
		rest = rest[k:]
		if n > uint64(limits[i]) || n > uint64(len(rest)) {
			return fmt.Errorf("%w: field %d: length %d out of range", ErrMalformedMeta, i, n)
		}
		fields[i] = string(rest[:n])
		rest = rest[n:]
	}
	var inc uint64
	var unreachable, replicas uint8
	switch {
	case version == metaVersion && len(rest) > 0:
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformedMeta, len(rest))
	case version >= metaVersionIncarnation:
		if len(rest) < 8 || (version == metaVersionIncarnation && len(rest) != 8) {
			return fmt.Errorf("%w: version %d with %d bytes after the addresses", ErrMalformedMeta, version, len(rest))
		}
		if inc = binary.BigEndian.Uint64(rest); inc == 0 {
			return fmt.Errorf("%w: incarnation 0", ErrMalformedMeta)
		}
		if version >= metaVersionReach {
			if len(rest) < 9 || (version == metaVersionReach && len(rest) != 9) {
				return fmt.Errorf("%w: version %d with %d bytes after the addresses", ErrMalformedMeta, version, len(rest))
			}
			unreachable = rest[8]
		}
		if version >= metaVersionReplicas {
			if len(rest) < 10 || (version == metaVersionReplicas && len(rest) != 10) {
				return fmt.Errorf("%w: version %d with %d bytes after the addresses", ErrMalformedMeta, version, len(rest))
			}
			replicas = rest[9]
		}
	}
	dec := Meta{Site: fields[0], NodeID: fields[1], ClientAddr: fields[2], PeerAddr: fields[3], Incarnation: inc, Unreachable: unreachable, Replicas: replicas}
	if err := dec.Validate(); err != nil {
		return err
	}
	*m = dec
	return nil
}

// uvarintLen is the size of the minimal uvarint encoding of n. Decoding
// rejects longer ones, so that every meta has one encoding.
func uvarintLen(n uint64) int {
	k := 1
	for ; n >= 0x80; n >>= 7 {
		k++
	}
	return k
}

// validName reports whether s may be a Site or NodeID.
func validName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validAddr checks that s is host:port with a non-empty host and a port in
// 1..65535, at most MaxAddrLen bytes.
func validAddr(s string) error {
	if len(s) > MaxAddrLen {
		return fmt.Errorf("longer than %d bytes", MaxAddrLen)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("empty host")
	}
	for i := 0; i < len(host); i++ {
		if host[i] <= ' ' || host[i] == 0x7f {
			return fmt.Errorf("control or space character in host")
		}
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return fmt.Errorf("port %q: want 1-65535", port)
	}
	return nil
}
