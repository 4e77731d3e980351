package sim

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

func azureConfig() Config {
	c := ZeroLatency()
	c.Azure = &AzureSpec{
		APIKeys:     []string{"az-key"},
		EntraTokens: []string{"entra-token"},
		Deployments: map[string]string{"gpt4o-prod": "sim-llama"},
	}
	return c
}

// staticCredential is an azcore.TokenCredential giving one token.
type staticCredential string

func (s staticCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(s), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// TestAzureSDK: the openai-go azure package, Azure's official client
// path, reaches the fleet's Azure routes with a key and with an Entra ID
// token, on deployment URLs and on the v1 surface, streaming and not.
func TestAzureSDK(t *testing.T) {
	_, srv := startFleet(t, azureConfig())
	root := srv.URL()
	ctx := context.Background()
	clients := []struct {
		name string
		c    openai.Client
	}{
		{"deployment+key", openai.NewClient(azure.WithEndpoint(root, "2024-10-21"), azure.WithAPIKey("az-key"), azure.WithUnsafeAllowHTTP(), ooption.WithMaxRetries(0))},
		{"deployment+entra", openai.NewClient(azure.WithEndpoint(root, "2024-10-21"), azure.WithTokenCredential(staticCredential("entra-token")), azure.WithUnsafeAllowHTTP(), ooption.WithMaxRetries(0))},
		{"v1+key", openai.NewClient(ooption.WithBaseURL(root+"/openai/v1/"), ooption.WithAPIKey("az-key"), ooption.WithMaxRetries(0))},
	}
	for _, tc := range clients {
		t.Run(tc.name, func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: "gpt4o-prod", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")}}
			resp, err := tc.c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Model != "sim-llama" || resp.Choices[0].Message.Content == "" {
				t.Errorf("answer: model %q, text %q", resp.Model, resp.Choices[0].Message.Content)
			}
			st := tc.c.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for st.Next() {
				acc.AddChunk(st.Current())
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if acc.Choices[0].Message.Content != resp.Choices[0].Message.Content {
				t.Errorf("streamed %q, answered %q", acc.Choices[0].Message.Content, resp.Choices[0].Message.Content)
			}
		})
	}
	t.Run("v1 responses", func(t *testing.T) {
		c := openai.NewClient(ooption.WithBaseURL(root+"/openai/v1/"), ooption.WithHeader("api-key", "az-key"), ooption.WithMaxRetries(0))
		r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt4o-prod", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")}})
		if err != nil {
			t.Fatal(err)
		}
		if r.OutputText() == "" {
			t.Error("empty answer")
		}
	})
}

// TestAzureRefusals: what Azure refuses, the fleet refuses with Azure's
// status and shape.
func TestAzureRefusals(t *testing.T) {
	h := memHarness(mustFleet(t, azureConfig()))
	body := `{"model":"gpt4o-prod","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, path string
		header     http.Header
		status     int
		want       string
	}{
		{"no api-version", "/openai/deployments/gpt4o-prod/chat/completions", http.Header{"Api-Key": {"az-key"}}, 404, `{"error":{"code":"404","message":"Resource not found"}}`},
		{"no key", "/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21", nil, 401, `{"error":{"code":"401","message":"` + azureDenied + `"}}`},
		{"wrong key", "/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21", http.Header{"Api-Key": {"nope"}}, 401, `"code":"401"`},
		{"key as bearer on deployment URL", "/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21", http.Header{"Authorization": {"Bearer az-key"}}, 401, `"code":"401"`},
		{"wrong token", "/openai/v1/chat/completions", http.Header{"Authorization": {"Bearer stale"}}, 401, `"code":"401"`},
		{"unknown deployment", "/openai/deployments/gpt5/chat/completions?api-version=2024-10-21", http.Header{"Api-Key": {"az-key"}}, 404, `"code":"DeploymentNotFound"`},
		{"key as bearer on v1", "/openai/v1/chat/completions", http.Header{"Authorization": {"Bearer az-key"}}, 200, `"model":"sim-llama"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, h.root+tc.path, strings.NewReader(body))
			for k, v := range tc.header {
				req.Header[k] = v
			}
			resp, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
				t.Errorf("got %d %s, want %d with %s", resp.StatusCode, b, tc.status, tc.want)
			}
		})
	}
}

func mustFleet(t *testing.T, c Config) *Fleet {
	t.Helper()
	f, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAzureFaults: the content filter and the rate limit answer as Azure
// does, through the openai-go azure client; the content filter matches
// only Azure's routes.
func TestAzureFaults(t *testing.T) {
	cfg := azureConfig()
	cfg.Faults = []Fault{{Kind: KindContentFilter, Count: 1}, {Kind: KindRateLimit, Model: "sim-haiku", RetryAfter: Duration(1500 * time.Millisecond)}}
	_, srv := startFleet(t, cfg)
	h := harness{client: http.DefaultClient, root: srv.URL()}
	ctx := context.Background()

	// OpenAI's own route: no content filter there.
	resp, err := h.post(ctx, FormatOpenAI, "", chatBody(FormatOpenAI, "sim-llama", "hi", false, ""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("OpenAI route: %d, want 200 (content_filter is Azure's)", resp.StatusCode)
	}

	c := openai.NewClient(azure.WithEndpoint(h.root, "2024-10-21"), azure.WithAPIKey("az-key"), azure.WithUnsafeAllowHTTP(), ooption.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "gpt4o-prod", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	_, err = c.Chat.Completions.New(ctx, params)
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Code != "content_filter" || ae.Param != "prompt" {
		t.Fatalf("content filter: %v", err)
	}
	if raw := ae.RawJSON(); !strings.Contains(raw, `"content_filter_result":{"hate":{"filtered":true,"severity":"high"}`) {
		t.Errorf("content filter body lacks the filter results: %s", raw)
	}

	params.Model = "sim-haiku"
	_, err = c.Chat.Completions.New(ctx, params)
	if !errors.As(err, &ae) || ae.StatusCode != 429 || ae.Code != "429" {
		t.Fatalf("rate limit: %v", err)
	}
	hd := ae.Response.Header
	if hd.Get("Retry-After-Ms") != "1500" || hd.Get("Retry-After") != "2" || hd.Get("X-Ratelimit-Remaining-Requests") != "0" || hd.Get("X-Ratelimit-Remaining-Tokens") == "" {
		t.Errorf("rate-limit headers: %v", hd)
	}
}
