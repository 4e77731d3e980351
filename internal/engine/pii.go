package engine

import (
	"github.com/keelmesh/keel/internal/pii"
)

// Personal data is the pipeline's first stage (internal/pii): found and
// redacted before anything else reads the request, restored in the answer.
// Its options and report are the pii package's; these names keep the
// engine's API.
type (
	// PIIDetector finds personal data in one text (pii.Finder).
	PIIDetector = pii.Finder
	// PIIDetectorFunc adapts a function to PIIDetector.
	PIIDetectorFunc = pii.FinderFunc
	// PIIOptions turn on personal-data detection (pii.Options).
	PIIOptions = pii.Options
	// PIIRoute is one route's PII policy (pii.Route).
	PIIRoute = pii.Route
	// PIIReport is what detection found in a call and what was done.
	PIIReport = pii.Report
	// PIIFinding is one value found: its kind, place and keyed hash.
	PIIFinding = pii.Finding
)

// The PII actions (pii.action, a route's pii.action, mesh_behavior.pii).
const (
	PIIRedact = pii.ActionRedact
	PIIMask   = pii.ActionMask
	PIIBlock  = pii.ActionBlock
	PIILog    = pii.ActionLog
	PIIOff    = pii.ActionOff
)
