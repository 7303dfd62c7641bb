package membership

import (
	"errors"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig("0.0.0.0:7946", validMeta()).Validate(); err != nil {
		t.Fatalf("DefaultConfig is invalid: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"empty bind", func(c *Config) { c.BindAddr = "" }},
		{"bind without port", func(c *Config) { c.BindAddr = "127.0.0.1" }},
		{"bind hostname", func(c *Config) { c.BindAddr = "localhost:7946" }},
		{"bind port too big", func(c *Config) { c.BindAddr = "127.0.0.1:70000" }},
		{"advertise hostname", func(c *Config) { c.AdvertiseAddr = "node1:7946" }},
		{"advertise unspecified", func(c *Config) { c.AdvertiseAddr = "0.0.0.0:7946" }},
		{"unknown profile", func(c *Config) { c.Profile = "metro" }},
		{"empty profile", func(c *Config) { c.Profile = "" }},
		{"negative probe interval", func(c *Config) { c.ProbeInterval = -time.Second }},
		{"negative suspicion mult", func(c *Config) { c.SuspicionMult = -1 }},
		{"zero event buffer", func(c *Config) { c.EventBuffer = 0 }},
		{"zero join backoff", func(c *Config) { c.JoinBackoff = 0 }},
		{"max backoff below backoff", func(c *Config) { c.JoinMaxBackoff = c.JoinBackoff / 2 }},
		{"zero leave timeout", func(c *Config) { c.LeaveTimeout = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig("127.0.0.1:7946", validMeta())
			tc.edit(&c)
			if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestMemberlistConfig(t *testing.T) {
	c := DefaultConfig("127.0.0.1:7946", validMeta())
	mc := c.memberlistConfig()
	if mc.Name != "eu-west/n1" || mc.BindAddr != "127.0.0.1" || mc.BindPort != 7946 || mc.AdvertiseAddr != "" || mc.AdvertisePort != 7946 {
		t.Fatalf("LAN: name %q bind %s:%d advertise %q:%d", mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertiseAddr, mc.AdvertisePort)
	}
	if mc.ProbeInterval != time.Second || mc.SuspicionMult != 4 {
		t.Fatalf("LAN profile not applied: probe %v suspicion %d", mc.ProbeInterval, mc.SuspicionMult)
	}

	c.Profile = ProfileWAN
	c.AdvertiseAddr = "[2001:db8::1]:8000"
	c.ProbeTimeout = 123 * time.Millisecond
	mc = c.memberlistConfig()
	if mc.ProbeInterval != 5*time.Second || mc.ProbeTimeout != 123*time.Millisecond {
		t.Fatalf("WAN profile with override: probe interval %v timeout %v", mc.ProbeInterval, mc.ProbeTimeout)
	}
	if mc.AdvertiseAddr != "2001:db8::1" || mc.AdvertisePort != 8000 {
		t.Fatalf("advertise %q:%d", mc.AdvertiseAddr, mc.AdvertisePort)
	}

	c.Profile = ProfileLocal
	c.GossipInterval = 7 * time.Millisecond
	mc = c.memberlistConfig()
	if mc.TCPTimeout != time.Second || mc.GossipInterval != 7*time.Millisecond {
		t.Fatalf("local profile with override: tcp timeout %v gossip %v", mc.TCPTimeout, mc.GossipInterval)
	}
}
