//go:build !unix

package keel_test

import "time"

// processCPU is not measured off unix: BenchmarkShadowClientP99 reports
// 0 CPU per call there.
func processCPU() time.Duration { return 0 }
