package bench

import (
	"fmt"
	"os"
	"time"
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

// fsyncBlock is the size of each probe write.
const fsyncBlock = 4096

// ProbeFsync writes 4 KiB blocks at increasing offsets to a temporary file
// in dir and forces each to disk (fdatasync on Linux), n times or until
// maxDur has passed, whichever comes first. The file is removed afterwards.
func ProbeFsync(dir string, n int, maxDur time.Duration) (FsyncResult, error) {
	res := FsyncResult{Dir: dir, Method: syncMethod}
	if n < 1 {
		return res, fmt.Errorf("fsync probe: n must be positive")
	}
	f, err := os.CreateTemp(dir, ".kvbench-fsync-*")
	if err != nil {
		return res, fmt.Errorf("fsync probe: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	block := make([]byte, fsyncBlock)
	for i := range block {
		block[i] = byte(i*7 + 1)
	}
	h := NewHistogram()
	deadline := time.Now().Add(maxDur)
	for i := 0; i < n; i++ {
		if i > 0 && maxDur > 0 && time.Now().After(deadline) {
			break
		}
		start := time.Now()
		if _, err := f.WriteAt(block, int64(i)*fsyncBlock); err != nil {
			return res, fmt.Errorf("fsync probe: write: %w", err)
		}
		if err := datasync(f); err != nil {
			return res, fmt.Errorf("fsync probe: %s: %w", syncMethod, err)
		}
		RecordLatency(h, time.Since(start))
	}
	s := Summarize(h)
	res.Samples, res.P50Ms, res.P99Ms, res.MaxMs = s.Count, s.P50Ms, s.P99Ms, s.MaxMs
	return res, nil
}
