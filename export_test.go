package keel

import "context"

// FlushRequestLog waits until every Record m's request log has queued is
// written, for BenchmarkRequestLogPerCall to charge the writer's CPU to the
// calls that caused it.
func FlushRequestLog(ctx context.Context, m *Mesh) error { return m.built.FlushRequestLog(ctx) }
