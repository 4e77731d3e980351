package features_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/sim"
)

// Must show (issue 25): Keel's own errors speak each client's format as
// its SDK reads them. An unknown model through openai-go is OpenAI's 404
// invalid_request_error with code model_not_found (PROTOCOLS.md §6.1),
// through the Anthropic SDK Anthropic's 404 not_found_error.
func TestUnknownModelErrorsThroughSDKs(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	ctx := context.Background()
	for mode, c := range openaiClients(e) {
		t.Run("openai/"+mode, func(t *testing.T) {
			_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model:    "gpt-9-nonexistent",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			var ae *openai.Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T), want *openai.Error", err, err)
			}
			if ae.StatusCode != http.StatusNotFound || ae.Code != "model_not_found" || ae.Type != "invalid_request_error" {
				t.Errorf("status %d type %q code %q, want 404 invalid_request_error model_not_found", ae.StatusCode, ae.Type, ae.Code)
			}
		})
	}
	for mode, c := range anthropicClients(e) {
		t.Run("anthropic/"+mode, func(t *testing.T) {
			_, err := c.Messages.New(ctx, anthropic.MessageNewParams{
				Model: "claude-nonexistent", MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			})
			var ae *anthropic.Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T), want *anthropic.Error", err, err)
			}
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type string `json:"type"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(ae.RawJSON()), &body); err != nil {
				t.Fatalf("%v: %s", err, ae.RawJSON())
			}
			if ae.StatusCode != http.StatusNotFound || body.Type != "error" || body.Error.Type != "not_found_error" {
				t.Errorf("status %d body %s, want 404 not_found_error", ae.StatusCode, ae.RawJSON())
			}
		})
	}
}

// Must show (issue 25): an error Keel answers after trying upstreams says
// what it tried: X-Mesh-Attempts, and the model, region and provider of the
// last attempt, and what it dropped from the request (X-Mesh-Dropped).
func TestErrorsCarryTheAttemptsHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.ZeroLatency()
		simCfg.Faults = []sim.Fault{{Kind: sim.KindServerError, Model: "sim-haiku", Status: 500, Rate: 1}}
		s := newSimMesh(t, simCfg, nil)
		defer s.mesh.Close()
		r := s.call(t, "/v1/messages", msgBody("sim-haiku", "hello", `,"temperature":0.5`), "anthropic-version", "2026-10-21")
		if r.status < 500 {
			t.Fatalf("status %d, want a 5xx: %s", r.status, r.body)
		}
		h := r.header
		if h.Get("X-Mesh-Attempts") == "" || h.Get("X-Mesh-Attempts") == "0" {
			t.Errorf("X-Mesh-Attempts %q, want the attempts made", h.Get("X-Mesh-Attempts"))
		}
		if h.Get("X-Mesh-Model") != "sim-haiku" || h.Get("X-Mesh-Provider") == "" || h.Get("X-Mesh-Region") == "" {
			t.Errorf("model %q provider %q region %q, want the last attempt's", h.Get("X-Mesh-Model"), h.Get("X-Mesh-Provider"), h.Get("X-Mesh-Region"))
		}
		if h.Get("X-Mesh-Dropped") != "temperature" {
			t.Errorf("X-Mesh-Dropped %q, want temperature", h.Get("X-Mesh-Dropped"))
		}
		if !strings.Contains(string(r.body), `"mesh_error_code"`) {
			t.Errorf("body %s has no mesh_error_code", r.body)
		}
	})
}

// Must show (issue 25), end to end: under the 2026-10-21 header of the
// current Anthropic SDKs, an Anthropic-format server that is not
// Anthropic's API keeps the client's temperature (Keel sends it the
// version it speaks, 2023-06-01; the simulator, like Anthropic's API,
// would refuse temperature under 2026-10-21), while a provider declared
// to speak the client's version, as Anthropic's API does, has it dropped
// and named.
func TestTemperatureKeptForAnAnthropicFormatServer(t *testing.T) {
	for _, tc := range []struct {
		name, declared, dropped string
	}{
		{name: "a server that is not Anthropic's API", declared: ""},
		{name: "a provider speaking the client's version", declared: "client", dropped: "temperature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSimMesh(t, sim.ZeroLatency(), func(c *config.Config) {
					for i := range c.Providers {
						if c.Providers[i].Type == "anthropic" {
							c.Providers[i].AnthropicVersion = tc.declared
						}
					}
				})
				defer s.mesh.Close()
				r := s.call(t, "/v1/messages", msgBody("sim-haiku", "hello", `,"temperature":0`), "anthropic-version", "2026-10-21")
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				if got := r.header.Get("X-Mesh-Dropped"); got != tc.dropped {
					t.Errorf("X-Mesh-Dropped %q, want %q", got, tc.dropped)
				}
			})
		})
	}
}
