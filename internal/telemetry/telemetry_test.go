package telemetry

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/observe"
)

func TestMulti(t *testing.T) {
	var got []string
	obs := func(name string) callrec.Observer {
		return callrec.ObserverFunc(func(r *callrec.Record) { got = append(got, name+":"+r.RequestID) })
	}
	cases := []struct {
		name   string
		in     []callrec.Observer
		isNil  bool
		called []string
	}{
		{"none", nil, true, nil},
		{"only nils", []callrec.Observer{nil, nil}, true, nil},
		{"one", []callrec.Observer{nil, obs("a")}, false, []string{"a:r"}},
		{"in order", []callrec.Observer{obs("a"), nil, obs("b"), obs("c")}, false, []string{"a:r", "b:r", "c:r"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got = nil
			m := Multi(c.in...)
			if (m == nil) != c.isNil {
				t.Fatalf("Multi nil = %v, want %v", m == nil, c.isNil)
			}
			if m != nil {
				m.RequestDone(&callrec.Record{Call: callrec.Call{RequestID: "r"}})
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

func (e events) RequestDone(*callrec.Record)         { *e.log = append(*e.log, e.name+":done") }
func (e events) OnAttempt(observe.AttemptEvent)      { *e.log = append(*e.log, e.name+":attempt") }
func (e events) OnHedge(observe.HedgeEvent)          { *e.log = append(*e.log, e.name+":hedge") }
func (e events) OnBreakerState(observe.BreakerEvent) { *e.log = append(*e.log, e.name+":breaker") }
func (e events) OnValve(observe.ValveEvent)          { *e.log = append(*e.log, e.name+":valve") }
func (v valveOnly) OnValve(observe.ValveEvent)       { *v.log = append(*v.log, v.name+":valve") }
func (v valveOnly) RequestDone(*callrec.Record)      { *v.log = append(*v.log, v.name+":done") }

type valveOnly events

// TestMultiForwardsEvents: Multi hands each optional event to the
// observers that implement its interface, in order, and skips the others.
func TestMultiForwardsEvents(t *testing.T) {
	var got []string
	plain := callrec.ObserverFunc(func(*callrec.Record) { got = append(got, "plain:done") })
	m := Multi(events{"a", &got}, plain, nil, valveOnly{"v", &got}, events{"b", &got})
	type all interface {
		observe.AttemptObserver
		observe.HedgeObserver
		observe.BreakerObserver
		observe.ValveObserver
	}
	mo, ok := m.(all)
	if !ok {
		t.Fatalf("Multi's observer %T lacks an optional interface", m)
	}
	m.RequestDone(&callrec.Record{})
	mo.OnAttempt(observe.AttemptEvent{})
	mo.OnHedge(observe.HedgeEvent{})
	mo.OnBreakerState(observe.BreakerEvent{})
	mo.OnValve(observe.ValveEvent{})
	want := []string{"a:done", "plain:done", "v:done", "b:done", "a:attempt", "b:attempt", "a:hedge", "b:hedge",
		"a:breaker", "b:breaker", "a:valve", "v:valve", "b:valve"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("calls (-got +want):\n-%v\n+%v", got, want)
	}
	// One observer is returned as is, keeping exactly its own interfaces.
	if _, ok := Multi(plain).(observe.ValveObserver); ok {
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
