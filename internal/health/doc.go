// Package health keeps live per-endpoint statistics for Keel's router:
// sliding-window latency and time-to-first-token histograms, an EWMA of
// latency, the error rate, requests in flight and an estimate of queue wait,
// the provider's own rate-limit headroom, retry-after cooldowns, and
// Envoy-style outlier ejection.
//
// A Tracker per endpoint is fed by the done callback that Tracker.Begin
// returns, and read through Snapshot (plain values, for traces and metrics)
// or the cheap per-request ExpectedLatency and Unavailable. Everything here
// is safe for concurrent use, never blocks beyond a short lock taken once
// per sub-window or on an ejection, does no I/O and starts no goroutines.
// Time is read through an injectable Now func (nil means time.Now).
//
// The package imports only the standard library; it never imports
// internal/route (the engine joins the two).
package health
