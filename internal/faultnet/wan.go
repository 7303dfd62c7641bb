package faultnet

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrBadWAN is returned by ParseWAN for a malformed specification.
var ErrBadWAN = errors.New("faultnet: bad simulated WAN")

// WAN is a simulated wide-area network: the one-way delay (and jitter)
// of every message between two different sites. Pairs are unordered: the
// delay from a to b is the delay from b to a. The zero WAN delays nothing.
type WAN struct {
	links map[pair[string]]Rule // key: the pair with from < to
	def   Rule                  // every other pair of different sites
}

// sitePair returns the unordered pair of a and b.
func sitePair(a, b string) pair[string] {
	if b < a {
		a, b = b, a
	}
	return pair[string]{a, b}
}

// Rule returns the rule of messages between sites a and b: nothing inside
// a site, the pair's own delay when the specification lists it, else the
// default.
func (w WAN) Rule(a, b string) Rule {
	if a == b {
		return Rule{}
	}
	if r, ok := w.links[sitePair(a, b)]; ok {
		return r
	}
	return w.def
}

// String returns the specification of w in ParseWAN's syntax, pairs
// sorted, the default last.
func (w WAN) String() string {
	var parts []string
	for p, r := range w.links {
		sep := "-"
		if strings.Contains(p.from+p.to, "-") {
			sep = "/"
		}
		parts = append(parts, p.from+sep+p.to+"="+formatDelay(r))
	}
	slices.Sort(parts)
	if !w.def.healthy() {
		parts = append(parts, "*="+formatDelay(w.def))
	}
	return strings.Join(parts, ",")
}

func formatDelay(r Rule) string {
	if r.Jitter > 0 {
		return r.Delay.String() + "±" + r.Jitter.String()
	}
	return r.Delay.String()
}

// ParseWAN parses a simulated WAN: comma-separated entries
// "A-B=DELAY[±JITTER]" (also "A/B" and "+-"), the one-way delay between
// sites A and B in both directions, and "*=DELAY[±JITTER]", the delay
// between any other two different sites. Durations use Go's syntax
// (50ms, 1.5s). Jitter J adds a uniform random delay in [0, J) to each
// message. For example "s1-s2=50ms±5ms,s1-s3=80ms,*=40ms".
func ParseWAN(spec string) (WAN, error) {
	w := WAN{links: map[pair[string]]Rule{}}
	if strings.TrimSpace(spec) == "" {
		return WAN{}, fmt.Errorf("%w: empty specification", ErrBadWAN)
	}
	hasDefault := false
	for _, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return WAN{}, fmt.Errorf("%w: empty entry in %q", ErrBadWAN, spec)
		}
		lhs, rhs, ok := strings.Cut(entry, "=")
		if !ok {
			return WAN{}, fmt.Errorf("%w: %q: want SITE-SITE=DELAY or *=DELAY", ErrBadWAN, entry)
		}
		lhs = strings.TrimSpace(lhs)
		r, err := parseDelay(strings.TrimSpace(rhs))
		if err != nil {
			return WAN{}, fmt.Errorf("%w: %q: %v", ErrBadWAN, entry, err)
		}
		if lhs == "*" {
			if hasDefault {
				return WAN{}, fmt.Errorf("%w: %q: the default is given twice", ErrBadWAN, entry)
			}
			hasDefault, w.def = true, r
			continue
		}
		a, b, err := parseSites(lhs)
		if err != nil {
			return WAN{}, fmt.Errorf("%w: %q: %v", ErrBadWAN, entry, err)
		}
		k := sitePair(a, b)
		if _, dup := w.links[k]; dup {
			return WAN{}, fmt.Errorf("%w: %q: the pair %s-%s is given twice", ErrBadWAN, entry, k.from, k.to)
		}
		w.links[k] = r
	}
	return w, nil
}

// parseSites parses "A-B" or "A/B". Site names may hold '-', so "A-B"
// splits at a '/' if there is one, else at the only '-'.
func parseSites(s string) (a, b string, err error) {
	sep := "/"
	if !strings.Contains(s, "/") {
		sep = "-"
		if strings.Count(s, "-") != 1 {
			return "", "", errors.New("want two sites as A-B (use A/B for site names with '-')")
		}
	}
	a, b, _ = strings.Cut(s, sep)
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	switch {
	case a == "" || b == "":
		return "", "", errors.New("want two sites as A-B or A/B")
	case strings.Contains(b, "/"):
		return "", "", errors.New("more than two sites")
	case a == "*" || b == "*":
		return "", "", errors.New("'*' stands alone: *=DELAY")
	case a == b:
		return "", "", fmt.Errorf("site %s with itself: traffic inside a site is never delayed", a)
	}
	for _, site := range []string{a, b} {
		if !validSiteName(site) {
			return "", "", fmt.Errorf("%q is not a site name (1 to 63 lowercase letters, digits and '-'): it would match no site", site)
		}
	}
	return a, b, nil
}

// validSiteName reports whether s can name a site (storage.ValidSiteName).
func validSiteName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// parseDelay parses "DELAY[±JITTER]" (or "+-").
func parseDelay(s string) (Rule, error) {
	d, j, hasJitter := strings.Cut(s, "±")
	if !hasJitter {
		d, j, hasJitter = strings.Cut(s, "+-")
	}
	delay, err := parseDuration(d, "delay")
	if err != nil {
		return Rule{}, err
	}
	r := Rule{Delay: delay}
	if hasJitter {
		if r.Jitter, err = parseDuration(j, "jitter"); err != nil {
			return Rule{}, err
		}
	}
	return r, nil
}

// maxWANDelay bounds a simulated one-way delay: more is a typo.
const maxWANDelay = time.Minute

func parseDuration(s, what string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("%s is missing", what)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a duration such as 50ms", what, s)
	}
	if d < 0 || d > maxWANDelay {
		return 0, fmt.Errorf("%s %v: want 0 to %v", what, d, maxWANDelay)
	}
	return d, nil
}
