package report

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

// Issue 13, item 7: keel report credited the rollout's monitor stage to the
// safety valve, priced redundant fragment replicas as a share of the
// answer's cost (104 replicas of ~2k tokens at $3/MTok came to $0.0002) and
// had no error breakdown by status. This log has known contents; every
// figure of the report's plain path, cost and error sections is checked.

// price is an attempt of m-a at $3 in and $15 out per million tokens.
func price(in, out int) float64 { return (float64(in)*3 + float64(out)*15) / 1e6 }

func costFixture() []*callrec.Record {
	at := func(ep, kind, outcome string, status int, win bool, in, out int) callrec.Attempt {
		return callrec.Attempt{Endpoint: ep, Model: "m-a", Region: strings.TrimPrefix(ep, "m-a@"), Kind: kind, Outcome: outcome, Status: status,
			Winner: win, InputTokens: in, OutputTokens: out, Cost: price(in, out)}
	}
	rec := func(i int, stage string, legacy bool, cost float64, atts ...callrec.Attempt) *callrec.Record {
		return &callrec.Record{
			Call: callrec.Call{RequestID: "r", Start: base.Add(time.Duration(i) * time.Minute), Duration: time.Millisecond,
				Format: llm.FormatAnthropic, Model: "m-req"},
			Route:  callrec.Route{ServedBy: "m-a@us", ServedModel: "m-a", ServedRegion: "us", Stage: stage, Legacy: legacy, Attempts: atts},
			Result: callrec.Result{Status: 200, Cost: cost},
		}
	}
	failed := func(i, status int, code string, a callrec.Attempt) *callrec.Record {
		return &callrec.Record{
			Call: callrec.Call{RequestID: "e", Start: base.Add(time.Duration(i) * time.Minute), Duration: time.Millisecond,
				Format: llm.FormatAnthropic, Model: "m-req"},
			Route:  callrec.Route{Stage: "full", Attempts: []callrec.Attempt{a}},
			Result: callrec.Result{Status: status, Err: &llm.APIError{Status: status, MeshCode: code}},
		}
	}
	// Two fragments, two replicas each: fragment 1's second replica is
	// redundancy, fragment 2's first failed. The engine's own figure prices
	// every replica's tokens at the serving endpoint's price.
	frag := rec(0, "full", false, price(2000+2500+1800, 100+100+120),
		at("m-a@us", "fragment", "ok", 200, true, 2000, 100),
		at("m-a@eu", "fragment", "ok", 200, false, 2500, 100),
		at("m-a@eu", "fragment", "server_error", 500, false, 0, 0),
		at("m-a@us", "fragment", "ok", 200, true, 1800, 120))
	frag.Fragments = &callrec.Fragments{Count: 2, OK: 2}
	// A hedge won; the primary was cancelled without an answer, the second
	// hedge had answered when the race was decided (no outcome). The
	// engine's figure counts both answers.
	hedged := rec(1, "hedging", false, price(1000, 60)+price(1000, 50),
		at("m-a@us", "primary", "cancelled_loser", 0, false, 0, 0),
		at("m-a@eu", "hedge", "ok", 200, true, 1000, 60),
		at("m-a@ap", "hedge", "", 0, false, 1000, 50))
	hedged.Hedges, hedged.HedgeWon = 2, true
	return []*callrec.Record{
		frag, hedged,
		// The monitor stage: plain path by design, the valve closed.
		rec(2, "monitor", true, 0.001, at("m-a@us", "primary", "ok", 200, false, 0, 0)),
		// The valve open in the full stage.
		rec(3, "full", true, 0.002, at("m-a@us", "primary", "ok", 200, false, 0, 0)),
		failed(4, 503, "mesh_fallback_exhausted", at("m-a@us", "primary", "overloaded", 529, false, 0, 0)),
		failed(5, 429, "", at("m-a@us", "primary", "rate_limited", 429, false, 0, 0)),
		failed(6, 503, "mesh_fallback_exhausted", at("m-a@us", "primary", "server_error", 500, false, 0, 0)),
	}
}

