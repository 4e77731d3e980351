package engine

import "github.com/keelmesh/keel/internal/callrec"

// The call's record is internal/callrec's, one part per stage; these names
// keep the engine's API.
type (
	// Observer receives one Record per finished client call (callrec.Observer).
	Observer = callrec.Observer
	// Record is everything the engine did for one client call (callrec.Record).
	Record = callrec.Record
	// Attempt is one upstream attempt.
	Attempt = callrec.Attempt
	// Candidate is one endpoint as the router saw it.
	Candidate = callrec.Candidate
)
