// Package structured makes model answers that must be JSON parse: it validates
// an answer against a JSON Schema, repairs it with lossless steps only,
// extracts an implied schema from a system prompt's format demands, builds the
// targeted prompt for a single re-ask, and finds the guarded spans (amounts,
// percentages, dates, identifiers, numbers) that no step may rewrite.
//
// Everything here is pure: no I/O, no goroutines, no clocks. Compiled
// schemas, Options and Results are values the caller owns; a *Schema and the
// package-level functions are safe for concurrent use; a StreamValidator
// belongs to one stream and is not. Metrics is a set of atomic counters safe
// for concurrent use.
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
