package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/keelmesh/keel/internal/llm"
	wanthropic "github.com/keelmesh/keel/internal/wire/anthropic"
)

// TestCountTokensMatchesUsage: count_tokens, through anthropic-sdk-go,
// answers the input_tokens the same request's answer reports in its
// usage, as Anthropic's does; in every region, with ?beta=true too.
func TestCountTokensMatchesUsage(t *testing.T) {
	f, srv := startFleet(t, ZeroLatency())
	ctx := context.Background()
	msgs := []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("What is the capital of France and why?")),
		anthropic.NewAssistantMessage(anthropic.NewTextBlock("Paris")),
	}
	system := []anthropic.TextBlockParam{{Text: "You are a terse geographer."}}
	tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "lookup", Description: anthropic.String("Look a city up"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}
	for _, region := range []string{"", "eu-west"} {
		c := anthropicClient(srv.BaseURL(region, FormatAnthropic))
		msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "sim-sonnet", MaxTokens: 64, Messages: msgs, System: system, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "sim-sonnet", Messages: msgs,
			System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: system},
			Tools:  []anthropic.MessageCountTokensToolUnionParam{{OfTool: tools[0].OfTool}}})
		if err != nil {
			t.Fatal(err)
		}
		if n.InputTokens != msg.Usage.InputTokens || n.InputTokens == 0 {
			t.Errorf("region %q: count_tokens %d, usage input_tokens %d", region, n.InputTokens, msg.Usage.InputTokens)
		}
		bn, err := c.Beta.Messages.CountTokens(ctx, anthropic.BetaMessageCountTokensParams{Model: "sim-sonnet",
			Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("What is the capital of France and why?"))}})
		if err != nil {
			t.Fatal(err)
		}
		want := CountTokens(&llm.Request{Model: "sim-sonnet", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "What is the capital of France and why?"}}}}})
		if int(bn.InputTokens) != want {
			t.Errorf("region %q: beta count_tokens %d, want %d", region, bn.InputTokens, want)
		}
	}
	f.SetRegionDown("eu-west", true)
	down := anthropicClient(srv.BaseURL("eu-west", FormatAnthropic))
	_, err := down.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "sim-sonnet", Messages: msgs[:1]})
	if err == nil {
		t.Fatal("count_tokens in a region that is down answered")
	}
}

// TestCountTokensRefusals: what Anthropic's count_tokens refuses, in its
// error shape.
// countRefusals are count_tokens bodies Anthropic refuses, and how.
var countRefusals = []struct {
	name, path, body string
	status           int
	msg              string
}{
	{name: "max_tokens is extra", path: "/v1/messages/count_tokens", body: `{"model":"sim-sonnet","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
		status: 400, msg: "max_tokens: Extra inputs are not permitted"},
	{name: "stream is extra", path: "/v1/messages/count_tokens", body: `{"model":"sim-sonnet","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		status: 400, msg: "stream: Extra inputs are not permitted"},
	{name: "no messages", path: "/v1/messages/count_tokens", body: `{"model":"sim-sonnet"}`, status: 400, msg: "messages: field required"},
	{name: "openai-only model", path: "/v1/messages/count_tokens", body: `{"model":"sim-llama","messages":[{"role":"user","content":"hi"}]}`,
		status: 404, msg: "model: sim-llama not found"},
	{name: "region without the model", path: "/r/ap-south/v1/messages/count_tokens", body: `{"model":"sim-llama","messages":[{"role":"user","content":"hi"}]}`,
		status: 404, msg: "not found"},
}

func TestCountTokensRefusals(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range countRefusals {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			f.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body)))
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			if w.Code != tc.status || e.Type != "error" || !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("%d %s, want %d with %q", w.Code, w.Body, tc.status, tc.msg)
			}
		})
	}
}

// TestEmbeddingsEveryRegion: each region serves the embeddings API, the
// vectors equal Embed's; a region that is down answers nothing, an
// unknown one is a 404.
func TestEmbeddingsEveryRegion(t *testing.T) {
	f, srv := startFleet(t, ZeroLatency())
	ctx := context.Background()
	want := Embed("keels and hulls", 1536)
	for _, region := range []string{"us-east", "eu-west", "ap-south"} {
		c := openaiClient(srv.BaseURL(region, FormatOpenAI))
		res, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: openai.EmbeddingModelTextEmbedding3Small, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("keels and hulls")}})
		if err != nil {
			t.Fatalf("region %s: %v", region, err)
		}
		for i, x := range res.Data[0].Embedding {
			if float32(x) != want[i] {
				t.Fatalf("region %s: [%d] = %v, want %v", region, i, x, want[i])
			}
		}
	}
	f.SetRegionDown("eu-west", true)
	down := openaiClient(srv.BaseURL("eu-west", FormatOpenAI))
	_, err := down.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: openai.EmbeddingModelTextEmbedding3Small, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	var ae *openai.Error
	if err == nil || errors.As(err, &ae) {
		t.Fatalf("region down: %v, want a connection error", err)
	}
	mars := openaiClient(srv.BaseURL("mars", FormatOpenAI))
	_, err = mars.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: openai.EmbeddingModelTextEmbedding3Small, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown region: %v, want a 404", err)
	}
}

// FuzzCountTokens checks the count_tokens route never panics, answers a
// count or an Anthropic-shaped 4xx, and that a count is CountTokens of the
// request.
func FuzzCountTokens(f *testing.F) {
	f.Add(`{"model":"sim-sonnet","messages":[{"role":"user","content":"hi there"}],"system":"s"}`)
	for _, tc := range countRefusals {
		f.Add(tc.body)
	}
	fleet, err := New(ZeroLatency())
	if err != nil {
		f.Fatal(err)
	}
	h := fleet.Handler()
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/messages/count_tokens", strings.NewReader(body)))
		if w.Code != http.StatusOK {
			var e struct {
				Type  string                `json:"type"`
				Error struct{ Type string } `json:"error"`
			}
			if w.Code < 400 || w.Code > 499 || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Type != "error" || e.Error.Type == "" {
				t.Fatalf("%q: %d %s", body, w.Code, w.Body)
			}
			return
		}
		var got struct {
			InputTokens int `json:"input_tokens"`
		}
		req, err := wanthropic.ParseCountTokens([]byte(body))
		if err != nil || json.Unmarshal(w.Body.Bytes(), &got) != nil || got.InputTokens != CountTokens(req) {
			t.Fatalf("%q: counted %s, want %d (%v)", body, w.Body, CountTokens(req), err)
		}
	})
}
