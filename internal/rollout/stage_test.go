package rollout

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/resilience"
)

// The stage decides the call's stage and path before next runs, and
// passes the answer through.
func TestStage(t *testing.T) {
	plan, err := NewPlan(Rollout{Stage: StageHedging, Percent: 50})
	if err != nil {
		t.Fatal(err)
	}
	// Keys this plan puts at each stage (FNV-1a, mod 100, under 50).
	var in, out string
	for i := 0; in == "" || out == ""; i++ {
		k := string(rune('a'+i%26)) + string(rune('a'+i/26))
		if plan.Stage(k) == StageHedging {
			in = k
		} else {
			out = k
		}
	}
	tripped := NewValve(resilience.ValveConfig{MinRequests: 1, Hold: time.Minute})
	if tr, _, _ := tripped.Observe(t0, true); tr != Opened {
		t.Fatal("valve did not trip")
	}
	for _, tc := range []struct {
		name    string
		header  string
		user    string
		id      string
		monitor bool
		valve   *Valve
		want    Part
	}{
		{"key in the share, by header", in, "", "r", false, NewValve(resilience.ValveConfig{}), Part{StageHedging, Path{}}},
		{"key out of the share, by header", out, in, "r", false, NewValve(resilience.ValveConfig{}), Part{StageMonitor, Path{Legacy: true}}},
		{"by the end user", "", in, "r", false, NewValve(resilience.ValveConfig{}), Part{StageHedging, Path{}}},
		{"by the request id", "", "", out, false, NewValve(resilience.ValveConfig{}), Part{StageMonitor, Path{Legacy: true}}},
		{"held to monitor", in, "", "r", true, NewValve(resilience.ValveConfig{}), Part{StageMonitor, Path{Legacy: true}}},
		{"valve open", in, "", "r", false, tripped, Part{StageHedging, Path{Legacy: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *Part
			resp := &llm.Response{ID: "x"}
			next := pipeline.HandlerFunc(func(context.Context, *pipeline.Call) (*pipeline.Answer, error) {
				if got == nil {
					t.Error("next ran before the part was recorded")
				}
				return &pipeline.Answer{Response: resp}, nil
			})
			h := pipeline.Chain(next, NewStage(plan, tc.valve, Hooks{
				Record:  func(_ *pipeline.Call, p Part) { got = &p },
				Start:   func(*pipeline.Call) time.Time { return t0 },
				Monitor: func(*pipeline.Call) bool { return tc.monitor },
			}))
			c := &pipeline.Call{ID: tc.id, Request: &llm.Request{UserID: tc.user}}
			if tc.header != "" {
				c.Header = http.Header{"X-Mesh-Rollout-Key": {tc.header}}
			}
			ans, err := h.Serve(context.Background(), c)
			if err != nil || ans.Response != resp {
				t.Fatalf("answer %v err %v", ans, err)
			}
			if *got != tc.want {
				t.Errorf("part %+v, want %+v", *got, tc.want)
			}
		})
	}
}
