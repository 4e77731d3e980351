// Package structured makes model answers that must be JSON parse: it validates
// an answer against a JSON Schema, repairs it with lossless steps only,
// extracts an implied schema from a system prompt's format demands (by rules,
// and by a key scorer fit on phrasing corpora where the rules read no key),
// builds the
// targeted prompt for a single re-ask, and finds the guarded spans (amounts,
// percentages, dates, identifiers, numbers) that no step may rewrite.
//
// It is also the call pipeline's structured-output stage (NewStage): it finds
// a call's output contract (SpecFor), and checks the answer that comes back
// up (Check): validated, repaired, re-asked once through the attempt path it
// is given (a consumer-side Reasker), a strict stream buffered whole and
// replayed, a relaxed one checked at its end.
//
// Apart from the stage, which does what its next handler and Reasker do,
// everything here is pure: no I/O, no goroutines, no clocks. Compiled
// schemas, Options and Results are values the caller owns; a *Schema, a
// Compiler and the package-level functions are safe for concurrent use; a
// StreamValidator belongs to one stream and is not. Metrics is a set of
// atomic counters safe for concurrent use. A Compiler holds its own limits
// and compile slots: no setting here is process-wide.
//
// Repair never invents data. Its steps run in a fixed order — extract the JSON
// value from fences and prose, close a truncated answer cut at a value
// boundary, remove trailing commas, fix quotes, coerce exact strings to the
// schema's scalar type, fill a missing field by a declared derivation rule —
// and after them a mechanical guard rejects any output that lost a guarded
// span of the answer. A valid answer is returned byte for byte. When no
// lossless sequence reaches a valid document, the Result says so and carries
// the violations for RepairPrompt.
package structured
