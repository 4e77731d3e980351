//go:build !unix

package sqlite

import "time"

// cpuTime is 0 where getrusage is missing: benchmarks then report no
// CPU time.
func cpuTime() time.Duration { return 0 }
