// Package resilience holds Keel's generic resilience building blocks: a
// jittered exponential Backoff, a token-bucket retry and hedge Budget, a
// per-endpoint circuit Breaker, the HedgePolicy that turns a latency
// percentile into a hedge delay, and the safety valve's ValveConfig (plain
// data with Validate and WithDefaults; the engine does the counting).
//
// The package knows nothing of HTTP or LLMs and imports only the standard
// library. Every type follows one pattern: a config struct whose zero value is
// the documented default, a constructor New<Type>(cfg) that rejects a bad
// config with an error wrapping ErrInvalidConfig, and a built value that is
// immutable in its configuration and safe for concurrent use by any number of
// goroutines. Nothing here blocks, sleeps or starts a goroutine: callers do
// the waiting (selecting on ctx.Done()) and feed outcomes back. Time is read
// through an injectable Now func (nil means time.Now) so that tests can drive
// a fake clock or run inside a testing/synctest bubble.
package resilience

import "errors"

// ErrInvalidConfig is wrapped by every constructor's error when a config
// field is out of range.
var ErrInvalidConfig = errors.New("invalid config")
