package geo

import (
	"time"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/storage"
)

// position returns the index of site in chain, or -1.
func position(chain []string, site string) int {
	for i, s := range chain {
		if s == site {
			return i
		}
	}
	return -1
}

// minProgress returns the component-wise minimum of the progress of the
// given sites (zero for a site not in known).
func minProgress(known map[string]storage.Progress, sites []string) storage.Progress {
	if len(sites) == 0 {
		return storage.Progress{}
	}
	out := known[sites[0]]
	for _, s := range sites[1:] {
		p := known[s]
		out.Seq = min(out.Seq, p.Seq)
		out.HLC = min(out.HLC, p.HLC)
	}
	return out
}

// maxProgress returns the component-wise maximum.
func maxProgress(a, b storage.Progress) storage.Progress {
	return storage.Progress{Seq: max(a.Seq, b.Seq), HLC: max(a.HLC, b.HLC)}
}

// links is a shipper's view of the sites downstream of it: which fail,
// which are skipped, and when each was last heard from by a ping.
type links struct {
	failingSince map[string]time.Time
	skippedAt    map[string]time.Time
}

func newLinks() links {
	return links{failingSince: map[string]time.Time{}, skippedAt: map[string]time.Time{}}
}

// target returns the site to ship to: the first downstream site that is
// not skipped, or a skipped one a ping reached after it was skipped
// (pingOK: the time of the last successful ping of a site). With every
// site skipped it returns the first one.
func (l links) target(downstream []string, pingOK func(string) time.Time) string {
	for _, s := range downstream {
		at, skipped := l.skippedAt[s]
		if !skipped || pingOK(s).After(at) {
			return s
		}
	}
	if len(downstream) == 0 {
		return ""
	}
	return downstream[0]
}

// fail records a failed call to site, sent at sent and given up at now;
// it reports whether the site is now skipped (for the first time). The
// site counts as unreachable from when the first failed call was sent.
// Counted from that call's failure, a cut site was skipped a call timeout
// late, and only by the call that failed after that: 9 s or more after
// the cut with the defaults (5 s SkipAfter, 3 s CallTimeout), not 6 s.
func (l links) fail(site string, sent, now time.Time, skipAfter time.Duration) bool {
	since, ok := l.failingSince[site]
	if !ok {
		since = now
		if !sent.IsZero() && sent.Before(now) {
			since = sent
		}
		l.failingSince[site] = since
	}
	if _, skipped := l.skippedAt[site]; skipped {
		l.skippedAt[site] = now
		return false
	}
	if now.Sub(since) >= skipAfter {
		l.skippedAt[site] = now
		return true
	}
	return false
}

// ok records a successful call; it reports whether the site was skipped.
func (l links) ok(site string) bool {
	delete(l.failingSince, site)
	_, skipped := l.skippedAt[site]
	delete(l.skippedAt, site)
	return skipped
}

// progressList encodes known progress for the wire, sorted by site.
func progressList(known map[string]storage.Progress, order []string) []*peerv1.OriginProgress {
	out := make([]*peerv1.OriginProgress, 0, len(known))
	for _, s := range order {
		if p, ok := known[s]; ok {
			out = append(out, &peerv1.OriginProgress{Site: s, Seq: p.Seq, Hlc: p.HLC})
		}
	}
	return out
}
