package normalize

import (
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

func f64(v float64) *float64 { return &v }
func intp(v int) *int        { return &v }

func TestTemperatureParamsTable(t *testing.T) {
	anth := Target{Format: llm.FormatAnthropic, Model: "claude-sonnet-4-20250514", APIVersion: "2023-06-01"}
	anthNew := Target{Format: llm.FormatAnthropic, Model: "claude-sonnet-4-5-20250929", APIVersion: "2023-06-01"}
	anthV2 := Target{Format: llm.FormatAnthropic, Model: "claude-sonnet-4-20250514", APIVersion: AnthropicVersionNoSampling}
	oai := Target{Format: llm.FormatOpenAI, Model: "gpt-4.1"}
	reason := Target{Format: llm.FormatOpenAI, Model: "o3-mini"}
	reasonResponses := Target{Format: llm.FormatResponses, Model: "o3-mini"}
	type params struct {
		temp, topP *float64
		topK       *int
	}
	cases := []struct {
		name    string
		target  Target
		policy  Policy
		in      params
		want    params
		actions []Action
		reject  string // the parameter a reject names
	}{
		{"anthropic accepts all three", anth, PolicyDrop, params{f64(0.7), f64(0.9), intp(40)}, params{f64(0.7), f64(0.9), intp(40)}, nil, ""},
		{"2026-10-21 drops all three", anthV2, PolicyDrop, params{f64(0.7), f64(0.9), intp(40)}, params{}, []Action{
			{Param: "temperature", Kind: Dropped, From: 0.7, Reason: "anthropic-2026-10-21"},
			{Param: "top_p", Kind: Dropped, From: 0.9, Reason: "anthropic-2026-10-21"},
			{Param: "top_k", Kind: Dropped, From: 40, Reason: "anthropic-2026-10-21"}}, ""},
		{"2026-10-21 drops even under map", anthV2, PolicyMap, params{temp: f64(1)}, params{}, []Action{
			{Param: "temperature", Kind: Dropped, From: 1, Reason: "anthropic-2026-10-21"}}, ""},
		{"2026-10-21 rejects", anthV2, PolicyReject, params{topK: intp(5)}, params{}, nil, "top_k"},
		{"2026-10-21 without parameters", anthV2, PolicyReject, params{}, params{}, nil, ""},
		{"newer claude drops top_p beside temperature", anthNew, PolicyMap, params{temp: f64(0.5), topP: f64(0.9)}, params{temp: f64(0.5)}, []Action{
			{Param: "top_p", Kind: Dropped, From: 0.9, Reason: "anthropic-exclusive"}}, ""},
		{"newer claude keeps top_p alone", anthNew, PolicyDrop, params{topP: f64(0.9)}, params{topP: f64(0.9)}, nil, ""},
		{"newer claude rejects the pair", anthNew, PolicyReject, params{temp: f64(0.5), topP: f64(0.9)}, params{}, nil, "top_p"},
		{"anthropic maps temperature above 1", anth, PolicyMap, params{temp: f64(1.6)}, params{temp: f64(1)}, []Action{
			{Param: "temperature", Kind: Mapped, From: 1.6, To: 1, Reason: "anthropic-range"}}, ""},
		{"anthropic drops temperature above 1", anth, PolicyDrop, params{temp: f64(1.6)}, params{}, []Action{
			{Param: "temperature", Kind: Dropped, From: 1.6, Reason: "anthropic-range"}}, ""},
		{"anthropic rejects temperature above 1", anth, PolicyReject, params{temp: f64(1.6)}, params{}, nil, "temperature"},
		{"openai keeps temperature 1.6", oai, PolicyReject, params{temp: f64(1.6), topP: f64(0.5)}, params{temp: f64(1.6), topP: f64(0.5)}, nil, ""},
		{"openai has no top_k", oai, PolicyMap, params{temp: f64(0.2), topK: intp(3)}, params{temp: f64(0.2)}, []Action{
			{Param: "top_k", Kind: Dropped, From: 3, Reason: "openai-no-top-k"}}, ""},
		{"openai rejects top_k", oai, PolicyReject, params{topK: intp(3)}, params{}, nil, "top_k"},
		{"reasoning model maps temperature to 1", reason, PolicyMap, params{temp: f64(0.2), topP: f64(0.9)}, params{temp: f64(1)}, []Action{
			{Param: "temperature", Kind: Mapped, From: 0.2, To: 1, Reason: "openai-reasoning"},
			{Param: "top_p", Kind: Dropped, From: 0.9, Reason: "openai-reasoning"}}, ""},
		{"reasoning model through the Responses API too", reasonResponses, PolicyMap, params{temp: f64(0.2), topK: intp(3)}, params{temp: f64(1)}, []Action{
			{Param: "temperature", Kind: Mapped, From: 0.2, To: 1, Reason: "openai-reasoning"},
			{Param: "top_k", Kind: Dropped, From: 3, Reason: "openai-no-top-k"}}, ""},
		{"reasoning model drops temperature", reason, PolicyDrop, params{temp: f64(0.2)}, params{}, []Action{
			{Param: "temperature", Kind: Dropped, From: 0.2, Reason: "openai-reasoning"}}, ""},
		{"reasoning model takes temperature 1", reason, PolicyReject, params{temp: f64(1)}, params{temp: f64(1)}, nil, ""},
		{"reasoning model rejects 0.2", reason, PolicyReject, params{temp: f64(0.2)}, params{}, nil, "temperature"},
		{"zero policy is drop", reason, "", params{temp: f64(0.2)}, params{}, []Action{
			{Param: "temperature", Kind: Dropped, From: 0.2, Reason: "openai-reasoning"}}, ""},
		{"top_p out of range mapped", oai, PolicyMap, params{topP: f64(1.5)}, params{topP: f64(1)}, []Action{
			{Param: "top_p", Kind: Mapped, From: 1.5, To: 1, Reason: "top-p-range"}}, ""},
		{"negative temperature mapped to 0", oai, PolicyMap, params{temp: f64(-0.5)}, params{temp: f64(0)}, []Action{
			{Param: "temperature", Kind: Mapped, From: -0.5, To: 0, Reason: "temperature-range"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &llm.Request{Model: "m", Temperature: tc.in.temp, TopP: tc.in.topP, TopK: tc.in.topK}
			before := *req
			out, actions, err := Params(req, tc.target, tc.policy)
			if !reflect.DeepEqual(*req, before) {
				t.Fatalf("Params modified the request")
			}
			if tc.reject != "" {
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Param != tc.reject || ae.MeshCode != llm.MeshNormalizationFailed || ae.Type != llm.ErrInvalidRequest {
					t.Fatalf("err = %#v, want a 400 naming %s", err, tc.reject)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := params{out.Temperature, out.TopP, out.TopK}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("params (-got +want):\n%s\n%s", show(got.temp, got.topP, got.topK), show(tc.want.temp, tc.want.topP, tc.want.topK))
			}
			if !reflect.DeepEqual(actions, tc.actions) {
				t.Errorf("actions (-got +want):\n%+v\n%+v", actions, tc.actions)
			}
			if len(actions) == 0 && out != req {
				t.Errorf("unchanged request was copied")
			}
		})
	}
}

func show(t, p *float64, k *int) string {
	s := ""
	if t != nil {
		s += " temperature=" + fmtNum(*t)
	}
	if p != nil {
		s += " top_p=" + fmtNum(*p)
	}
	if k != nil {
		s += " top_k=" + fmtNum(float64(*k))
	}
	return s
}

func TestTemperatureParamsModelNames(t *testing.T) {
	cases := []struct {
		name  string
		model string
		fn    func(string) bool
		want  bool
	}{
		{"claude 4.0", "claude-sonnet-4-20250514", claudeExclusive, false},
		{"claude 4.1", "claude-opus-4-1-20250805", claudeExclusive, true},
		{"claude 4.5", "claude-haiku-4-5", claudeExclusive, true},
		{"claude 5", "claude-opus-5", claudeExclusive, true},
		{"claude 3.7", "claude-3-7-sonnet-20250219", claudeExclusive, false},
		{"sim model", "sim-opus", claudeExclusive, false},
		{"o3", "o3", openAIReasoning, true},
		{"o4-mini", "o4-mini-2025-04-16", openAIReasoning, true},
		{"gpt-5", "gpt-5-mini", openAIReasoning, true},
		{"gpt-5-chat", "gpt-5-chat-latest", openAIReasoning, false},
		{"gpt-4o", "gpt-4o", openAIReasoning, false},
		{"omni prefix is not o1", "omni-moderation", openAIReasoning, false},
		{"routed name", "openai/o1", openAIReasoning, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fn(tc.model); got != tc.want {
				t.Errorf("%s: %v, want %v", tc.model, got, tc.want)
			}
		})
	}
}

func TestTemperatureParamsHeader(t *testing.T) {
	actions := []Action{
		{Param: "temperature", Kind: Mapped, From: 1.5, To: 1},
		{Param: "top_p", Kind: Dropped, From: 0.9},
		{Param: "top_k", Kind: Dropped, From: 40},
	}
	if got, want := Header(actions), "temperature:mapped:1.5->1,top_p:dropped,top_k:dropped"; got != want {
		t.Errorf("Header = %q, want %q", got, want)
	}
	if got := DroppedParams(actions); !reflect.DeepEqual(got, []string{"top_p", "top_k"}) {
		t.Errorf("DroppedParams = %v", got)
	}
	for _, s := range []string{"", "drop", "MAP", "reject"} {
		if _, err := ParsePolicy(s); err != nil {
			t.Errorf("ParsePolicy(%q): %v", s, err)
		}
	}
	if _, err := ParsePolicy("clamp"); !errors.Is(err, ErrBadPolicy) {
		t.Errorf("ParsePolicy(clamp) = %v", err)
	}
	// normalization.parameter_policy decodes through ParsePolicy.
	var p Policy
	if err := p.UnmarshalText([]byte("reject")); err != nil || p != PolicyReject {
		t.Errorf("UnmarshalText(reject) = %q, %v", p, err)
	}
	if err := p.UnmarshalText([]byte("clamp")); !errors.Is(err, ErrBadPolicy) || err.Error() != `expected drop, map or reject, got "clamp"` || p != PolicyReject {
		t.Errorf("UnmarshalText(clamp) = %v (policy now %q), want the allowed values named and the policy kept", err, p)
	}
	// A table extended with a rule for a local model.
	tb := DefaultTable().With(Rule{Name: "local-no-top-p", Format: llm.FormatOpenAI, Match: func(m string) bool { return m == "llama-local" }, Caps: Caps{NoTopP: true}})
	out, acts, err := tb.Params(&llm.Request{TopP: f64(0.5)}, Target{Format: llm.FormatOpenAI, Model: "llama-local"}, PolicyDrop)
	if err != nil || out.TopP != nil || len(acts) != 1 || acts[0].Reason != "local-no-top-p" {
		t.Errorf("extended table: %+v %+v %v", out, acts, err)
	}
}

// With returns a table holding t's rules followed by more.
func (t *Table) With(more ...Rule) *Table {
	return NewTable(append(append([]Rule(nil), t.rules...), more...)...)
}
