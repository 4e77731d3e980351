package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// countSide is a token count: Anthropic endpoints only, posted to their
// count_tokens path.
func countSide(model string) Side {
	return Side{Kind: "count_tokens", Model: model, Format: llm.FormatAnthropic,
		Serves: func(ep *provider.Endpoint) bool { return ep.Format == llm.FormatAnthropic },
		Request: func(ep *provider.Endpoint) (string, []byte) {
			return ep.PathURL("/v1/messages/count_tokens"), []byte(`{"model":"` + ep.UpstreamModel + `"}`)
		},
		Answer: func(b []byte) (llm.Usage, error) {
			if !json.Valid(b) {
				return llm.Usage{}, errors.New("not JSON")
			}
			return llm.Usage{}, nil
		}}
}

// TestSideFailsOverAndKeepsLatency: a token count whose first endpoint
// refuses (529) fails over to the next Anthropic endpoint and never to the
// OpenAI one; the refusal counts against the endpoint, the count's
// latency does not enter its statistics.
func TestSideFailsOverAndKeepsLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a1 := &scripted{id: "a1", format: llm.FormatAnthropic, script: always(anthropicError(529, "overloaded_error", ""))}
		a2 := &scripted{id: "a2", format: llm.FormatAnthropic, script: always(reply{delay: 5 * time.Millisecond, body: `{"input_tokens":42}`})}
		o1 := &scripted{id: "o1", format: llm.FormatOpenAI, script: always(reply{body: `{}`})}
		h := newHarness(t, a1, a2, o1)
		// Rand 0: ties go to the first endpoint, a1.
		e := h.engine(Options{Resilience: Resilience{DisableHedging: true}, Rand: func(int) int { return 0 }}, h.endpoints("m", "a1", "a2", "o1")...)
		var done *Record
		out, err := e.Side(context.Background(), countSide("m"), Call{RequestID: "t", Done: func(r *Record) { done = r }})
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Result.Body) != `{"input_tokens":42}` || out.Endpoint.ID != "m/a2/p" {
			t.Fatalf("answer %s from %s, want the count from m/a2/p", out.Result.Body, out.Endpoint.ID)
		}
		if a1.count() != 1 || a2.count() != 1 || o1.count() != 0 {
			t.Errorf("calls a1 %d a2 %d o1 %d, want 1 1 0", a1.count(), a2.count(), o1.count())
		}
		if done != out.Record || done.Side != "count_tokens" || len(done.Attempts) != 2 || done.ServedBy != "m/a2/p" || done.Status != 200 {
			t.Errorf("record %+v", done)
		}
		for _, st := range e.Endpoints() {
			if st.ID == "m/a2/p" && (st.Health.Requests != 1 || st.Health.EWMA != 0) {
				t.Errorf("a2 health %+v: want one request and no latency sample", st.Health)
			}
		}
	})
}

// TestSideNoEndpoint: a model no endpoint of which can serve the call
// gives ErrNoSideEndpoint before any attempt; an unknown model a 404.
func TestSideNoEndpoint(t *testing.T) {
	o1 := &scripted{id: "o1", format: llm.FormatOpenAI, script: always(reply{body: `{}`})}
	h := newHarness(t, o1)
	e := h.engine(Options{}, h.endpoints("m", "o1")...)
	if _, err := e.Side(context.Background(), countSide("m"), Call{}); !errors.Is(err, ErrNoSideEndpoint) {
		t.Errorf("OpenAI-only model: %v, want ErrNoSideEndpoint", err)
	}
	var ae *llm.APIError
	if _, err := e.Side(context.Background(), countSide("nope"), Call{}); !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("unknown model: %v, want a 404", err)
	}
	if o1.count() != 0 {
		t.Errorf("%d upstream calls, want 0", o1.count())
	}
}

// TestEmbeddingModelsServeSideOnly: an embedding model is listed, served
// by Side calls that name it, and not served as a model call.
func TestEmbeddingModelsServeSideOnly(t *testing.T) {
	o1 := &scripted{id: "o1", format: llm.FormatOpenAI, script: always(reply{body: `{"object":"list"}`})}
	h := newHarness(t, o1)
	eps := h.endpoints("emb", "o1")
	eps[0].Embedding = true
	e := h.engine(Options{}, eps...)
	if ms := e.Models(); len(ms) != 1 || !ms[0].Embedding {
		t.Errorf("models %+v, want emb marked Embedding", ms)
	}
	r := call(t, e, ask(llm.FormatOpenAI, "emb", false))
	if r.err == nil || r.err.Status != 404 {
		t.Errorf("model call to an embedding model: %+v, want a 404", r.err)
	}
	// The 404 says what the name is and where it is served, not that the
	// mesh does not serve it: GET /v1/models lists it.
	if r.err == nil || !strings.Contains(r.err.Message, "embedding model") || !strings.Contains(r.err.Message, "/v1/embeddings") {
		t.Errorf("model call to an embedding model: %+v, want a message naming it an embedding model and /v1/embeddings", r.err)
	}
	s := Side{Kind: "embeddings", Model: "emb", Format: llm.FormatOpenAI, Embedding: true, Latency: true,
		Request: func(ep *provider.Endpoint) (string, []byte) { return ep.PathURL("/embeddings"), []byte(`{}`) },
		Answer:  func([]byte) (llm.Usage, error) { return llm.Usage{InputTokens: 5}, nil }}
	out, err := e.Side(context.Background(), s, Call{})
	if err != nil {
		t.Fatal(err)
	}
	if string(out.Result.Body) != `{"object":"list"}` || out.Record.Usage.InputTokens != 5 || out.Record.Attempts[0].InputTokens != 5 {
		t.Errorf("body %s usage %+v attempts %+v", out.Result.Body, out.Record.Usage, out.Record.Attempts)
	}
	s.Embedding = false
	if _, err := e.Side(context.Background(), s, Call{}); err == nil {
		t.Error("a chat Side call named an embedding model and was served")
	}
}

