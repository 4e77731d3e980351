// Package scenarios embeds the scenario files shipped with Keel (a load
// shape plus a timeline of simulator faults, read by package bench), so
// `keel bench --scenario NAME` works from any directory. The format is
// documented in the README's "Scenarios" section.
package scenarios

import "embed"

// FS holds every *.yaml file of this directory.
//
//go:embed *.yaml
var FS embed.FS