func TestReportCostsPlainPathAndErrors(t *testing.T) {
	rep := build(t, writeLog(t, costFixture()))
	answers := price(2000, 100) + price(1800, 120) + price(1000, 60) + 0.001 + 0.002
	hedge := price(1000, 50)
	redundancy := price(2500, 100)
	checks := []struct {
		name      string
		got, want any
	}{
		{"requests and attempts", []any{rep.Requests, rep.Amplification.Attempts}, []any{7, 12}},
		{"stages", rep.Stages, []Count{{"full", 5}, {"hedging", 1}, {"monitor", 1}}},
		{"plain path", rep.PlainPath, PlainPath{Total: 2, Monitor: 1, ValveOpen: 1}},
		{"errors", []any{rep.ErrorsTotal, rep.Errors}, []any{3, []ErrorCount{{"mesh_fallback_exhausted", 503, 2, 2.0 / 7}, {"", 429, 1, 1.0 / 7}}}},
		{"attempt errors", rep.AttemptErrors, []AttemptError{{"server_error", 500, 2}, {"overloaded", 529, 1}, {"rate_limited", 429, 1}}},
		// The extra fragment replica and four failed attempts (one replica,
		// three of failed calls); two hedge losers.
		{"attempt counts", []any{rep.Cost.RedundantAttempts, rep.Cost.HedgeLosers, rep.Cost.UnpricedAttempts}, []any{5, 2, 0}},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("(-got +want)\n-%+v\n+%+v", c.got, c.want)
			}
		})
	}
	t.Run("cost", func(t *testing.T) {
		c := rep.Cost
		if !near(c.RecordedUSD, answers) || !near(c.HedgeOverheadUSD, hedge) || !near(c.RedundancyOverheadUSD, redundancy) || !near(c.TotalUSD, answers+hedge+redundancy) {
			t.Errorf("answers %v hedge %v redundancy %v total %v; want %v %v %v %v", c.RecordedUSD, c.HedgeOverheadUSD, c.RedundancyOverheadUSD, c.TotalUSD,
				answers, hedge, redundancy, answers+hedge+redundancy)
		}
		want := []ModelCost{
			{Model: "m-a", Requests: 4, RecordedUSD: answers, HedgeOverheadUSD: hedge, RedundancyOverheadUSD: redundancy,
				TotalUSD: answers + hedge + redundancy, OverheadShare: (hedge + redundancy) / (answers + hedge + redundancy)},
			{Model: "unserved: m-req", Requests: 3},
		}
		if len(c.ByModel) != len(want) {
			t.Fatalf("by model: %+v", c.ByModel)
		}
		for i, w := range want {
			g := c.ByModel[i]
			if g.Model != w.Model || g.Requests != w.Requests || !near(g.RecordedUSD, w.RecordedUSD) || !near(g.HedgeOverheadUSD, w.HedgeOverheadUSD) ||
				!near(g.RedundancyOverheadUSD, w.RedundancyOverheadUSD) || !near(g.TotalUSD, w.TotalUSD) || !near(g.OverheadShare, w.OverheadShare) {
				t.Errorf("model %d (-got +want)\n-%+v\n+%+v", i, g, w)
			}
		}
	})
	for _, tt := range []struct {
		format string
		wants  []string
	}{
		{"md", []string{
			"2 calls took the plain path to the primary model: 1 in the rollout's monitor stage, 1 because the safety valve was open.",
			"| full | 5 |", "| hedging | 1 |", "| monitor | 1 |",
			"Answers $0.0216 + hedging overhead $0.0037 (2 race losers) + redundancy overhead $0.0090 (5 extra attempts) = $0.0343.",
			"| m-a | 4 | $0.0216 | $0.0037 | $0.0090 | $0.0343 | 37.1% |",
			"| mesh_fallback_exhausted | 503 | 2 | 28.6% |", "| (no mesh code) | 429 | 1 | 14.3% |",
			"| server_error | 500 | 2 |", "| overloaded | 529 | 1 |", "| rate_limited | 429 | 1 |",
		}},
		{"html", []string{
			"2 calls took the plain path to the primary model: 1 in the rollout&#39;s monitor stage, 1 because the safety valve was open.",
			"Answers $0.0216 &#43; hedging overhead $0.0037 (2 race losers) &#43; redundancy overhead $0.0090 (5 extra attempts) = $0.0343.",
			"<td>m-a</td><td>4</td><td>$0.0216</td><td>$0.0037</td><td>$0.0090</td><td>$0.0343</td><td>37.1%</td>",
			"<tr><td>mesh_fallback_exhausted</td><td>503</td><td>2</td><td>28.6%</td></tr>", "<tr><td>(no mesh code)</td><td>429</td><td>1</td><td>14.3%</td></tr>",
			"<tr><td>server_error</td><td>500</td><td>2</td></tr>", "mesh_fallback_exhausted / 503",
		}},
	} {
		t.Run(tt.format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Render(&buf, rep, tt.format); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.wants {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("%s report lacks %q\n%s", tt.format, w, buf.String())
				}
			}
		})
	}
}

// A log written before the stage and per-attempt usage were recorded: its
// plain-path calls are not credited to either cause and its extra attempts
// are not priced, and the report says so.
func TestReportOfOldLogAttributesNothingItCannotKnow(t *testing.T) {
	rows := func(yield func(*sqlite.Row, error) bool) {
		yield(&sqlite.Row{Start: base, Status: 200, ServedModel: "m-a", Legacy: true, CostUSD: 0.002, Attempts: []sqlite.Attempt{
			{Kind: "primary", Outcome: "server_error", Status: 500},
			{Kind: "retry", Outcome: "ok", Status: 200},
		}}, nil)
	}
	rep, err := Build(rows, Options{Since: base})
	if err != nil {
		t.Fatal(err)
	}
	if want := (PlainPath{Total: 1, Unattributed: 1}); rep.PlainPath != want {
		t.Errorf("plain path %+v, want %+v", rep.PlainPath, want)
	}
	if c := rep.Cost; c.UnpricedAttempts != 1 || c.RecordedUSD != 0.002 || c.TotalUSD != 0.002 || c.RedundantAttempts != 0 {
		t.Errorf("cost %+v, want 1 unpriced attempt and $0.002 recorded in all", c)
	}
	var buf bytes.Buffer
	if err := Render(&buf, rep, "md"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"1 logged before the stage was recorded", "| (not recorded) | 1 |", "1 extra attempts were logged before per-attempt usage was recorded"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("report lacks %q\n%s", w, buf.String())
		}
	}
}
