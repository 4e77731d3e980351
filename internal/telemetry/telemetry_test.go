package telemetry

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/callrec"
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
				m.RequestDone(&engine.Record{Call: callrec.Call{RequestID: "r"}})
			}
			if !reflect.DeepEqual(got, c.called) {
				t.Errorf("calls %v, want %v", got, c.called)
			}
		})
	}
}

// events implements Observer and the optional interfaces named in has,
// logging each call as name:event.
type events struct {
	name string
	log  *[]string
}

func (e events) RequestDone(*engine.Record)         { *e.log = append(*e.log, e.name+":done") }
func (e events) OnAttempt(engine.AttemptEvent)      { *e.log = append(*e.log, e.name+":attempt") }
func (e events) OnHedge(engine.HedgeEvent)          { *e.log = append(*e.log, e.name+":hedge") }
func (e events) OnBreakerState(engine.BreakerEvent) { *e.log = append(*e.log, e.name+":breaker") }
func (e events) OnValve(engine.ValveEvent)          { *e.log = append(*e.log, e.name+":valve") }
func (v valveOnly) OnValve(engine.ValveEvent)       { *v.log = append(*v.log, v.name+":valve") }
func (v valveOnly) RequestDone(*engine.Record)      { *v.log = append(*v.log, v.name+":done") }

type valveOnly events

// TestMultiForwardsEvents: Multi hands each optional event to the
// observers that implement its interface, in order, and skips the others.
func TestMultiForwardsEvents(t *testing.T) {
	var got []string
	plain := engine.ObserverFunc(func(*engine.Record) { got = append(got, "plain:done") })
	m := Multi(events{"a", &got}, plain, nil, valveOnly{"v", &got}, events{"b", &got})
	type all interface {
		engine.AttemptObserver
		engine.HedgeObserver
		engine.BreakerObserver
		engine.ValveObserver
	}
	mo, ok := m.(all)
	if !ok {
		t.Fatalf("Multi's observer %T lacks an optional interface", m)
	}
	m.RequestDone(&engine.Record{})
	mo.OnAttempt(engine.AttemptEvent{})
	mo.OnHedge(engine.HedgeEvent{})
	mo.OnBreakerState(engine.BreakerEvent{})
	mo.OnValve(engine.ValveEvent{})
	want := []string{"a:done", "plain:done", "v:done", "b:done", "a:attempt", "b:attempt", "a:hedge", "b:hedge",
		"a:breaker", "b:breaker", "a:valve", "v:valve", "b:valve"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("calls (-got +want):\n-%v\n+%v", got, want)
	}
	// One observer is returned as is, keeping exactly its own interfaces.
	if _, ok := Multi(plain).(engine.ValveObserver); ok {
		t.Error("Multi of one RequestDone-only observer is a ValveObserver")
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
