package telemetry

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/engine"
)

func TestMulti(t *testing.T) {
	var got []string
	obs := func(name string) engine.Observer {
		return engine.ObserverFunc(func(r *engine.Record) { got = append(got, name+":"+r.RequestID) })
	}
	cases := []struct {
		name   string
		in     []engine.Observer
		isNil  bool
		called []string
	}{
		{"none", nil, true, nil},
		{"only nils", []engine.Observer{nil, nil}, true, nil},
		{"one", []engine.Observer{nil, obs("a")}, false, []string{"a:r"}},
		{"in order", []engine.Observer{obs("a"), nil, obs("b"), obs("c")}, false, []string{"a:r", "b:r", "c:r"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got = nil
			m := Multi(c.in...)
			if (m == nil) != c.isNil {
				t.Fatalf("Multi nil = %v, want %v", m == nil, c.isNil)
			}
			if m != nil {
				m.RequestDone(&engine.Record{RequestID: "r"})
			}
			if !reflect.DeepEqual(got, c.called) {
				t.Errorf("calls %v, want %v", got, c.called)
			}
		})
	}
}

// The telemetry packages are observers: they may import the engine, never
// the HTTP front, the CLI, the facade or the simulator.
func TestForbiddenImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "./...").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	forbidden := []string{"github.com/keelmesh/keel/internal/server", "github.com/keelmesh/keel/cmd/", "github.com/keelmesh/keel/sim"}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/keelmesh/keel" {
			t.Errorf("telemetry imports the keel facade")
		}
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("telemetry imports %s", dep)
			}
		}
	}
}
