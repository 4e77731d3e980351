package bench

import (
	"bytes"
	"testing"
)

// The demo prints, beside its table, each target's errors by kind.
func TestDemoErrorsByKind(t *testing.T) {
	d := &Demo{Scenarios: []*DemoScenario{{
		Name:   "region-outage",
		Direct: &TargetResult{Name: "direct", Errors: 40, ErrorsByKind: map[string]int64{"status_503": 30, "transport": 10}},
		Mesh:   &TargetResult{Name: "mesh", Errors: 0, ErrorsByKind: map[string]int64{}},
	}, {
		Name:   "overload",
		Direct: &TargetResult{Name: "direct", Errors: 2, ErrorsByKind: map[string]int64{"status_529": 2}},
		Mesh:   &TargetResult{Name: "mesh", Errors: 1, ErrorsByKind: map[string]int64{"MESH_FALLBACK_EXHAUSTED": 1}},
	}}}
	var b bytes.Buffer
	if err := WriteDemoErrors(&b, d); err != nil {
		t.Fatal(err)
	}
	want := "region-outage direct errors: status_503 30, transport 10\n" +
		"overload direct errors: status_529 2\n" +
		"overload mesh errors: MESH_FALLBACK_EXHAUSTED 1\n"
	if got := b.String(); got != want {
		t.Errorf("(-got +want)\n-%s+%s", got, want)
	}
}
