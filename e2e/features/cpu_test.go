package features_test

import (
	"syscall"
	"testing"
	"time"
)

// cpuClock measures the process's CPU time (user + system, every thread:
// the GC's too) across a benchmark loop. On a shared, loaded machine CPU
// per call is steadier than wall time per call. (The repository root's
// bench_test.go has the same clock for the embedded transport's
// benchmarks.)
type cpuClock struct{ start time.Duration }

func startCPU() cpuClock { return cpuClock{processCPU()} }

func (c cpuClock) report(b *testing.B) {
	if b.N > 0 {
		b.ReportMetric(float64(processCPU()-c.start)/float64(b.N), "cpu-ns/op")
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