// TestEmbeddingsCallToChatModelSaysSo: an embeddings call naming a chat
// model the mesh serves is a 404 that says it is a chat model, not that
// the mesh does not serve it (GET /v1/models lists it).
func TestEmbeddingsCallToChatModelSaysSo(t *testing.T) {
	o1 := &scripted{id: "o1", format: llm.FormatOpenAI, script: always(reply{body: `{}`})}
	h := newHarness(t, o1)
	e := h.engine(Options{}, h.endpoints("chat", "o1")...)
	s := Side{Kind: "embeddings", Model: "chat", Format: llm.FormatOpenAI, Embedding: true,
		Request: func(ep *provider.Endpoint) (string, []byte) { return ep.PathURL("/embeddings"), []byte(`{}`) },
		Answer:  func([]byte) (llm.Usage, error) { return llm.Usage{}, nil }}
	var ae *llm.APIError
	_, err := e.Side(context.Background(), s, Call{})
	if !errors.As(err, &ae) || ae.Status != 404 || !strings.Contains(ae.Message, "chat model") || strings.Contains(ae.Message, "not served by this mesh") {
		t.Errorf("embeddings call to a chat model: %v, want a 404 naming it a chat model", err)
	}
	if o1.count() != 0 {
		t.Errorf("%d upstream calls, want 0", o1.count())
	}
}

// TestSidePassthrough: without declared models, a token count goes to the
// Anthropic passthrough provider under the name asked for; with only an
// OpenAI one, no endpoint can count (ErrNoSideEndpoint), not a 404.
func TestSidePassthrough(t *testing.T) {
	a1 := &scripted{id: "a1", format: llm.FormatAnthropic, script: always(reply{body: `{"input_tokens":3}`})}
	o1 := &scripted{id: "o1", format: llm.FormatOpenAI, script: always(reply{body: `{}`})}
	h := newHarness(t, a1, o1)
	pass := func(ids ...string) []*provider.Endpoint {
		var out []*provider.Endpoint
		for _, ep := range h.endpoints("", ids...) {
			ep.ID, ep.Model, ep.UpstreamModel = "", "", ""
			out = append(out, ep)
		}
		return out
	}
	e := h.engine(Options{Passthrough: pass("a1", "o1")})
	out, err := e.Side(context.Background(), countSide("claude-any"), Call{})
	if err != nil || out.Endpoint.UpstreamModel != "claude-any" || a1.lastBody()["model"] != "claude-any" {
		t.Fatalf("passthrough count: %v %+v", err, out)
	}
	e2 := h.engine(Options{Passthrough: pass("o1")})
	if _, err := e2.Side(context.Background(), countSide("gpt-any"), Call{}); !errors.Is(err, ErrNoSideEndpoint) {
		t.Errorf("OpenAI-only passthrough: %v, want ErrNoSideEndpoint", err)
	}
}

// TestSideMalformedAnswerFailsOver: an answer that is not the call's
// (here not JSON) is the endpoint's protocol failure: the call goes on to
// another endpoint and the client gets the good answer.
func TestSideMalformedAnswerFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a1 := &scripted{id: "a1", format: llm.FormatAnthropic, script: always(reply{body: `<html>gateway</html>`})}
		a2 := &scripted{id: "a2", format: llm.FormatAnthropic, script: always(reply{body: `{"input_tokens":9}`})}
		h := newHarness(t, a1, a2)
		e := h.engine(Options{Resilience: Resilience{DisableHedging: true}, Rand: func(int) int { return 0 }}, h.endpoints("m", "a1", "a2")...)
		out, err := e.Side(context.Background(), countSide("m"), Call{})
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Result.Body) != `{"input_tokens":9}` || len(out.Record.Attempts) != 2 || out.Record.Attempts[0].Outcome == "ok" {
			t.Errorf("body %s attempts %+v, want a2's answer after a1's protocol failure", out.Result.Body, out.Record.Attempts)
		}
	})
}
