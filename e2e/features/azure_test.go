package features_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/sim"
)

// azureSim is the default fleet serving Azure OpenAI's routes too, with
// one key and the deployment gpt4o-prod of sim-llama.
func azureSim() sim.Config {
	c := sim.ZeroLatency()
	c.Azure = &sim.AzureSpec{APIKeys: []string{"az-secret"}, Deployments: map[string]string{"gpt4o-prod": "sim-llama"}}
	return c
}

// withAzure replaces the config's models by gpt-4o, served by Azure
// OpenAI (deployment URLs in eu-west, the v1 surface in ap-south is not
// declared) and, second, by the fleet's OpenAI API: policy is the
// model's content_filter.
func withAzure(policy string, azureOnly bool) func(*config.Config) {
	return func(cfg *config.Config) {
		base := cfg.Providers[0].BaseURL
		cfg.Providers = append(cfg.Providers, config.Provider{Name: "azure-west", Type: config.TypeAzure,
			BaseURL: base + "/r/eu-west", APIVersion: "2024-10-21", APIKey: "az-secret"})
		m := config.Model{Name: "gpt-4o", ContentFilter: policy, Endpoints: []config.Endpoint{
			{Provider: "azure-west", Region: "westeurope", UpstreamModel: "gpt4o-prod"},
		}}
		if !azureOnly {
			m.Endpoints = append(m.Endpoints, config.Endpoint{Provider: "sim-openai", Region: "us-east", UpstreamModel: "sim-llama", BaseURL: base + "/r/us-east/v1"})
		}
		cfg.Models = []config.Model{m}
		cfg.Aliases = nil
		cfg.ApplyDefaults()
	}
}

const (
	azurePath  = "/r/eu-west/openai/deployments/gpt4o-prod/chat/completions"
	openaiPath = "/r/us-east/v1/chat/completions"
)

