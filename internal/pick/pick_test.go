package pick

import (
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/route"
	"github.com/keelmesh/keel/internal/wire/anthropic"
)

// eps builds live endpoints (model, wire format) with fresh trackers.
func eps(t *testing.T, specs ...[2]string) []*fleet.Endpoint {
	t.Helper()
	out := make([]*fleet.Endpoint, 0, len(specs))
	for _, s := range specs {
		ep, err := fleet.New(&provider.Endpoint{ID: s[0] + "/" + string(rune('a'+len(out))), Model: s[0], Format: llm.ParseFormat(s[1])}, fleet.Config{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ep)
	}
	return out
}

func plain() *llm.Request {
	return &llm.Request{Format: llm.FormatAnthropic, Model: "m",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}}}
}

// reasons is each candidate's Unavailable ("" when available).
func reasons(s *State) []string {
	out := make([]string, len(s.Cands))
	for i, c := range s.Cands {
		if c.Available != (c.Unavailable == "") {
			panic("available with a reason")
		}
		out[i] = c.Unavailable
	}
	return out
}

func eq(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func TestBuildSaysWhyEachCandidateIsOut(t *testing.T) {
	an := "anthropic"
	now := time.Now()
	cases := []struct {
		name       string
		legacy     bool
		allowTried bool
		set        func(s *State, e []*fleet.Endpoint)
		want       []string
	}{
		{name: "all available", set: func(*State, []*fleet.Endpoint) {}, want: []string{"", "", ""}},
		{name: "safety valve keeps the primary model", legacy: true, set: func(*State, []*fleet.Endpoint) {}, want: []string{"", "", "safety_valve"}},
		{name: "tried", set: func(s *State, _ []*fleet.Endpoint) { s.Tried[1] = true }, want: []string{"", "tried", ""}},
		{name: "tried may compete again", allowTried: true, set: func(s *State, _ []*fleet.Endpoint) { s.Tried[1] = true }, want: []string{"", "", ""}},
		{name: "failed stream avoided while another exists", set: func(s *State, _ []*fleet.Endpoint) { s.Avoid[0] = true }, want: []string{"failed_stream", "", ""}},
		{name: "every endpoint avoided: none left out for it", set: func(s *State, _ []*fleet.Endpoint) { s.Avoid[0], s.Avoid[1], s.Avoid[2] = true, true, true },
			want: []string{"", "", ""}},
		{name: "cooling", set: func(_ *State, e []*fleet.Endpoint) { e[2].Health.Cooldown(now.Add(time.Minute)); e[2].Publish() }, want: []string{"", "", "cooling"}},
		{name: "unreachable", set: func(_ *State, e []*fleet.Endpoint) { e[0].MarkDown() }, want: []string{"unreachable", "", ""}},
		{name: "overloaded model routed around", set: func(s *State, _ []*fleet.Endpoint) { s.Overloaded = map[string]int{"m": 2} },
			want: []string{"model_overloaded", "model_overloaded", ""}},
		{name: "overloaded once is not overloaded", set: func(s *State, _ []*fleet.Endpoint) { s.Overloaded = map[string]int{"m": 1} }, want: []string{"", "", ""}},
		{name: "overloaded with no other model kept", set: func(s *State, e []*fleet.Endpoint) {
			s.Overloaded = map[string]int{"m": 2}
			e[2].MarkDown()
		}, want: []string{"", "", "unreachable"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := eps(t, [2]string{"m", an}, [2]string{"m", an}, [2]string{"n", an})
			for _, ep := range e {
				ep.Publish()
			}
			var s State
			s.Init(e, plain())
			tc.set(&s, e)
			s.Build(tc.legacy, tc.allowTried, now)
			eq(t, reasons(&s), tc.want)
		})
	}
}

// Panic routing: candidates left out only for ejection compete again;
// BreakerLeftOut tells an open breaker among the last decisions.
func TestRelaxEjectedAndBreakerLeftOut(t *testing.T) {
	now := time.Now()
	e := eps(t, [2]string{"m", "anthropic"}, [2]string{"m", "anthropic"})
	e[0].Health.Eject(now.Add(time.Minute))
	e[0].Publish()
	e[1].MarkDown()
	var s State
	s.Init(e, plain())
	s.Build(false, false, now)
	eq(t, reasons(&s), []string{"ejected", "unreachable"})
	if !s.RelaxEjected() {
		t.Fatal("RelaxEjected: false with an ejected candidate")
	}
	eq(t, reasons(&s), []string{"", "unreachable"})
	if s.RelaxEjected() {
		t.Fatal("RelaxEjected: true with none left to relax")
	}
	s.Decisions = []route.Decision{{Reason: route.ReasonChosen}, {Reason: route.ReasonUnavailable}}
	if s.BreakerLeftOut() {
		t.Fatal("BreakerLeftOut: true with no breaker open")
	}
}

// A document goes to the endpoint that can carry it while one is
// available; the lossy one competes only when none is.
func TestPreferLossless(t *testing.T) {
	req, err := anthropic.ParseRequest([]byte(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":[` +
		`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQK"}},` +
		`{"type":"text","text":"Summarise it."}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	e := eps(t, [2]string{"m", "openai"}, [2]string{"m", "anthropic"})
	var s State
	s.Init(e, req)
	s.Build(false, false, now)
	s.PreferLossless()
	eq(t, reasons(&s), []string{"lossy_translation", ""})
	e[1].MarkDown()
	s.Build(false, false, now)
	s.PreferLossless()
	eq(t, reasons(&s), []string{"", "unreachable"})
	if s.lossyFor(llm.FormatAnthropic) || !s.lossyFor(llm.FormatOpenAI) {
		t.Fatal("lossyFor: the request's own format is lossless, OpenAI's loses the document")
	}
}

func TestAvailabilityAndSoonest(t *testing.T) {
	now := time.Now()
	e := eps(t, [2]string{"m", "anthropic"}, [2]string{"n", "anthropic"})
	var s State
	s.Init(e, plain())
	if !s.HasUntried(false, now) || !s.AnyAvailable(false, now) || !s.Soonest(false, now).IsZero() {
		t.Fatal("fresh: untried and available, nothing cooling")
	}
	s.Tried[0] = true
	if !s.HasUntried(false, now) || s.HasUntried(true, now) {
		t.Fatal("HasUntried: n is untried, but the safety valve allows only m")
	}
	soon, later := now.Add(time.Second), now.Add(time.Minute)
	e[0].Health.Cooldown(soon)
	e[0].Publish()
	e[1].Health.Cooldown(later)
	e[1].Publish()
	if s.AnyAvailable(false, now) {
		t.Fatal("AnyAvailable: both are cooling")
	}
	if got := s.Soonest(false, now); !got.Equal(soon) {
		t.Fatalf("Soonest = %v, want %v", got, soon)
	}
	s.Avoid[0] = true
	if got := s.Soonest(false, now); !got.Equal(later) {
		t.Fatalf("Soonest past an avoided endpoint = %v, want %v", got, later)
	}
	if got := s.Soonest(true, now); !got.IsZero() {
		t.Fatalf("Soonest on the valve's path with m avoided = %v, want zero", got)
	}
	s.Move(e[1:])
	if s.Tried[0] || s.Avoid[0] || s.Pin != -1 || len(s.Tried) != 1 {
		t.Fatal("Move: the new route's endpoints are untried")
	}
}

func TestReasonText(t *testing.T) {
	if got := ReasonText(route.Decision{Reason: route.ReasonUnavailable, Detail: "cooling"}); got != string(route.ReasonUnavailable)+": cooling" {
		t.Fatalf("ReasonText = %q", got)
	}
	if got := ReasonText(route.Decision{Reason: route.ReasonChosen}); got != string(route.ReasonChosen) {
		t.Fatalf("ReasonText = %q", got)
	}
}
