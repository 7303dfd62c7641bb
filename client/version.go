package client

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
)

// Version identifies one write: a hybrid logical clock timestamp (HLC,
// milliseconds since the Unix epoch in the upper 48 bits and a logical
// counter in the lower 16) and the site the write originated at. Versions
// are totally ordered by (HLC, Site); the zero Version means "none". Its
// String form is "WALL.LOGICAL@SITE", which ParseVersion reads back.
type Version = causal.Version

// ErrBadVersion is wrapped by the errors of ParseVersion.
var ErrBadVersion = errors.New("client: invalid version")

// maxWall is the largest wall-clock value an HLC can hold.
const maxWall = 1<<(64-causal.LogicalBits) - 1

// ParseVersion parses the text form of a Version, "WALL.LOGICAL@SITE" as
// printed by Version.String: WALL is the decimal wall-clock milliseconds,
// LOGICAL the decimal logical counter (0-65535) and SITE the non-empty
// origin site. For example "1723456789012.3@eu-west".
func ParseVersion(s string) (Version, error) {
	bad := func(why string) (Version, error) {
		return Version{}, fmt.Errorf("%w %q: %s (want WALL.LOGICAL@SITE, e.g. 1723456789012.0@local)", ErrBadVersion, s, why)
	}
	clock, site, ok := strings.Cut(s, "@")
	if !ok {
		return bad("missing @SITE")
	}
	if site == "" {
		return bad("empty site")
	}
	wallText, logicalText, ok := strings.Cut(clock, ".")
	if !ok {
		return bad("missing .LOGICAL")
	}
	wall, err := parseDecimal(wallText, maxWall)
	if err != nil {
		return bad("wall clock " + err.Error())
	}
	logical, err := parseDecimal(logicalText, 1<<causal.LogicalBits-1)
	if err != nil {
		return bad("logical counter " + err.Error())
	}
	return Version{HLC: causal.MakeHLC(wall, uint16(logical)), Site: site}, nil
}

// parseDecimal parses an unsigned decimal number no larger than max,
// rejecting signs, spaces and empty input.
func parseDecimal(s string, max uint64) (uint64, error) {
	if s == "" {
		return 0, errors.New("is empty")
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("%s is out of range (max %d)", s, max)
	}
	return n, nil
}

func fromProtoVersion(v *kvv1.Version) Version {
	if v == nil {
		return Version{}
	}
	return Version{HLC: v.GetHlc(), Site: v.GetSite()}
}

func toProtoVersion(v Version) *kvv1.Version {
	return &kvv1.Version{Hlc: v.HLC, Site: v.Site}
}
