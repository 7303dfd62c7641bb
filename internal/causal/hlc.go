package causal

import (
	"fmt"
	"sync"
	"time"
)

// LogicalBits is the number of low HLC bits that hold the logical counter.
const LogicalBits = 16

const logicalMask = 1<<LogicalBits - 1

// MakeHLC packs wall-clock milliseconds and a logical counter.
func MakeHLC(wallMillis uint64, logical uint16) uint64 {
	return wallMillis<<LogicalBits | uint64(logical)
}

// SplitHLC unpacks an HLC into wall-clock milliseconds and logical counter.
func SplitHLC(hlc uint64) (wallMillis uint64, logical uint16) {
	return hlc >> LogicalBits, uint16(hlc & logicalMask)
}

// Clock is a hybrid logical clock (Kulkarni et al.). Readings are strictly
// increasing, stay close to physical time, and Observe makes every reading
// after a received timestamp larger than it, so a causally later event always
// carries a larger timestamp whatever the skew between physical clocks.
// Clock is safe for concurrent use.
type Clock struct {
	physical func() uint64 // wall-clock milliseconds

	mu   sync.Mutex
	last uint64 // REQUIRES: mu
}

// NewClock returns a clock driven by physical, which returns wall-clock time
// in milliseconds since the Unix epoch.
func NewClock(physical func() uint64) *Clock {
	return &Clock{physical: physical}
}

// Now returns a timestamp larger than every earlier reading and every
// observed timestamp.
func (c *Clock) Now() uint64 {
	pt := MakeHLC(c.physical(), 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	if pt > c.last {
		c.last = pt
	} else {
		c.last++
	}
	return c.last
}

// Observe merges a timestamp received from elsewhere (another node, a
// client's session, a committed write).
func (c *Clock) Observe(hlc uint64) {
	c.mu.Lock()
	if hlc > c.last {
		c.last = hlc
	}
	c.mu.Unlock()
}

// Physical returns the physical clock's reading as an HLC (logical 0).
func (c *Clock) Physical() uint64 { return MakeHLC(c.physical(), 0) }

// Last returns the largest timestamp issued or observed so far.
func (c *Clock) Last() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// FormatHLC renders an HLC for people: WALL.LOGICAL as kvctl prints
// versions, and the wall clock time it stands for.
func FormatHLC(hlc uint64) string {
	wall, logical := SplitHLC(hlc)
	return fmt.Sprintf("%d.%d (%s)", wall, logical, time.UnixMilli(int64(wall)).UTC().Format("2006-01-02T15:04:05.000Z"))
}
