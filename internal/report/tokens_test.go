package report

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

// Issue 28, item 5: spend that counts every token. Three calls of known
// usage, each attempt priced as the engine prices it (pricing.Bill): a
// coding agent's turn with cache reads, 5-minute and 1-hour writes and
// thinking; a hedged call whose hedge went to a cold endpoint (it wrote
// the prompt to that cache) and whose loser also answered; a call that
// fell back to a model with a larger context window, re-sending the whole
// prompt. The report's cost per call, per key and team, the hedging and
// fallback cost and what the cache saved are checked to the cent.
func TestReportCountsEveryToken(t *testing.T) {
	tab := pricing.New(nil)
	sonnet, _ := tab.Lookup("claude-sonnet-4-5")
	opus, _ := tab.Lookup("claude-opus-4-1")
	cost := func(p pricing.Price, u llm.Usage) float64 {
		w1h := u.CacheWrite1h()
		return p.Bill(pricing.Tokens{Input: u.InputTokens, CacheRead: u.CacheReadTokens, CacheWrite5m: u.CacheWriteTokens - w1h,
			CacheWrite1h: w1h, Output: u.OutputTokens, Reasoning: u.ReasoningTokens}).Total
	}
	att := func(ep, model, kind, outcome string, winner bool, p pricing.Price, u llm.Usage) callrec.Attempt {
		return callrec.Attempt{Endpoint: ep, Model: model, Region: strings.SplitN(ep, "@", 2)[1], Kind: kind, Outcome: outcome, Winner: winner,
			InputTokens: u.PromptTokens(), OutputTokens: u.OutputTokens, Cost: cost(p, u)}
	}
	rec := func(i int, key, team, model string, u llm.Usage, atts ...callrec.Attempt) *callrec.Record {
		r := &callrec.Record{
			Call: callrec.Call{RequestID: "r", Start: base.Add(time.Duration(i) * time.Minute), Duration: time.Millisecond,
				Format: llm.FormatAnthropic, Model: model, KeyID: key, Team: team},
			Route:  callrec.Route{ServedModel: model, Stage: "full", Attempts: atts},
			Result: callrec.Result{Status: 200, Usage: u},
		}
		for _, a := range atts {
			r.Cost += a.Cost
			if a.Winner || len(atts) == 1 {
				r.ServedBy, r.ServedRegion = a.Endpoint, a.Region
			}
		}
		return r
	}

	turn := llm.Usage{InputTokens: 2_000, CacheReadTokens: 100_000, CacheWriteTokens: 30_000, CacheWrite5mTokens: 10_000, CacheWrite1hTokens: 20_000,
		OutputTokens: 4_000, ReasoningTokens: 3_000}
	agent := rec(0, "key_a", "search", "claude-sonnet-4-5", turn, att("s@us", "claude-sonnet-4-5", "primary", "ok", false, sonnet, turn))

	warm := llm.Usage{InputTokens: 2_000, CacheReadTokens: 100_000, OutputTokens: 500}
	cold := llm.Usage{InputTokens: 2_000, CacheWriteTokens: 100_000, OutputTokens: 500}
	hedged := rec(1, "key_a", "search", "claude-sonnet-4-5", cold,
		att("s@us", "claude-sonnet-4-5", "primary", "cancelled_loser", false, sonnet, warm),
		att("s@eu", "claude-sonnet-4-5", "hedge", "ok", true, sonnet, cold))
	hedged.Hedges, hedged.HedgeWon = 1, true

	long := llm.Usage{InputTokens: 150_000, OutputTokens: 1_000}
	fellBack := rec(2, "key_b", "ads", "claude-opus-4-1", long,
		callrec.Attempt{Endpoint: "s@us", Model: "claude-sonnet-4-5", Region: "us", Kind: "primary", Outcome: "context_window", Status: 400},
		att("o@us", "claude-opus-4-1", "fallback", "ok", false, opus, long))
	fellBack.Fallback = "context_window"

	// The engine's figures, by hand: per million tokens,
	// agent:  2,000×3 + 100,000×0.30 + 10,000×3.75 + 20,000×6 + 4,000×15  = $0.2535
	// hedged: loser 2,000×3 + 100,000×0.30 + 500×15 = $0.0435; hedge 2,000×3 + 100,000×3.75 + 500×15 = $0.3885
	// fell back: 150,000×15 + 1,000×75 = $2.325 (the refused attempt costs 0)
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{{"agent turn", agent.Cost, 0.2535}, {"hedged call", hedged.Cost, 0.432}, {"fallen-back call", fellBack.Cost, 2.325}} {
		if cents(c.got) != cents(c.want) || !near(c.got, c.want) {
			t.Errorf("%s costs $%v, want $%v", c.name, c.got, c.want)
		}
	}

	path := writeLog(t, []*callrec.Record{agent, hedged, fellBack})
	rd, err := sqlite.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rep, err := Build(rd.Query(context.Background(), base), Options{Since: base, Prices: tab.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Cost
	// Saved: agent 100,000×(3−0.30) − 10,000×(3.75−3) − 20,000×(6−3) (each
	// TTL's writes at their price: the log keeps the split); the hedge's
	// cold write −100,000×0.75.
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"total", c.TotalUSD, 3.0105}, {"hedging overhead", c.HedgeOverheadUSD, 0.0435}, {"fallback", c.FallbackUSD, 2.325},
		{"cache saved", c.CacheSavedUSD, 0.27 - 0.0075 - 0.06 - 0.075}, {"spend", rep.Spend.TotalUSD, 3.0105},
	} {
		if !near(f.got, f.want) {
			t.Errorf("%s: $%v, want $%v", f.name, f.got, f.want)
		}
	}
	if cents(c.CacheSavedUSD) != 13 { // $0.1275
		t.Errorf("cache saved $%v, want $0.13 to the cent", c.CacheSavedUSD)
	}
	if c.HedgeLosers != 1 || c.FallbackAttempts != 1 || c.CacheReadTokens != 100_000 || c.CacheWriteTokens != 130_000 || c.CacheWrite1hTokens != 20_000 || c.CacheUnpriced != 0 {
		t.Errorf("counts: %d losers, %d fallbacks, %d read, %d written (%d for 1h), %d unpriced; want 1, 1, 100000, 130000 (20000), 0",
			c.HedgeLosers, c.FallbackAttempts, c.CacheReadTokens, c.CacheWriteTokens, c.CacheWrite1hTokens, c.CacheUnpriced)
	}
	wantKeys := map[string]float64{"key_a": 0.6855, "key_b": 2.325}
	for _, k := range rep.Spend.ByKey {
		if w, ok := wantKeys[k.Key]; !ok || cents(k.USD) != cents(w) || !near(k.USD, w) {
			t.Errorf("key %q spent $%v, want $%v", k.Key, k.USD, w)
		}
		delete(wantKeys, k.Key)
	}
	if len(wantKeys) != 0 {
		t.Errorf("keys missing from the spend: %v", wantKeys)
	}
	var md bytes.Buffer
	if err := Render(&md, rep, "md"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"hedging overhead $0.0435 (1 race losers)",
		"Fallbacks re-sent 1 prompts to another endpoint, costing $2.3250 (in the sums above).",
		"The providers' prompt caches read 100000 prompt tokens and wrote 130000 (20000 with the 1-hour TTL), saving $0.1275 against sending them uncached",
		"| key_a | search | 2 | $0.6855 |", "| key_b | ads | 1 | $2.3250 |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown report lacks %q:\n%s", want, md.String())
		}
	}
	var html bytes.Buffer
	if err := Render(&html, rep, "html"); err != nil {
		t.Fatal(err)
	}
	if want := `<p id="fallback-cache-line">Fallbacks re-sent 1 prompts to another endpoint, costing $2.3250 (in the sums above). The providers&#39; prompt caches read 100000`; !strings.Contains(html.String(), want) {
		t.Errorf("HTML report lacks %s", want)
	}
}

func cents(v float64) int64 { return int64(v*100 + 0.5) }
