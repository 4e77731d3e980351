package features_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// geminiSim is the default fleet serving the Gemini API too, with one key.
func geminiSim() sim.Config {
	c := sim.ZeroLatency()
	c.Gemini = &sim.GeminiSpec{APIKeys: []string{"g-secret"}}
	return c
}

// withGemini replaces the config's models by gemini-flash, served by the
// Gemini API (the fleet's sim-sonnet in us-east).
func withGemini(cfg *config.Config) {
	base := cfg.Providers[0].BaseURL
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "google", Type: config.TypeGemini, BaseURL: base + "/r/us-east", APIKey: "g-secret"})
	cfg.Models = []config.Model{{Name: "gemini-flash", Endpoints: []config.Endpoint{{Provider: "google", Region: "us-central", UpstreamModel: "sim-sonnet"}}}}
	cfg.Aliases = nil
	cfg.ApplyDefaults()
}

// TestGeminiThroughSDKs: the official Go SDKs, both client formats,
// streamed and not, reach a model on the Gemini API (generateContent,
// streamGenerateContent?alt=sse, x-goog-api-key checked by the
// simulator) through Keel, with the model's answer and usage; tools
// round-trip as function calls.
func TestGeminiThroughSDKs(t *testing.T) {
	e := newEnv(t, geminiSim(), withGemini)
	ctx := context.Background()
	want := sim.Answer(e.simCfg, userText("sim-sonnet", "Tell me about keels.", 256))
	for mode, c := range anthropicClients(e) {
		params := anthropic.MessageNewParams{Model: "gemini-flash", MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about keels."))}}
		t.Run("anthropic/"+mode, func(t *testing.T) {
			msg, err := c.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != want.Text() {
				t.Fatalf("content = %+v, want %q", msg.Content, want.Text())
			}
			if msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens != int64(want.Usage.OutputTokens) || msg.Usage.InputTokens != int64(want.Usage.InputTokens) {
				t.Errorf("stop %q usage %+v, want end_turn %+v", msg.StopReason, msg.Usage, want.Usage)
			}
			st := c.Messages.NewStreaming(ctx, params)
			var acc anthropic.Message
			for st.Next() {
				if err := acc.Accumulate(st.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Content) != 1 || acc.Content[0].Text != want.Text() || acc.Usage.OutputTokens != int64(want.Usage.OutputTokens) {
				t.Fatalf("streamed %+v (usage %+v), want %q", acc.Content, acc.Usage, want.Text())
			}
		})
	}
	for mode, c := range openaiClients(e) {
		params := openai.ChatCompletionNewParams{Model: "gemini-flash", MaxTokens: openai.Int(256),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about keels.")}}
		t.Run("openai/"+mode, func(t *testing.T) {
			resp, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].Message.Content != want.Text() || resp.Choices[0].FinishReason != "stop" {
				t.Fatalf("content %q finish %q, want %q", resp.Choices[0].Message.Content, resp.Choices[0].FinishReason, want.Text())
			}
			if resp.Usage.CompletionTokens != int64(want.Usage.OutputTokens) {
				t.Errorf("usage %+v, want %d completion tokens", resp.Usage, want.Usage.OutputTokens)
			}
			st := c.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for st.Next() {
				acc.AddChunk(st.Current())
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Choices[0].Message.Content != want.Text() {
				t.Fatalf("streamed %q, want %q", acc.Choices[0].Message.Content, want.Text())
			}
		})
	}
	t.Run("tools", func(t *testing.T) {
		c := anthropicClients(e)["proxy"]
		var props map[string]any
		json.Unmarshal([]byte(`{"city":{"type":"string"}}`), &props)
		tools := []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Weather for a city"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: props, Required: []string{"city"}}}}}
		msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please use get_weather for Paris."))}
		msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "gemini-flash", MaxTokens: 256, Tools: tools, Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		var call *anthropic.ToolUseBlock
		for _, b := range msg.Content {
			if tu, ok := b.AsAny().(anthropic.ToolUseBlock); ok {
				call = &tu
			}
		}
		if call == nil || call.Name != "get_weather" || call.ID == "" || msg.StopReason != anthropic.StopReasonToolUse {
			t.Fatalf("answer %+v: want a get_weather call", msg.Content)
		}
		msgs = append(msgs, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, "18°C and sunny", false)))
		msg, err = c.Messages.New(ctx, anthropic.MessageNewParams{Model: "gemini-flash", MaxTokens: 256, Tools: tools, Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		if msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) == 0 {
			t.Errorf("after the tool result: stop %q content %+v", msg.StopReason, msg.Content)
		}
	})
	if h := e.rec.last(); h.Get("X-Goog-Api-Key") != "g-secret" || h.Get("Authorization") != "" {
		t.Errorf("upstream auth: x-goog-api-key %q, authorization %q", h.Get("X-Goog-Api-Key"), h.Get("Authorization"))
	}
}

// TestGeminiErrors: the Gemini API's refusals reach each client as
// errors in its own format: a blocked prompt (promptFeedback.blockReason)
// as a 400 naming it, a wrong key as Google's 400.
func TestGeminiErrors(t *testing.T) {
	sc := geminiSim()
	sc.Faults = []sim.Fault{{Kind: sim.KindContentFilter, Count: 1}}
	e := newEnv(t, sc, withGemini)
	ctx := context.Background()
	c := openaiClients(e)["proxy"]
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gemini-flash",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Something hateful.")}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Code != "content_filter" || !strings.Contains(oe.Message, "blockReason SAFETY") {
		t.Fatalf("blocked prompt: %v", err)
	}
	if n := e.rec.count(); n != 1 {
		t.Errorf("%d upstream attempts, want 1", n)
	}

	// Streamed, the block is the stream's only event: the client gets
	// the same refusal before any byte of a stream, and no other attempt.
	sb := geminiSim()
	sb.Faults = []sim.Fault{{Kind: sim.KindContentFilter, Count: 1}}
	es := newEnv(t, sb, withGemini)
	resp, b := es.post(t, "/v1/messages", `{"model":"gemini-flash","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"Something hateful."}]}`,
		"anthropic-version", "2023-06-01")
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"type":"invalid_request_error"`) || !strings.Contains(string(b), `"error_code":"content_filter"`) {
		t.Errorf("streamed blocked prompt: %d %s", resp.StatusCode, b)
	}
	if n := es.rec.count(); n != 1 {
		t.Errorf("streamed: %d upstream attempts, want 1", n)
	}

	e2 := newEnv(t, geminiSim(), withGemini, func(cfg *config.Config) { cfg.Providers[len(cfg.Providers)-1].APIKey = "wrong" })
	a := anthropicClients(e2)["proxy"]
	_, err = a.Messages.New(ctx, anthropic.MessageNewParams{Model: "gemini-flash", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), "API key not valid") {
		t.Fatalf("wrong key: %v", err)
	}
}

// TestGeminiRateLimitFailsOver: a Gemini endpoint answering 429
// RESOURCE_EXHAUSTED with a RetryInfo delay (no retry-after header, as
// the Gemini API sends it) is left alone for that delay while the
// model's other endpoint serves: no client error, one attempt on the
// limited endpoint.
func TestGeminiRateLimitFailsOver(t *testing.T) {
	sc := geminiSim()
	sc.Faults = []sim.Fault{{Kind: sim.KindRateLimit, Region: "us-east", RetryAfter: sim.Duration(30e9)}}
	e := newEnv(t, sc, func(cfg *config.Config) {
		withGemini(cfg)
		base := cfg.Providers[0].BaseURL
		cfg.Models[0].Endpoints = append(cfg.Models[0].Endpoints, config.Endpoint{Provider: "google", Region: "europe-west", UpstreamModel: "sim-sonnet", BaseURL: base + "/r/eu-west"})
		cfg.ApplyDefaults()
	})
	const limited = "/r/us-east/v1beta/models/sim-sonnet:generateContent"
	for i := range 6 {
		resp, b := e.post(t, "/v1/chat/completions", `{"model":"gemini-flash","messages":[{"role":"user","content":"hi"}]}`,
			"X-Mesh-Behavior", `{"preferred_region":"us-central"}`)
		if resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, b)
		}
	}
	if n := e.rec.countPath(limited); n != 1 {
		t.Errorf("%d attempts on the rate-limited endpoint within its RetryInfo delay, want 1", n)
	}
}

// TestGeminiOnVertexThroughSDKs: both Go SDKs, streamed and not, reach
// Gemini on Vertex AI (publishers/google/models/…:generateContent and
// :streamGenerateContent?alt=sse) through Keel, with an OAuth2 token the
// simulator's token endpoint issued for a service account's signed JWT
// and its Vertex front checks; an expired or foreign token is refused
// there (sim tests of the Vertex front).
func TestGeminiOnVertexThroughSDKs(t *testing.T) {
	sc := sim.ZeroLatency()
	cl, err := simfleet.AddClouds(&sc, "sim-sonnet", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, sc, func(cfg *config.Config) {
		base := cfg.Providers[0].BaseURL
		sa, err := cl.WriteServiceAccount(base)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Providers = append(cfg.Providers, config.Provider{Name: "gemini-vertex", Type: config.TypeGemini, BaseURL: base + "/r/" + simfleet.VertexRegion,
			Vertex: &config.Vertex{Project: "sim-project", Region: "us-central1", CredentialsFile: sa}})
		cfg.Models = []config.Model{{Name: "gemini-flash", Endpoints: []config.Endpoint{{Provider: "gemini-vertex", Region: "us-central1", UpstreamModel: "sim-sonnet"}}}}
		cfg.Aliases = nil
		cfg.ApplyDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	if err := e.mesh.CheckCredentials(ctx); err != nil {
		t.Fatal(err)
	}
	want := sim.Answer(e.simCfg, userText("sim-sonnet", "Tell me about keels.", 256))
	a := anthropicClients(e)["proxy"]
	params := anthropic.MessageNewParams{Model: "gemini-flash", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about keels."))}}
	msg, err := a.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != want.Text() {
		t.Fatalf("anthropic: %+v, want %q", msg.Content, want.Text())
	}
	st := a.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil || len(acc.Content) != 1 || acc.Content[0].Text != want.Text() {
		t.Fatalf("anthropic stream: %v %+v", err, acc.Content)
	}
	o := openaiClients(e)["embedded"]
	oparams := openai.ChatCompletionNewParams{Model: "gemini-flash", MaxTokens: openai.Int(256),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about keels.")}}
	resp, err := o.Chat.Completions.New(ctx, oparams)
	if err != nil || resp.Choices[0].Message.Content != want.Text() {
		t.Fatalf("openai: %v %+v", err, resp)
	}
	ost := o.Chat.Completions.NewStreaming(ctx, oparams)
	var oacc openai.ChatCompletionAccumulator
	for ost.Next() {
		oacc.AddChunk(ost.Current())
	}
	if err := ost.Err(); err != nil || oacc.Choices[0].Message.Content != want.Text() {
		t.Fatalf("openai stream: %v %q", err, oacc.Choices[0].Message.Content)
	}
	if n := e.rec.countPath("/r/vertex/v1/projects/sim-project/locations/us-central1/publishers/google/models/sim-sonnet:generateContent"); n != 2 {
		t.Errorf("%d generateContent calls on Vertex, want 2", n)
	}
	if h := e.rec.last(); !strings.HasPrefix(h.Get("Authorization"), "Bearer ") || h.Get("X-Goog-Api-Key") != "" {
		t.Errorf("upstream auth: %v", h)
	}
}
