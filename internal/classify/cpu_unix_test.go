//go:build unix

package classify

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time. Benchmarks report it per
// operation next to wall-clock ns/op because the shared CI machines run at a
// load far above their core count, which inflates wall-clock figures.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
