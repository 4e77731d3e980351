package features_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
	"github.com/keelmesh/keel/sim"
)

// Must show (issue 28, item 2), through the HTTP front: a stream slowed to
// a tenth of its pace mid-way is finished by a continuation in another
// region, and the text the client reads on the wire, as Anthropic events
// or as OpenAI chunks, is byte for byte the uninterrupted answer's, ended
// cleanly, sooner than the slow stream alone (a 15-token answer: the pace
// is judged over 8 gaps, so the race starts 3 slow tokens in).
func TestSlowStreamThroughMesh(t *testing.T) {
	for _, client := range []string{"anthropic", "openai"} {
		t.Run(client, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := sim.DefaultConfig()
				for i := range cfg.Regions {
					cfg.Regions[i].Latency = sim.LatencySpec{Concurrency: 64, TTFT: sim.Duration(20 * time.Millisecond), PerToken: sim.Duration(5 * time.Millisecond)}
				}
				s := newSimMesh(t, cfg, func(c *config.Config) {
					// Every first token comes at 25ms: no TTFT hedge.
					c.Resilience.Hedge.Floor = 50 * time.Millisecond
				})
				defer s.mesh.Close()
				prompt := "Tell me a long story about a lighthouse keeper."
				path, body := "/v1/messages", msgBody("sim-sonnet", prompt, `,"stream":true,"temperature":0`)
				if client == "openai" {
					path = "/v1/chat/completions"
					body = fmt.Sprintf(`{"model":"sim-sonnet","stream":true,"temperature":0,"messages":[{"role":"user","content":%q}]}`, prompt)
				}
				read := func(body string) (string, int, time.Duration) {
					r := s.call(t, path, body)
					if r.status != 200 {
						t.Fatalf("status %d: %s", r.status, r.body)
					}
					var next func() (*llm.Event, error)
					if client == "openai" {
						next = openai.NewStreamReader(bytes.NewReader(r.body)).Next
					} else {
						next = anthropic.NewStreamReader(bytes.NewReader(r.body)).Next
					}
					var text strings.Builder
					stopped, tokens := false, 0
					for {
						ev, err := next()
						if err == io.EOF {
							break
						}
						if err != nil {
							t.Fatalf("reading the stream: %v\n%s", err, r.body)
						}
						switch ev.Type {
						case llm.EventBlockDelta:
							text.WriteString(ev.Delta)
							tokens++
						case llm.EventMessageStop:
							stopped = true
						case llm.EventError:
							t.Fatalf("error event: %v", ev.Err)
						}
					}
					if !stopped && client == "anthropic" {
						t.Fatalf("no message_stop:\n%s", r.body)
					}
					return text.String(), tokens, r.took
				}
				// Every region's endpoint learns its pace: three streams
				// each, pinned by preferred_region (left to the router, the
				// warm-up once never reached ap-south, where the slow call
				// then went with no pace to be judged against).
				var clean string
				var tokens int
				for _, reg := range cfg.Regions {
					pinned := strings.Replace(body, "{", `{"mesh_behavior":{"preferred_region":"`+reg.Name+`"},`, 1)
					for range 3 {
						clean, tokens, _ = read(pinned)
					}
				}
				s.mu.Lock()
				for i, reg := range cfg.Regions {
					for _, r := range s.records[3*i : 3*i+3] {
						if r.ServedRegion != reg.Name {
							t.Fatalf("warm-up for %s served by %s", reg.Name, r.ServedBy)
						}
					}
				}
				s.mu.Unlock()
				if err := s.fleet.SetFaults([]sim.Fault{{Kind: sim.KindSlowStream, AfterTokens: 6, Count: 1}}); err != nil {
					t.Fatal(err)
				}
				got, _, took := read(body)
				if got != clean {
					t.Fatalf("text %q, want the uninterrupted %q", got, clean)
				}
				s.mu.Lock()
				rec := s.records[len(s.records)-1]
				s.mu.Unlock()
				if rec.Hedges != 1 || !rec.HedgeWon {
					s.mu.Lock()
					var served []string
					for _, r := range s.records {
						served = append(served, r.ServedBy)
					}
					s.mu.Unlock()
					t.Errorf("hedges %d (won %v): want the slow stream raced and the continuation to win; served by %v, attempts %+v", rec.Hedges, rec.HedgeWon, served, rec.Attempts)
				}
				// Alone, the slow stream would take 20ms to its first token, 5ms
				// before each of its first 6 tokens and 50ms before each other.
				slow := 20*time.Millisecond + 6*5*time.Millisecond + time.Duration(tokens-6)*50*time.Millisecond
				if took > slow*6/10 {
					t.Errorf("took %v, the slow stream alone %v", took, slow)
				}
				t.Logf("%d tokens: %v through Keel, %v for the slow stream alone", tokens, took, slow)
			})
		})
	}
}

// A stream on an endpoint that has learned no pace of its own yet is
// judged by the model's pace elsewhere: only us-east has streamed, and a
// stream crawling in eu-west (where the router sent it) is raced and
// finished by a continuation, its text the uninterrupted answer's. (It
// was never judged: an endpoint new to streaming crawled to its end.)
func TestSlowStreamJudgedByModelPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := sim.DefaultConfig()
		for i := range cfg.Regions {
			cfg.Regions[i].Latency = sim.LatencySpec{Concurrency: 64, TTFT: sim.Duration(20 * time.Millisecond), PerToken: sim.Duration(5 * time.Millisecond)}
		}
		s := newSimMesh(t, cfg, func(c *config.Config) { c.Resilience.Hedge.Floor = 50 * time.Millisecond })
		defer s.mesh.Close()
		body := msgBody("sim-sonnet", "Tell me a long story about a lighthouse keeper.", `,"stream":true,"temperature":0`)
		pinned := func(region string) string {
			return strings.Replace(body, "{", `{"mesh_behavior":{"preferred_region":"`+region+`"},`, 1)
		}
		text := func(r result) string {
			var b strings.Builder
			next := anthropic.NewStreamReader(bytes.NewReader(r.body)).Next
			for {
				ev, err := next()
				if err == io.EOF {
					return b.String()
				}
				if err != nil {
					t.Fatalf("reading the stream: %v\n%s", err, r.body)
				}
				if ev.Type == llm.EventBlockDelta {
					b.WriteString(ev.Delta)
				}
			}
		}
		var clean string
		for range 3 {
			clean = text(s.call(t, "/v1/messages", pinned("us-east")))
		}
		if err := s.fleet.SetFaults([]sim.Fault{{Kind: sim.KindSlowStream, Region: "eu-west", AfterTokens: 6, Count: 1}}); err != nil {
			t.Fatal(err)
		}
		got := text(s.call(t, "/v1/messages", pinned("eu-west")))
		s.mu.Lock()
		rec := s.records[len(s.records)-1]
		s.mu.Unlock()
		if rec.Attempts[0].Region != "eu-west" || rec.Hedges != 1 || !rec.HedgeWon || got != clean {
			t.Errorf("first attempt in %s, hedges %d (won %v), text %q; want the eu-west stream raced and finished by the continuation, text %q",
				rec.Attempts[0].Region, rec.Hedges, rec.HedgeWon, got, clean)
		}
	})
}
