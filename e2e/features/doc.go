// Package features holds the end-to-end tests of Keel's features: each
// builds a mesh with keel.New in front of the simulator and drives it the
// way a client does, through keel's HTTP handler on a real socket, the
// embedded transport or the official SDKs (the exact and semantic caches,
// personal data, structured output, fragmentation, tiering, shadow traffic,
// keys and spend, the Responses API, resilience, observability). Tests of
// the package keel's public API itself stay at the repository root. It has
// no non-test code.
package features
