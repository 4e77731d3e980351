//go:build !unix

package structured

import "time"

// processCPU is not measured here; the benchmarks report cpu-ns/op as 0.
func processCPU() time.Duration { return 0 }