// TestAzureThroughSDKs: the official Go SDKs, both client formats,
// streamed and not, reach GPT on Azure OpenAI (deployment URL, api-version,
// api-key checked by the simulator) through Keel, and get the answer the
// model gives.
func TestAzureThroughSDKs(t *testing.T) {
	e := newEnv(t, azureSim(), withAzure("", true))
	ctx := context.Background()
	want := sim.Answer(e.simCfg, userText("sim-llama", "Tell me about keels.", 256))
	for mode, c := range anthropicClients(e) {
		params := anthropic.MessageNewParams{Model: "gpt-4o", MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about keels."))}}
		t.Run("anthropic/"+mode, func(t *testing.T) {
			msg, err := c.Messages.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != want.Text() {
				t.Fatalf("content = %+v, want %q", msg.Content, want.Text())
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
			if acc.ID == "" || acc.Model == "" {
				t.Errorf("streamed message id %q model %q: want the answer's, not Azure's prompt-filter chunk's", acc.ID, acc.Model)
			}
		})
	}
	for mode, c := range openaiClients(e) {
		params := openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(256),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about keels.")}}
		t.Run("openai/"+mode, func(t *testing.T) {
			resp, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Choices[0].Message.Content != want.Text() {
				t.Fatalf("content = %q, want %q", resp.Choices[0].Message.Content, want.Text())
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
			// Azure's first chunk (the prompt's filter results) has an
			// empty id and model: not the answer's.
			if acc.ID == "" || acc.Model == "" {
				t.Errorf("streamed answer id %q model %q: want the answer's", acc.ID, acc.Model)
			}
		})
	}
	resp, _ := e.post(t, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Mesh-Provider") != "azure-west" {
		t.Errorf("status %d, X-Mesh-Provider %q; want 200 from azure-west", resp.StatusCode, resp.Header.Get("X-Mesh-Provider"))
	}
	h := e.rec.last()
	if h.Get("Api-Key") != "az-secret" || h.Get("Authorization") != "" {
		t.Errorf("upstream auth headers: api-key %q, authorization %q; want the key in api-key only", h.Get("Api-Key"), h.Get("Authorization"))
	}
}

// TestAzureContentFilter: a prompt Azure's content filter refuses reaches
// each client as an error in its own format, naming the filter, and is
// not sent to the model's other endpoint; with content_filter: fallback
// it is, and the other endpoint answers.
func TestAzureContentFilter(t *testing.T) {
	for _, tc := range []struct {
		policy       string
		wantAzure    int
		wantOpenAI   int
		wantFiltered bool
	}{
		{policy: "", wantAzure: 1, wantOpenAI: 0, wantFiltered: true},
		{policy: "fail", wantAzure: 1, wantOpenAI: 0, wantFiltered: true},
		{policy: "fallback", wantAzure: 1, wantOpenAI: 1},
	} {
		for _, client := range []string{"anthropic", "openai"} {
			t.Run(tc.policy+"/"+client, func(t *testing.T) {
				sc := azureSim()
				sc.Faults = []sim.Fault{{Kind: sim.KindContentFilter}}
				e := newEnv(t, sc, withAzure(tc.policy, false))
				ctx := context.Background()
				var err error
				// Azure first: the region preference picks it.
				const prefer = `{"preferred_region":"westeurope"}`
				if client == "anthropic" {
					c := anthropicClients(e)["proxy"]
					_, err = c.Messages.New(ctx, anthropic.MessageNewParams{Model: "gpt-4o", MaxTokens: 64,
						Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Something hateful."))}},
						aoption.WithHeader("X-Mesh-Behavior", prefer))
				} else {
					c := openaiClients(e)["proxy"]
					_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o",
						Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Something hateful.")}},
						ooption.WithHeader("X-Mesh-Behavior", prefer))
				}
				if got := e.rec.countPath(azurePath); got != tc.wantAzure {
					t.Errorf("attempts on Azure: %d, want %d", got, tc.wantAzure)
				}
				if got := e.rec.countPath(openaiPath); got != tc.wantOpenAI {
					t.Errorf("attempts on OpenAI: %d, want %d", got, tc.wantOpenAI)
				}
				if !tc.wantFiltered {
					if err != nil {
						t.Fatalf("fallback: %v", err)
					}
					return
				}
				const named = "content filter: hate severity high"
				switch client {
				case "anthropic":
					var ae *anthropic.Error
					if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), `"type":"invalid_request_error"`) || !strings.Contains(ae.RawJSON(), named) {
						t.Fatalf("anthropic client: %v", err)
					}
				case "openai":
					var oe *openai.Error
					if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Code != "content_filter" || !strings.Contains(oe.Message, named) {
						t.Fatalf("openai client: %v", err)
					}
				}
			})
		}
	}
}

// TestAzureV1Responses: an azure provider on the v1 surface with api:
// responses (POST /openai/v1/responses, the deployment as model, no
// api-version) serves both client formats through Keel.
func TestAzureV1Responses(t *testing.T) {
	e := newEnv(t, azureSim(), func(cfg *config.Config) {
		base := cfg.Providers[0].BaseURL
		cfg.Providers = append(cfg.Providers, config.Provider{Name: "azure-v1", Type: config.TypeAzure, API: config.APIResponses,
			BaseURL: base + "/r/eu-west/openai/v1", APIKey: "az-secret"})
		cfg.Models = []config.Model{{Name: "gpt-4o", Endpoints: []config.Endpoint{{Provider: "azure-v1", Region: "westeurope", UpstreamModel: "gpt4o-prod"}}}}
		cfg.Aliases = nil
		cfg.ApplyDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	want := sim.Answer(e.simCfg, userText("sim-llama", "Tell me about keels.", 256))
	a := anthropicClients(e)["proxy"]
	msg, err := a.Messages.New(ctx, anthropic.MessageNewParams{Model: "gpt-4o", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about keels."))}})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != want.Text() {
		t.Fatalf("anthropic: %+v, want %q", msg.Content, want.Text())
	}
	o := openaiClients(e)["proxy"]
	st := o.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", MaxTokens: openai.Int(256),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about keels.")}})
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil || acc.Choices[0].Message.Content != want.Text() {
		t.Fatalf("openai stream: %v %q", err, acc.Choices[0].Message.Content)
	}
	if n := e.rec.countPath("/r/eu-west/openai/v1/responses"); n != 2 {
		t.Errorf("%d calls to the v1 responses route, want 2", n)
	}
	if h := e.rec.last(); h.Get("Api-Key") != "az-secret" {
		t.Errorf("upstream auth: %v", h)
	}
}
