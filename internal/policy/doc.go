// Package policy holds the policies a call's attempts go through, each its
// own type with its own state, and the typed failures they decide from.
//
// A failed attempt is classified once (Classify) into a Failure: its Kind
// and Decision say what the call may do next; its Reason is only a label.
// The policies compose as wrappers around one attempt (failsafe-go's
// executor), outermost first: Fallback → Retry → hedging → routing →
// Breaker → send; Budget is the one place a retry of work draws on the
// route's retry budget, for the retry policy and for a stream's
// continuation alike.
//
// Policies are immutable once built and safe for concurrent use; the
// per-call state each keeps (RetryState …) belongs to one call and is
// used from that call's goroutine only, unless its doc says otherwise.
package policy
