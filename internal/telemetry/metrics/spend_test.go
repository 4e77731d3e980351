package metrics

import (
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// Issue 17 item 2: spend by model, key and team, summed exactly; calls
// without a key count under key "none"; past the series cap key and team
// are "other".
func TestSpendByModelKeyTeam(t *testing.T) {
	o := testOptions()
	o.MaxSpendSeries = 4
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		model, served, key, team string
		cost                     float64
	}{
		{"claude-sonnet", "claude-sonnet", "key_a", "search", 0.25},
		{"claude-sonnet", "claude-sonnet", "key_a", "search", 0.5},
		{"claude-sonnet", "claude-haiku", "key_a", "search", 0.125}, // a fallback: the model that served
		{"claude-haiku", "claude-haiku", "key_b", "ads", 1},
		{"claude-haiku", "", "", "", 0.0625},                // no key; unserved (a failed call's attempts): the model asked for
		{"claude-haiku", "claude-haiku", "key_c", "ads", 2}, // the fifth series: over the cap
		{"claude-haiku", "claude-haiku", "key_d", "ads", 0}, // costs nothing: no series
	}
	for i, c := range calls {
		r := okRecord(i)
		r.Model, r.ServedModel, r.KeyID, r.Team, r.Cost = c.model, c.served, c.key, c.team, c.cost
		if c.served == "" {
			r.Err = &llm.APIError{Status: 503, MeshCode: llm.MeshFallbackExhausted}
		}
		m.RequestDone(r)
	}
	fams := scrape(t, m.Handler())
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"model": "claude-sonnet", "key": "key_a", "team": "search"}, 0.75},
		{map[string]string{"model": "claude-haiku", "key": "key_a", "team": "search"}, 0.125},
		{map[string]string{"key": "key_a"}, 0.875},
		{map[string]string{"team": "ads"}, 1},
		{map[string]string{"key": "none", "team": "none", "model": "claude-haiku"}, 0.0625},
		{map[string]string{"key": "other", "team": "other"}, 2},
		{map[string]string{"key": "key_d"}, 0},
		{map[string]string{}, 3.9375},
	} {
		if got := sample(fams, "mesh_spend_usd_total", c.labels); got != c.want {
			t.Errorf("mesh_spend_usd_total%v (-got +want)\n-%v\n+%v", c.labels, got, c.want)
		}
	}
}
