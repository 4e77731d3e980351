package structured

import (
	"sync"
	"testing"
)

func TestMetrics(t *testing.T) {
	var m Metrics
	s := mustCompile(t, itemsSchema)
	answers := []string{
		itemsAnswer,                          // valid first time
		"```json\n" + itemsAnswer + ",\n```", // extract: a stray comma after the value goes with the fence
		"```json\n" + itemsAnswer + "\n```",  // extract
		`[{"name": "A", "price": "1"},]`,     // trailing commas + coerce
		`nothing`,                            // invalid
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, a := range answers {
				m.Observe(Repair(a, s, Options{}))
			}
		})
	}
	wg.Wait()
	m.Reasked.Add(1)
	m.Failed.Add(1)
	got := map[string]uint64{
		"validated":        m.Validated.Load(),
		"valid_first_time": m.ValidFirstTime.Load(),
		"repaired":         m.Repaired.Load(),
		"reasked":          m.Reasked.Load(),
		"failed":           m.Failed.Load(),
	}
	for _, st := range Steps() {
		got["step:"+st] = m.RepairedBy(st)
	}
	want := map[string]uint64{
		"validated": 20, "valid_first_time": 4, "repaired": 12, "reasked": 1, "failed": 1,
		"step:extract": 8, "step:close_truncated": 0, "step:trailing_commas": 4, "step:quotes": 0,
		"step:coerce": 4, "step:derive_field": 0, "step:guard_violation": 0,
	}
	if d := diffJSON(got, want); d != "" {
		t.Error(d)
	}
}
