package engine

import "github.com/keelmesh/keel/internal/callrec"

// The call's record is internal/callrec's, one part per stage; these names
// keep the engine's API.
type (
	// Observer receives one Record per finished client call (callrec.Observer).
	Observer = callrec.Observer
	// ObserverFunc adapts a function to Observer.
	ObserverFunc = callrec.ObserverFunc
	// Record is everything the engine did for one client call (callrec.Record).
	Record = callrec.Record
	// Structured describes the output contract of a call (structured.Trace).
	Structured = callrec.StructuredTrace
	// FragmentDetail is one fragment of a fragmented call (fragment.Detail).
	FragmentDetail = callrec.FragmentDetail
	// Attempt is one upstream attempt.
	Attempt = callrec.Attempt
	// Candidate is one endpoint as the router saw it.
	Candidate = callrec.Candidate
)

// Fragment outcomes (fragment.OutcomeOK …).
const (
	FragmentOK      = callrec.FragmentOK
	FragmentInvalid = callrec.FragmentInvalid
	FragmentFailed  = callrec.FragmentFailed
)
