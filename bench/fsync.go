package bench

import (
	"time"

	"github.com/causeway-db/causeway/bench/floors"
)

// FsyncResult is the latency of small synchronous writes on one disk.
type FsyncResult struct {
	Dir     string  `json:"dir"`
	Method  string  `json:"method"`
	Samples int64   `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// syncMethod names the call that forces a write to disk on this platform.
const syncMethod = floors.SyncMethod

// ProbeFsync writes 4 KiB blocks at increasing offsets to a temporary file
// in dir and forces each to disk (fdatasync on Linux), n times or until
// maxDur has passed (no limit when maxDur is zero), whichever comes first.
// The file is removed afterwards. It is floors.Fsync reported in kvbench's
// format.
func ProbeFsync(dir string, n int, maxDur time.Duration) (FsyncResult, error) {
	if maxDur <= 0 {
		maxDur = 24 * time.Hour
	}
	r, err := floors.Fsync(dir, n, maxDur)
	return FsyncResult{Dir: dir, Method: syncMethod, Samples: r.Samples, P50Ms: r.P50Ms, P99Ms: r.P99Ms, MaxMs: r.MaxMs}, err
}
