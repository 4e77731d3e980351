package rollout

import (
	"fmt"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       Rollout
		wantErr string
	}{
		{"zero", Rollout{}, ""},
		{"monitor", Rollout{Stage: StageMonitor, Percent: 100}, ""},
		{"hedging half", Rollout{Stage: StageHedging, Percent: 50}, ""},
		{"full none", Rollout{Stage: StageFull}, ""},
		{"unknown stage", Rollout{Stage: "everything", Percent: 10}, `rollout stage "everything": want monitor, hedging or full`},
		{"negative", Rollout{Stage: StageFull, Percent: -1}, "rollout percent -1: want 0-100"},
		{"over 100", Rollout{Stage: StageFull, Percent: 101}, "rollout percent 101: want 0-100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.Validate()
			if got := fmt.Sprint(err); tc.wantErr == "" && err != nil || tc.wantErr != "" && got != tc.wantErr {
				t.Errorf("(-got +want)\n-%v\n+%s", err, tc.wantErr)
			}
		})
	}
}

func TestPlanDefaults(t *testing.T) {
	p, err := NewPlan(Rollout{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Get(), (Rollout{Stage: StageFull, Percent: 100}); got != want {
		t.Errorf("zero rollout: %+v, want %+v", got, want)
	}
	if err := p.Set(Rollout{Percent: 40}); err != nil {
		t.Fatal(err)
	}
	if got, want := p.Get(), (Rollout{Stage: StageFull, Percent: 40}); got != want {
		t.Errorf("no stage: %+v, want %+v", got, want)
	}
	if err := p.Set(Rollout{Stage: "bogus"}); err == nil {
		t.Error("Set accepted an unknown stage")
	}
	if got := p.Get().Percent; got != 40 {
		t.Errorf("a refused Set changed the plan: percent %d, want 40", got)
	}
	if _, err := NewPlan(Rollout{Stage: StageFull, Percent: 200}); err == nil {
		t.Error("NewPlan accepted 200 %")
	}
}

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		header, user, request string
		want                  string
	}{
		{"header first", "k", "u", "r", "k"},
		{"then the user", "", "u", "r", "u"},
		{"then the request", "", "", "r", "r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Key(tc.header, tc.user, tc.request); got != tc.want {
				t.Errorf("Key = %q, want %q", got, tc.want)
			}
		})
	}
}

// A key always gets the same stage, and Percent of the keys get the
// rollout's stage.
func TestStageStickyAndShared(t *testing.T) {
	p, err := NewPlan(Rollout{Stage: StageHedging, Percent: 30})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10000
	hedging := 0
	for i := range n {
		key := fmt.Sprintf("user-%d", i)
		s := p.Stage(key)
		if s != p.Stage(key) {
			t.Fatalf("key %s changed stage", key)
		}
		switch s {
		case StageHedging:
			hedging++
		case StageMonitor:
		default:
			t.Fatalf("key %s: stage %q", key, s)
		}
	}
	if hedging < n*27/100 || hedging > n*33/100 {
		t.Errorf("%d of %d keys at the hedging stage, want about 30 %%", hedging, n)
	}
	for _, tc := range []struct {
		r    Rollout
		want string
	}{
		{Rollout{Stage: StageFull, Percent: 0}, StageMonitor},
		{Rollout{Stage: StageHedging, Percent: 100}, StageHedging},
	} {
		if err := p.Set(tc.r); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if got := p.Stage(fmt.Sprint(i)); got != tc.want {
				t.Fatalf("%+v: key %d at %q, want %q", tc.r, i, got, tc.want)
			}
		}
	}
}

func TestPathFor(t *testing.T) {
	for _, tc := range []struct {
		stage string
		open  bool
		want  Path
	}{
		{StageFull, false, Path{Answers: true}},
		{StageFull, true, Path{Legacy: true, Answers: true}},
		{StageHedging, false, Path{}},
		{StageHedging, true, Path{Legacy: true}},
		{StageMonitor, false, Path{Legacy: true}},
	} {
		t.Run(fmt.Sprintf("%s open=%v", tc.stage, tc.open), func(t *testing.T) {
			if got := PathFor(tc.stage, tc.open); got != tc.want {
				t.Errorf("PathFor = %+v, want %+v", got, tc.want)
			}
		})
	}
}
