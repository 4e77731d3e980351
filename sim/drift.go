package sim

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// Drift makes a model's JSON answers differ slightly from what another
// version of it would answer: in a share of answers, one numeric field is
// moved by a bounded random amount. It models a model version update
// whose scores drift while its decisions stay (the same prompt, the same
// temperature, a confidence score 0.02 off), as measured across snapshots
// of the same API model (Chen, Zaharia and Zou, "How is ChatGPT's behavior
// changing over time?", arXiv 2307.09009, 2023; OpenAI's snapshot notes:
// "model behavior may change between snapshots"). Shadow comparison is
// tested on it. Off unless set (ModelSpec.Drift); deterministic under the
// fleet's Seed: the same request gets the same drift.
type Drift struct {
	// Field is the JSON member perturbed: the first member of that name in
	// the answer whose value is a number. Answers without it are unchanged.
	Field string `json:"field"`
	// Share of answers perturbed, in [0, 1].
	Share float64 `json:"share"`
	// MaxDelta bounds the perturbation: the value moves by d with
	// MaxDelta/10 ≤ |d| ≤ MaxDelta, either sign, rounded to 4 decimals.
	MaxDelta float64 `json:"max_delta"`
}

func (d *Drift) validate() error {
	if d.Field == "" {
		return fmt.Errorf("field is empty")
	}
	if !(d.Share >= 0 && d.Share <= 1) {
		return fmt.Errorf("share: %g is outside [0, 1]", d.Share)
	}
	if !(d.MaxDelta > 0) || math.IsInf(d.MaxDelta, 0) {
		return fmt.Errorf("max_delta: %g must be a finite number > 0", d.MaxDelta)
	}
	return nil
}

// numberMember matches a JSON member name followed by a number.
var numberMember = regexp.MustCompile(`("(?:[^"\\]|\\.)*")\s*:\s*(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)`)

// drift applies d to a JSON-mode answer text, drawing from r.
func (d *Drift) apply(text string, r *rng) string {
	if r.float() >= d.Share {
		return text
	}
	want := strconv.Quote(d.Field)
	for _, m := range numberMember.FindAllStringSubmatchIndex(text, -1) {
		if text[m[2]:m[3]] != want {
			continue
		}
		v, err := strconv.ParseFloat(text[m[4]:m[5]], 64)
		if err != nil {
			return text
		}
		mag := d.MaxDelta * (0.1 + 0.9*r.float())
		if r.next()&1 == 1 {
			mag = -mag
		}
		nv := math.Round((v+mag)*1e4) / 1e4
		return text[:m[4]] + strconv.FormatFloat(nv, 'f', -1, 64) + text[m[5]:]
	}
	return text
}
