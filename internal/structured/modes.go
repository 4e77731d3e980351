package structured

import (
	"encoding/json"
	"fmt"
)

// Config is the structured_output section of Keel's configuration file,
// decoded straight from YAML (docs/config.md): what Keel does when an
// answer must be JSON (OpenAI response_format, an Anthropic forced tool
// call, mesh_behavior.output_schema, or a schema implied by the system
// prompt). The zero value is the documented default. A Config is plain
// data, safe to copy.
type Config struct {
	// StreamMode is "strict" (default: buffer a streamed answer, validate
	// and repair it, then stream the result) or "relaxed" (stream through,
	// validate at the end, report in the X-Mesh-Schema-Valid trailer).
	StreamMode StreamMode `yaml:"stream_mode"`
	// OnViolation is "error" (default: MESH_SCHEMA_VIOLATION) or "pass"
	// (deliver the raw answer with X-Mesh-Schema-Violation: true).
	OnViolation ViolationMode `yaml:"on_violation"`
	// Reask sends one targeted repair request when repair fails; default true.
	Reask *bool `yaml:"reask"`
	// ImpliedSchemas derives a schema from hard format demands in the
	// system prompt; default true. false is implied: off.
	ImpliedSchemas *bool `yaml:"implied_schemas"`
	// Implied is what a schema implied by the system prompt may do: "off"
	// (none is read), "guess" (default: the reading is only reported —
	// never sent upstream, never re-asked for; an answer lacking one of
	// its keys is delivered as the model gave it, with
	// X-Mesh-Schema-Violation), "send" (a sure reading is sent upstream,
	// validated, repaired and re-asked against; an answer that stays
	// invalid is delivered with X-Mesh-Schema-Violation) or "strict" (as
	// send, and such an answer is MESH_SCHEMA_VIOLATION, as for a schema
	// the client gave).
	Implied ImpliedMode `yaml:"implied"`
	// Derive declares the only way a missing required field may be filled.
	Derive []DeriveRule `yaml:"derive"`
	// Limits on client schemas (mesh_behavior.output_schema,
	// response_format json_schema, a forced tool's input schema), checked
	// by a linear pre-scan before anything is compiled; their keys sit in
	// this section; 0 means the default (DefaultLimits).
	Limits `yaml:",inline"`
}

// DeriveRule is one structured_output.derive entry: it fills Field from
// From through Table, inside the object at At (a JSON pointer; "" is the
// root, "*" matches any member or index). A Table value is JSON (a
// number, true, "quoted") or else the string itself.
type DeriveRule struct {
	At    string            `yaml:"at"`
	Field string            `yaml:"field"`
	From  string            `yaml:"from"`
	Table map[string]string `yaml:"table"`
}

// ImpliedOff reports whether schemas implied by the system prompt are not
// read: implied: off, or implied_schemas: false.
func (c Config) ImpliedOff() bool {
	return c.ImpliedSchemas != nil && !*c.ImpliedSchemas || c.Implied == ImpliedNone
}

// Derivations are the derive rules as repair applies them, each table
// value decoded from JSON when it is JSON.
func (c Config) Derivations() []Derivation {
	var out []Derivation
	for _, d := range c.Derive {
		t := map[string]any{}
		for k, v := range d.Table {
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				x = v // not JSON: the string itself
			}
			t[k] = x
		}
		out = append(out, Derivation{At: d.At, Field: d.Field, From: d.From, Table: t})
	}
	return out
}

// StreamMode is structured_output.stream_mode. The zero value is strict.
type StreamMode string

// Stream modes.
const (
	StreamStrict  StreamMode = "strict"
	StreamRelaxed StreamMode = "relaxed"
)

// UnmarshalText accepts strict or relaxed ("" is strict).
func (m *StreamMode) UnmarshalText(b []byte) error {
	return parseEnum(m, b, StreamStrict, StreamRelaxed)
}

// ViolationMode is structured_output.on_violation. The zero value is error.
type ViolationMode string

// Violation modes.
const (
	ViolationError ViolationMode = "error"
	ViolationPass  ViolationMode = "pass"
)

// UnmarshalText accepts error or pass ("" is error).
func (m *ViolationMode) UnmarshalText(b []byte) error {
	return parseEnum(m, b, ViolationError, ViolationPass)
}

// ImpliedMode is structured_output.implied. The zero value is guess.
type ImpliedMode string

// Implied-schema modes.
const (
	ImpliedNone   ImpliedMode = "off"
	ImpliedGuess  ImpliedMode = "guess"
	ImpliedStrict ImpliedMode = "strict"
	ImpliedSend   ImpliedMode = "send"
)

// UnmarshalText accepts off, guess, send or strict ("" is guess).
func (m *ImpliedMode) UnmarshalText(b []byte) error {
	return parseEnum(m, b, ImpliedNone, ImpliedGuess, ImpliedSend, ImpliedStrict)
}

// parseEnum sets *dst to the one of allowed that b names; "" leaves the
// zero value (the default). The error lists the allowed values.
func parseEnum[T ~string](dst *T, b []byte, allowed ...T) error {
	s := T(b)
	if s == "" {
		*dst = ""
		return nil
	}
	for _, a := range allowed {
		if s == a {
			*dst = s
			return nil
		}
	}
	return fmt.Errorf("expected %s, got %q", orList(allowed), string(b))
}

// orList writes "a", "a or b", "a, b or c".
func orList[T ~string](xs []T) string {
	out := ""
	for i, x := range xs {
		switch {
		case i == 0:
		case i == len(xs)-1:
			out += " or "
		default:
			out += ", "
		}
		out += string(x)
	}
	return out
}

// Settings are the section's settings as the structured-output stage applies
// them: the one place the section's defaults (strict streams, error on a
// violation, one re-ask, implied schemas read as guesses) become behaviour.
func (c Config) Settings() Settings {
	return Settings{
		RelaxedStreams: c.StreamMode == StreamRelaxed,
		PassViolations: c.OnViolation == ViolationPass,
		DisableReask:   c.Reask != nil && !*c.Reask,
		DisableImplied: c.ImpliedOff(),
		StrictImplied:  c.Implied == ImpliedStrict,
		SendImplied:    c.Implied == ImpliedSend || c.Implied == ImpliedStrict,
		Derive:         c.Derivations(),
		Limits:         c.Limits,
	}
}
