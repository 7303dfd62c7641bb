package membership

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Profile names: each starts from the memberlist defaults of the same name.
const (
	// ProfileLAN suits a site's local network (memberlist.DefaultLANConfig:
	// probe every 1s, 500ms probe timeout, dead after a few seconds).
	ProfileLAN = "lan"
	// ProfileWAN suits gossip across sites (memberlist.DefaultWANConfig:
	// probe every 5s, 3s probe timeout, slower suspicion).
	ProfileWAN = "wan"
	// ProfileLocal suits a single host and tests
	// (memberlist.DefaultLocalConfig: short timeouts).
	ProfileLocal = "local"
)

// Config configures one node's gossip membership. Zero durations and
// counts in the override fields mean "the profile's value".
type Config struct {
	// BindAddr is the IP:port gossip binds to, over both UDP and TCP. Port
	// 0 lets the kernel pick a free port (see Membership.Local for the one
	// chosen). The host must be an IP literal; 0.0.0.0 binds every
	// interface.
	BindAddr string
	// AdvertiseAddr is the IP:port other nodes reach this node at. Empty
	// means the bound address (a private IP of the host when BindAddr is
	// 0.0.0.0) and the bound port.
	AdvertiseAddr string
	// Meta is what this node tells the others; Meta.Name() is its
	// memberlist name.
	Meta Meta
	// Profile is ProfileLAN, ProfileWAN or ProfileLocal.
	Profile string

	// ProbeInterval is how often a random member is probed for failure.
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a probe's ack before trying
	// indirect probes; about the 99th percentile RTT.
	ProbeTimeout time.Duration
	// SuspicionMult scales how long a suspect member has to refute before it
	// is declared dead (SuspicionMult * log10(members) * ProbeInterval, at
	// least SuspicionMult * ProbeInterval).
	SuspicionMult int
	// GossipInterval is how often state changes are gossiped to a few
	// random members.
	GossipInterval time.Duration
	// PushPullInterval is how often the full state is exchanged with a
	// random member.
	PushPullInterval time.Duration
	// GossipToTheDeadTime is how long memberlist keeps a dead or left
	// member (and keeps gossiping to it); Members reports it that long.
	GossipToTheDeadTime time.Duration
	// DeadNodeReclaimTime is how long after its death a node's name may be
	// taken by a node at another address. Zero in every profile: never.
	DeadNodeReclaimTime time.Duration
	// TCPTimeout bounds one TCP exchange: a join or push/pull with a member,
	// a TCP fallback probe. One Join attempt may exceed Join's ctx by this
	// much per address.
	TCPTimeout time.Duration

	// EventBuffer is the capacity of the Events channel. When it is full
	// the oldest event is dropped.
	EventBuffer int
	// JoinBackoff is the wait after Join's first failed attempt; it doubles
	// up to JoinMaxBackoff.
	JoinBackoff time.Duration
	// JoinMaxBackoff caps the wait between Join attempts.
	JoinMaxBackoff time.Duration
	// LeaveTimeout bounds Leave when its ctx has no deadline.
	LeaveTimeout time.Duration

	// ReconnectInterval is how often this node tries to rejoin members it
	// found dead and the seeds at which no member alive gossips, so that a
	// node cut off by a partition rejoins once the network heals, and
	// nodes that started apart find one another. Zero means the profile's
	// value: 1s local, 10s LAN, 30s WAN.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long a dead member is retried (24h if
	// zero); a member that left gracefully is never retried.
	ReconnectTimeout time.Duration
	// Seeds are gossip addresses to rejoin while no member alive gossips
	// at them (normally the addresses given to Join at start, and those of
	// the other nodes of the site; SetSeeds replaces them). A seed given
	// as a host name never matches a member's address, so it is contacted
	// every ReconnectInterval.
	Seeds []string

	// WrapTransport, if set, wraps the UDP/TCP transport gossip runs on
	// (a fault-injecting transport: internal/faultnet).
	WrapTransport func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
}

// DefaultConfig returns the LAN profile for a node that binds bind and
// advertises meta.
func DefaultConfig(bind string, meta Meta) Config {
	return Config{
		BindAddr:       bind,
		Meta:           meta,
		Profile:        ProfileLAN,
		EventBuffer:    1024,
		JoinBackoff:    200 * time.Millisecond,
		JoinMaxBackoff: 10 * time.Second,
		LeaveTimeout:   5 * time.Second,
	}
}

