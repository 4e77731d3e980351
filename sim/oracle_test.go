package sim

// The format-aware oracle and the JSON config reader: only this package's
// tests use them (docs/DEADCODE.md), so they live with the tests.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelmesh/keel/internal/llm"
)

// AnswerFormat is AnswerSample for a request sent over wire format f: a
// trailing assistant message is continued as the model's endpoints of that
// format continue one (over the OpenAI format, per its Continuation; an
// unknown model has the default, none), or else is history and the answer
// a new one; the JSON output format is f's field of req, as the model's
// StructuredOutputs treats it. The error, an *llm.APIError, is the 400 the
// endpoint answers instead (continue_final_message misused; a structured
// output format the endpoint rejects, see ModelSpec.StructuredOutputs).
// Pure and safe for concurrent use.
func AnswerFormat(cfg Config, f Format, req *llm.Request, sample uint64) (*llm.Response, error) {
	spec := cfg.model(req.Model)
	cont, ae := continues(spec, f, req)
	if ae != nil {
		return nil, ae
	}
	rf, ae := outputFormat(spec, f, req)
	if ae != nil {
		return nil, ae
	}
	a, _ := generate(context.Background(), cfg.Seed, req, samplingFor(spec, req, sample), cont, rf) // never cancelled
	return a.response(), nil
}

// ParseConfigJSON reads a Config from JSON, rejecting unknown keys.
func ParseConfigJSON(data []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("parsing sim config: %w", err)
	}
	return c, nil
}
