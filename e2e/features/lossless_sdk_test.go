package features_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/sim"
)

// Must show (issue 25), through the official Anthropic Go SDK: a PDF
// document block is never dropped silently. To a model served only by an
// OpenAI-format endpoint it is a 400 naming the block; to an alias that
// also has a model behind an Anthropic endpoint it is served there, whole;
// with translation: drop it is dropped and named in X-Mesh-Dropped.
func TestPDFDocumentIsNeverLostSilently(t *testing.T) {
	pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"))
	ask := func(t *testing.T, e *env, model string) (*anthropic.Message, *http.Response, error) {
		c := anthropic.NewClient(aoption.WithBaseURL(e.proxy.URL), aoption.WithAPIKey("client-key"),
			aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry(), aoption.WithMaxRetries(0))
		var raw *http.Response
		msg, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
				anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: pdf}),
				anthropic.NewTextBlock("Summarise this contract."))},
		}, aoption.WithResponseInto(&raw))
		return msg, raw, err
	}
	withReader := func(c *config.Config) {
		c.Aliases = append(c.Aliases, config.Alias{Name: "reader", Models: []string{"sim-llama", "sim-claude"}, Strategy: config.StrategyOrdered})
	}

	t.Run("openai-format-only model: 400 naming the block", func(t *testing.T) {
		e := newEnv(t, sim.ZeroLatency(), withReader)
		_, raw, err := ask(t, e, "sim-llama")
		var ae *anthropic.Error
		if !errors.As(err, &ae) {
			t.Fatalf("err %v, want an *anthropic.Error", err)
		}
		if ae.StatusCode != http.StatusBadRequest || !strings.Contains(ae.RawJSON(), "document_block") || !strings.Contains(ae.RawJSON(), `"invalid_request_error"`) {
			t.Errorf("status %d body %s, want a 400 invalid_request_error naming document_block", ae.StatusCode, ae.RawJSON())
		}
		if raw != nil && raw.Header.Get("X-Mesh-Dropped") != "" {
			t.Errorf("X-Mesh-Dropped %q on a refusal", raw.Header.Get("X-Mesh-Dropped"))
		}
	})
	t.Run("alias with an anthropic endpoint: served there", func(t *testing.T) {
		e := newEnv(t, sim.ZeroLatency(), withReader)
		msg, raw, err := ask(t, e, "reader")
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) == 0 || msg.Content[0].Text == "" {
			t.Fatalf("empty answer %+v", msg)
		}
		if got := raw.Header.Get("X-Mesh-Model"); got != "sim-claude" {
			t.Errorf("served by %q, want sim-claude (the alias's model that can read the document)", got)
		}
		if d := raw.Header.Get("X-Mesh-Dropped"); d != "" {
			t.Errorf("X-Mesh-Dropped %q, want nothing lost", d)
		}
	})
	t.Run("translation drop: dropped and named", func(t *testing.T) {
		e := newEnv(t, sim.ZeroLatency(), func(c *config.Config) {
			for i := range c.Models {
				if c.Models[i].Name == "sim-llama" {
					c.Models[i].Translation = "drop"
				}
			}
		})
		_, raw, err := ask(t, e, "sim-llama")
		if err != nil {
			t.Fatal(err)
		}
		if d := raw.Header.Get("X-Mesh-Dropped"); d != "document_block" {
			t.Errorf("X-Mesh-Dropped %q, want document_block", d)
		}
	})
}
