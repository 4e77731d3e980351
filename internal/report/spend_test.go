package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
)

// Issue 17 item 2: keel report's spend by virtual key and by team, from
// the request log's key_id and team columns: each call's full cost (a
// hedged call's loser included), calls without a key apart.
func TestReportSpendByKeyAndTeam(t *testing.T) {
	rec := func(i int, key, team string, cost float64, atts ...callrec.Attempt) *callrec.Record {
		return &callrec.Record{
			Call: callrec.Call{RequestID: "r", Start: base.Add(time.Duration(i) * time.Minute), Duration: time.Millisecond,
				Format: llm.FormatAnthropic, Model: "m", KeyID: key, Team: team},
			Route:  callrec.Route{ServedBy: "m@us", ServedModel: "m", ServedRegion: "us", Stage: "full", Attempts: atts},
			Result: callrec.Result{Status: 200, Cost: cost},
		}
	}
	hedged := rec(3, "key_b", "search", 0.004,
		callrec.Attempt{Endpoint: "m@us", Model: "m", Region: "us", Kind: "primary", Outcome: "ok", Winner: true, InputTokens: 10, OutputTokens: 1, Cost: 0.003},
		callrec.Attempt{Endpoint: "m@eu", Model: "m", Region: "eu", Kind: "hedge", Outcome: "cancelled_loser", InputTokens: 10, OutputTokens: 1, Cost: 0.001})
	hedged.Hedges = 1
	rep := build(t, writeLog(t, []*callrec.Record{
		rec(0, "key_a", "search", 0.01),
		rec(1, "key_a", "search", 0.02),
		rec(2, "key_c", "ads", 0.5),
		hedged,
		rec(4, "", "", 0.25),
	}))
	want := Spend{TotalUSD: 0.784,
		ByKey:  []KeySpend{{"key_c", "ads", 1, 0.5}, {"", "", 1, 0.25}, {"key_a", "search", 2, 0.03}, {"key_b", "search", 1, 0.004}},
		ByTeam: []TeamSpend{{"ads", 1, 1, 0.5}, {"", 1, 1, 0.25}, {"search", 2, 3, 0.034}}}
	got := rep.Spend
	same := near(got.TotalUSD, want.TotalUSD) && len(got.ByKey) == len(want.ByKey) && len(got.ByTeam) == len(want.ByTeam)
	for i := range min(len(got.ByKey), len(want.ByKey)) {
		g, w := got.ByKey[i], want.ByKey[i]
		same = same && g.Key == w.Key && g.Team == w.Team && g.Requests == w.Requests && near(g.USD, w.USD)
	}
	for i := range min(len(got.ByTeam), len(want.ByTeam)) {
		g, w := got.ByTeam[i], want.ByTeam[i]
		same = same && g.Team == w.Team && g.Keys == w.Keys && g.Requests == w.Requests && near(g.USD, w.USD)
	}
	if !same {
		t.Errorf("spend (-got +want)\n-%+v\n+%+v", got, want)
	}
	if !near(rep.Cost.TotalUSD, want.TotalUSD) {
		t.Errorf("the cost section's total $%v differs from the spend's $%v: a hedged call's loser counted twice or not at all", rep.Cost.TotalUSD, want.TotalUSD)
	}
	for _, f := range []struct {
		format string
		wants  []string
	}{
		{"md", []string{"## Spend by virtual key and team", "$0.5340 spent by 3 virtual keys, $0.2500 by calls without one",
			"| key_a | search | 2 | $0.0300 |", "| (no key) | (no team) | 1 | $0.2500 |", "| search | 2 | 3 | $0.0340 |"}},
		{"html", []string{"<h2>Spend by virtual key and team</h2>", "<td>key_c</td><td>ads</td><td>1</td><td>$0.5000</td>", "<td>search</td><td>2</td><td>3</td><td>$0.0340</td>"}},
		{"json", []string{`"spend": {`, `"total_usd": 0.784`, `"key": "key_b",`, `"usd": 0.004`}},
	} {
		var buf bytes.Buffer
		if err := Render(&buf, rep, f.format); err != nil {
			t.Fatal(err)
		}
		for _, w := range f.wants {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("%s report lacks %q", f.format, w)
			}
		}
	}
}
