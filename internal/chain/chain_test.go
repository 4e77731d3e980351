package chain

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/rollout"
	"github.com/keelmesh/keel/internal/structured"
)

// call is a fake engine call: a record and the flags the hooks read.
type call struct {
	rec                  callrec.Record
	shadowRun, legacy    bool
	fused                bool
	contract             *structured.Part
	shadowLegacy, reasks bool
}

func (c *call) Record() *callrec.Record                 { return &c.rec }
func (c *call) ShadowRun() bool                         { return c.shadowRun }
func (c *call) ShadowLegacy() bool                      { return c.shadowLegacy }
func (c *call) Threshold() float32                      { return 0 }
func (c *call) Legacy() bool                            { return c.legacy }
func (c *call) SetLegacy()                              { c.legacy, c.rec.Legacy = true, true }
func (c *call) Fused() bool                             { return c.fused }
func (c *call) FusedBy(*provider.Endpoint)              { c.fused = true }
func (c *call) Contract() *structured.Part              { return c.contract }
func (c *call) SetContract(p *structured.Part)          { c.contract = p }
func (c *call) CreditReask()                            { c.reasks = true }
func (c *call) OutputTool() bool                        { return false }
func (c *call) Reasker() structured.Reasker             { return nil }
func (c *call) Replicas() fragment.Replicas             { return nil }
func (c *call) Fail(_ context.Context, err error) error { return err }
func (c *call) pc(req *llm.Request) *pipeline.Call {
	return &pipeline.Call{Request: req, ID: "r1", Header: http.Header{}, Record: c}
}
func answer(text string) pipeline.HandlerFunc {
	return func(context.Context, *pipeline.Call) (*pipeline.Answer, error) {
		return &pipeline.Answer{Response: &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: text}}, StopReason: llm.StopEndTurn, Usage: llm.Usage{OutputTokens: 3}}}, nil
	}
}

// store is an in-memory cache.Store.
type store map[string]*cache.Entry

func (s store) Get(k string) (*cache.Entry, bool)     { e, ok := s[k]; return e, ok }
func (s store) Put(k string, e *cache.Entry, _ int64) { s[k] = e }

// The exact cache's hooks: a miss goes down and is stored, and its part
// says miss; the same request then is a hit from the cache, served by the
// stored endpoint with its usage; a fused answer is not stored; a shadow
// call bypasses the cache.
func TestCacheHooksFillTheRecord(t *testing.T) {
	st := store{}
	exact, _ := Caches(st, cache.Policy{AnyTemperature: true}, nil, nil)
	req := func() *llm.Request {
		return &llm.Request{Format: llm.FormatAnthropic, Model: "m", MaxTokens: 8, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}}}
	}
	first := &call{}
	if _, err := exact(answer("hello")).Serve(context.Background(), first.pc(req())); err != nil {
		t.Fatal(err)
	}
	if got := first.rec.CacheStatus(); got != cache.Miss || len(st) != 1 {
		t.Fatalf("first call: status %q, %d stored; want miss and one entry", got, len(st))
	}
	for _, e := range st {
		e.Endpoint = &provider.Endpoint{ID: "m/eu/p", Model: "m", Region: "eu", Provider: "p"}
	}
	second := &call{}
	ans, err := exact(pipeline.HandlerFunc(func(context.Context, *pipeline.Call) (*pipeline.Answer, error) {
		t.Fatal("a hit went down the chain")
		return nil, nil
	})).Serve(context.Background(), second.pc(req()))
	if err != nil || ans.Response.Text() != "hello" {
		t.Fatalf("hit: %v, %v", ans, err)
	}
	if r := &second.rec; r.CacheStatus() != cache.Hit || r.Status != http.StatusOK || r.ServedBy != "m/eu/p" || r.ServedRegion != "eu" || r.Usage.OutputTokens != 3 {
		t.Fatalf("hit record: %+v", r)
	}
	fused := &call{fused: true}
	other := req()
	other.Messages[0].Content[0].Text = "a long document"
	if _, err := exact(answer("fused")).Serve(context.Background(), fused.pc(other)); err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 {
		t.Fatalf("a fused answer was stored: %d entries", len(st))
	}
	shadow := &call{shadowRun: true}
	if _, err := exact(answer("other")).Serve(context.Background(), shadow.pc(req())); err != nil {
		t.Fatal(err)
	}
	if got := shadow.rec.CacheStatus(); got == cache.Hit {
		t.Fatalf("a shadow call read the cache: %q", got)
	}
}

// The rollout hook records the stage, and a shadow call on the legacy
// path, or an open valve, puts the call on the legacy path.
func TestRolloutHookRecordsStageAndLegacy(t *testing.T) {
	plan, err := rollout.NewPlan(rollout.Rollout{})
	if err != nil {
		t.Fatal(err)
	}
	st := Rollout(plan, rollout.NewValve(resilience.ValveConfig{}))
	req := &llm.Request{Format: llm.FormatAnthropic, Model: "m"}
	full := &call{rec: callrec.Record{Call: callrec.Call{Start: time.Now()}}}
	if _, err := st(answer("x")).Serve(context.Background(), full.pc(req)); err != nil {
		t.Fatal(err)
	}
	if full.rec.Stage != rollout.StageFull || full.legacy || full.rec.Legacy {
		t.Fatalf("full rollout: stage %q legacy %v/%v", full.rec.Stage, full.legacy, full.rec.Legacy)
	}
	mon := &call{shadowLegacy: true, rec: callrec.Record{Call: callrec.Call{Start: time.Now()}}}
	if _, err := st(answer("x")).Serve(context.Background(), mon.pc(req)); err != nil {
		t.Fatal(err)
	}
	if mon.rec.Stage != rollout.StageMonitor || !mon.legacy || !mon.rec.Legacy {
		t.Fatalf("legacy shadow: stage %q legacy %v/%v", mon.rec.Stage, mon.legacy, mon.rec.Legacy)
	}
}