// Validate checks c. Its errors wrap ErrInvalidConfig (or ErrInvalidMeta
// for the Meta).
func (c Config) Validate() error {
	if _, err := parseIPPort(c.BindAddr); err != nil {
		return fmt.Errorf("%w: bind address %q: %v", ErrInvalidConfig, c.BindAddr, err)
	}
	if c.AdvertiseAddr != "" {
		ap, err := parseIPPort(c.AdvertiseAddr)
		if err != nil {
			return fmt.Errorf("%w: advertise address %q: %v", ErrInvalidConfig, c.AdvertiseAddr, err)
		}
		if ap.Addr().IsUnspecified() {
			return fmt.Errorf("%w: advertise address %q: unspecified IP", ErrInvalidConfig, c.AdvertiseAddr)
		}
	}
	if err := c.Meta.Validate(); err != nil {
		return err
	}
	if profileConfig(c.Profile) == nil {
		return fmt.Errorf("%w: profile %q: want %q, %q or %q", ErrInvalidConfig, c.Profile, ProfileLAN, ProfileWAN, ProfileLocal)
	}
	for name, d := range map[string]time.Duration{
		"probe interval": c.ProbeInterval, "probe timeout": c.ProbeTimeout,
		"gossip interval": c.GossipInterval, "push/pull interval": c.PushPullInterval,
		"gossip to the dead time": c.GossipToTheDeadTime, "dead node reclaim time": c.DeadNodeReclaimTime,
		"tcp timeout": c.TCPTimeout, "leave timeout": c.LeaveTimeout,
		"reconnect interval": c.ReconnectInterval, "reconnect timeout": c.ReconnectTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("%w: %s %v: must not be negative", ErrInvalidConfig, name, d)
		}
	}
	if c.SuspicionMult < 0 {
		return fmt.Errorf("%w: suspicion mult %d: must not be negative", ErrInvalidConfig, c.SuspicionMult)
	}
	if c.EventBuffer < 1 {
		return fmt.Errorf("%w: event buffer %d: must be positive", ErrInvalidConfig, c.EventBuffer)
	}
	if c.JoinBackoff <= 0 || c.JoinMaxBackoff < c.JoinBackoff {
		return fmt.Errorf("%w: join backoff %v..%v: want 0 < JoinBackoff <= JoinMaxBackoff", ErrInvalidConfig, c.JoinBackoff, c.JoinMaxBackoff)
	}
	if c.LeaveTimeout <= 0 {
		return fmt.Errorf("%w: leave timeout %v: must be positive", ErrInvalidConfig, c.LeaveTimeout)
	}
	return nil
}

// profileConfig returns memberlist's default configuration for the named
// profile, or nil for an unknown name.
func profileConfig(name string) *memberlist.Config {
	switch name {
	case ProfileLAN:
		return memberlist.DefaultLANConfig()
	case ProfileWAN:
		return memberlist.DefaultWANConfig()
	case ProfileLocal:
		return memberlist.DefaultLocalConfig()
	}
	return nil
}

// memberlistConfig translates a validated c into memberlist's Config. The
// caller sets the delegates and the logger.
func (c Config) memberlistConfig() *memberlist.Config {
	mc := profileConfig(c.Profile)
	mc.Name = c.Meta.Name()
	bind, _ := parseIPPort(c.BindAddr)
	mc.BindAddr = bind.Addr().String()
	mc.BindPort = int(bind.Port())
	mc.AdvertiseAddr, mc.AdvertisePort = "", mc.BindPort
	if c.AdvertiseAddr != "" {
		adv, _ := parseIPPort(c.AdvertiseAddr)
		mc.AdvertiseAddr = adv.Addr().String()
		mc.AdvertisePort = int(adv.Port())
	}
	setIf(&mc.ProbeInterval, c.ProbeInterval)
	setIf(&mc.ProbeTimeout, c.ProbeTimeout)
	setIf(&mc.SuspicionMult, c.SuspicionMult)
	setIf(&mc.GossipInterval, c.GossipInterval)
	setIf(&mc.PushPullInterval, c.PushPullInterval)
	setIf(&mc.GossipToTheDeadTime, c.GossipToTheDeadTime)
	setIf(&mc.DeadNodeReclaimTime, c.DeadNodeReclaimTime)
	setIf(&mc.TCPTimeout, c.TCPTimeout)
	return mc
}

// setIf overwrites *dst with v unless v is zero.
func setIf[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// parseIPPort parses an IP:port with a port in 0..65535.
func parseIPPort(s string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("host must be an IP address: %v", err)
	}
	if ip.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("IPv6 zones are not supported")
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: want 0-65535", port)
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(p)), nil
}

// reconnectInterval returns ReconnectInterval or the profile's default.
func (c Config) reconnectInterval() time.Duration {
	if c.ReconnectInterval > 0 {
		return c.ReconnectInterval
	}
	switch c.Profile {
	case ProfileLocal:
		return time.Second
	case ProfileWAN:
		return 30 * time.Second
	}
	return 10 * time.Second
}

// reconnectTimeout returns ReconnectTimeout or its default.
func (c Config) reconnectTimeout() time.Duration {
	if c.ReconnectTimeout > 0 {
		return c.ReconnectTimeout
	}
	return 24 * time.Hour
}
