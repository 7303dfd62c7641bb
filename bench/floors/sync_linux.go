package floors

import (
	"os"
	"syscall"
)

const syncMethod = "fdatasync"

func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
