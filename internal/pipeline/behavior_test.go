package pipeline

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// piiActions stands for pii.ClientAction (the pipeline does not import
// the stage packages).
func piiActions(a string) bool {
	switch a {
	case "redact", "mask", "block", "log":
		return true
	}
	return false
}

var behaviorCases = []struct {
	name   string
	body   string
	header string
	want   Behavior
	// bad, when set, is a piece of the 400's message.
	bad string
}{
	{name: "none", want: Behavior{}},
	{name: "null body", body: "null", want: Behavior{}},
	{name: "header only", header: `{"hedge":false,"preferred_region":"eu"}`, want: Behavior{Hedge: ptr(false), PreferredRegion: "eu"}},
	{name: "body wins per key", body: `{"preferred_region":"us"}`, header: `{"preferred_region":"eu","debug":true}`, want: Behavior{PreferredRegion: "us", Debug: true}},
	{name: "tier name", body: `{"min_model_capability":"sonnet"}`, want: Behavior{MinModelCapability: 3}},
	{name: "pii action", body: `{"pii":"mask"}`, want: Behavior{PII: "mask"}},
	{name: "unknown key", body: `{"hedging":true}`, bad: "mesh_behavior: json: unknown field"},
	{name: "unknown key in header", header: `{"x":1}`, bad: "X-Mesh-Behavior: json: unknown field"},
	{name: "wrong type", body: `{"debug":"yes"}`, bad: "known keys:"},
	{name: "trailing data", body: `{} {}`, bad: "mesh_behavior: trailing data after the object"},
	{name: "negative redundancy", body: `{"min_redundancy":-1}`, bad: "min_redundancy: must be ≥ 0"},
	{name: "unknown pii action", body: `{"pii":"off"}`, bad: `mesh_behavior.pii: unknown action "off"`},
	{name: "capability out of range", body: `{"min_model_capability":6}`, bad: "must be a tier between 1 and 5"},
	{name: "unknown tier", body: `{"min_model_capability":"huge"}`, bad: "unknown tier"},
}

func ptr[T any](v T) *T { return &v }

// TestParseBehavior: the body and the header merge (the body wins per
// key); every refusal is a 400 naming mesh_behavior and what is wrong.
func TestParseBehavior(t *testing.T) {
	for _, tc := range behaviorCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBehavior(json.RawMessage(tc.body), tc.header, piiActions)
			if tc.bad != "" {
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Param != "mesh_behavior" || !strings.Contains(ae.Message, tc.bad) {
					t.Fatalf("err = %v, want a 400 on mesh_behavior containing %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("(-got +want)\n-%+v\n+%+v", *got, tc.want)
			}
		})
	}
}

// FuzzParseBehavior: any body and header give a Behavior or a 400, never
// a panic; an accepted Behavior keeps the limits ParseBehavior checks.
func FuzzParseBehavior(f *testing.F) {
	for _, tc := range behaviorCases {
		f.Add(tc.body, tc.header)
	}
	f.Fuzz(func(t *testing.T, body, header string) {
		b, err := ParseBehavior(json.RawMessage(body), header, piiActions)
		if err != nil {
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
				t.Fatalf("err = %v, want a 400", err)
			}
			return
		}
		if b.MinRedundancy < 0 || b.MinModelCapability < 0 || b.MinModelCapability > 5 || b.PII != "" && !piiActions(b.PII) {
			t.Fatalf("accepted %+v", b)
		}
	})
}
