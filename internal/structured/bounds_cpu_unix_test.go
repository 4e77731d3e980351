//go:build unix

package structured

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used, all threads (GC
// included): on a machine shared with other work it measures a compile's
// cost where wall time measures the queue.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
