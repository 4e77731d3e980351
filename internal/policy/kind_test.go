package policy

import "testing"

// TestAttemptKindLabels: the labels the record, the attempt events, the
// metrics (internal/telemetry/metrics) and the request log's stored
// attempts carry are the ones they carried as strings.
func TestAttemptKindLabels(t *testing.T) {
	for k, want := range map[AttemptKind]string{
		AttemptPrimary: "primary", AttemptRetry: "retry", AttemptHedge: "hedge", AttemptFallback: "fallback",
		AttemptContinuation: "continuation", AttemptReask: "reask", AttemptFragment: "fragment", AttemptMerge: "merge",
		AttemptMerge + 1: "AttemptKind(8)",
	} {
		if got := k.String(); got != want {
			t.Errorf("AttemptKind(%d).String() = %q, want %q", k, got, want)
		}
	}
	if (Pass{}).Kind != AttemptPrimary {
		t.Error("a new pass is not the primary pass")
	}
}
