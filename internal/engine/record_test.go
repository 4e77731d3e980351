package engine

import (
	"testing"

	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/rollout"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
)

// TestRecordPartsOnlyForStagesThatActed: a call's record has the part of
// each stage that acted for it and no other: a plain call on a mesh with
// no feature on has none; on a mesh with the exact cache, every call has
// the cache's part (a shared one per status: no allocation), and nothing
// else a plain call did not need.
func TestRecordPartsOnlyForStagesThatActed(t *testing.T) {
	noFeature := func(t *testing.T, rec *Record) {
		t.Helper()
		if rec.Normalization != nil || rec.Tier != nil || rec.Semantic != nil || rec.Structured != nil || rec.Fragments != nil || rec.PII != nil {
			t.Errorf("parts of stages that did not act: normalization %v, tier %v, semantic %v, structured %v, fragments %v, pii %v",
				rec.Normalization, rec.Tier, rec.Semantic, rec.Structured, rec.Fragments, rec.PII)
		}
	}
	t.Run("plain", func(t *testing.T) {
		up := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicJSON("hi"))}
		h := newHarness(t, up)
		e := h.engine(Options{}, h.endpoints("m", "a")...)
		r := call(t, e, ask(llm.FormatAnthropic, "m", false))
		if r.err != nil {
			t.Fatal(r.err)
		}
		noFeature(t, r.rec)
		if r.rec.Cache != nil {
			t.Errorf("cache part %+v on a mesh without a cache", r.rec.Cache)
		}
		if r.rec.ServedBy != "m/a/p" || len(r.rec.Attempts) != 1 || r.rec.Stage != rollout.StageFull {
			t.Errorf("route part: served by %q, %d attempts, stage %q", r.rec.ServedBy, len(r.rec.Attempts), r.rec.Stage)
		}
	})
	t.Run("cached", func(t *testing.T) {
		up := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicJSON("hi"))}
		h := newHarness(t, up)
		lru, err := cache.New[*cache.Entry](cache.Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e := h.engine(Options{Stages: stages(t, chain.Config{Cache: lru})}, h.endpoints("m", "a")...)
		req := func() *llm.Request {
			r := ask(llm.FormatAnthropic, "m", false)
			zero := 0.0
			r.Temperature = &zero
			return r
		}
		first, second := call(t, e, req()), call(t, e, req())
		if first.err != nil || second.err != nil {
			t.Fatal(first.err, second.err)
		}
		if first.rec.Cache != callrec.CachePart(cache.Miss) || second.rec.Cache != callrec.CachePart(cache.Hit) {
			t.Errorf("cache parts %+v, %+v: want the shared miss, then hit", first.rec.Cache, second.rec.Cache)
		}
		noFeature(t, first.rec)
		noFeature(t, second.rec)
		if up.count() != 1 || second.rec.Status != 200 || len(second.rec.Attempts) != 0 {
			t.Errorf("%d upstream calls, hit status %d with %d attempts", up.count(), second.rec.Status, len(second.rec.Attempts))
		}
	})
}
