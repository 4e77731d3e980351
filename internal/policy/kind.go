package policy

import "strconv"

// AttemptKind is why an attempt was made. The policies steer it (a
// retried primary pass becomes a retry, a fallback pass a fallback) and
// the hedge policy races only primary and retry passes; its String is the
// label the record, the attempt events and the metrics carry.
type AttemptKind uint8

// The attempt kinds.
const (
	AttemptPrimary      AttemptKind = iota // the call's first pass
	AttemptRetry                           // the same work again after a failure
	AttemptHedge                           // racing the pass's first attempt
	AttemptFallback                        // the next model, the route's own spent
	AttemptContinuation                    // a stream continued after it failed mid-way
	AttemptReask                           // structured output asked again after an invalid answer
	AttemptFragment                        // one fragment of a fanned-out prompt
	AttemptMerge                           // the call merging the fragments' answers
)

var attemptKinds = [...]string{"primary", "retry", "hedge", "fallback", "continuation", "reask", "fragment", "merge"}

// String is the kind's label ("primary", "retry", …).
func (k AttemptKind) String() string {
	if int(k) < len(attemptKinds) {
		return attemptKinds[k]
	}
	return "AttemptKind(" + strconv.Itoa(int(k)) + ")"
}
