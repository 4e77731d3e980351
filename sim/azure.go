package sim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/azure"
)

// AzureSpec makes the fleet serve Azure OpenAI's routes beside its own,
// with Azure's URLs, authentication and errors
// (learn.microsoft.com/azure/ai-foundry/openai/reference and
// …/openai/api-version-lifecycle):
//
//	POST /openai/deployments/{deployment}/chat/completions?api-version=…
//	POST /openai/responses?api-version=…          (deployment in model)
//	POST /openai/v1/chat/completions               (deployment in model)
//	POST /openai/v1/responses
//
// each also under /r/{region}. The bodies are OpenAI's.
type AzureSpec struct {
	// APIKeys are the resource keys the api-key header may carry (the v1
	// surface also takes one as Authorization: Bearer, as the OpenAI
	// client sends it). At least one of APIKeys and EntraTokens is
	// required: Azure refuses an unauthenticated call with 401.
	APIKeys []string `json:"api_keys,omitempty"`
	// EntraTokens are the Microsoft Entra ID access tokens Authorization:
	// Bearer may carry.
	EntraTokens []string `json:"entra_tokens,omitempty"`
	// Deployments maps a deployment name to the fleet model it serves; a
	// name not listed serves the model of that name, if any, and is
	// otherwise a 404 DeploymentNotFound.
	Deployments map[string]string `json:"deployments,omitempty"`
}

// Azure's fixed error messages: a bad or missing key
// (learn.microsoft.com/azure/ai-foundry/openai/reference, "Authentication"),
// a deployment URL without api-version (a 404, as the openai-go azure
// package's WithEndpoint warns and openclaw/openclaw#46676 shows), an
// unknown deployment.
const (
	azureDenied         = "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."
	azureNotFound       = "Resource not found"
	azureNoDeployment   = "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."
	azureDeploymentCode = "DeploymentNotFound"
)

// The Azure flavours of the OpenAI codecs: Azure's error shape.
var (
	azureChatCodec      = azureFlavour(openaiCodec)
	azureResponsesCodec = azureFlavour(responsesCodec)
)

func azureFlavour(c *codec) *codec {
	a := *c
	a.encodeError = azure.EncodeError
	a.azure = true
	if c == openaiCodec {
		next := c.stream
		a.stream = func(w *sse.Writer, r *llm.Request) eventWriter {
			return &promptFilterFirst{w: w, next: next(w, r)}
		}
	}
	return &a
}

// azurePromptFilterChunk is the chunk an Azure OpenAI chat stream starts
// with: the prompt's content filter results, no choices, and an empty id,
// model and object (learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter,
// "Streaming"; what OpenAI-compatible readers must not take for the
// answer's id and model).
const azurePromptFilterChunk = `{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]}`

// promptFilterFirst writes azurePromptFilterChunk before a stream's
// first event.
type promptFilterFirst struct {
	w    *sse.Writer
	next eventWriter
	sent bool
}

func (p *promptFilterFirst) Write(ev *llm.Event) error {
	if !p.sent {
		p.sent = true
		if err := p.w.WriteEvent("", []byte(azurePromptFilterChunk)); err != nil {
			return err
		}
	}
	return p.next.Write(ev)
}

// routeCall is what a provider's own route tells serveAPI: on Azure's,
// the deployment its URL names ("" when the body's model names it); on
// the Gemini API's, the model and whether the call streams, which its URL
// names and its body does not.
type routeCall struct {
	azure      bool
	deployment string
	gemini     bool
	model      string
	stream     bool
}

// serveAzure checks an Azure call's api-version and credentials and
// serves it as the fleet's model call.
func (f *Fleet) serveAzure(c *codec, v1, prefixed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		az := f.cfg.Azure
		if az == nil {
			writeAPIError(w, c, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, Message: azureNotFound})
			return
		}
		if !v1 && r.URL.Query().Get("api-version") == "" {
			writeAPIError(w, c, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, Message: azureNotFound})
			return
		}
		if !az.authorized(r, v1) {
			writeAPIError(w, c, &llm.APIError{Status: http.StatusUnauthorized, Type: llm.ErrAuthentication, Message: azureDenied})
			return
		}
		region := ""
		if prefixed {
			region = r.PathValue("region")
		}
		f.serveAPI(w, r, region, c, &routeCall{azure: true, deployment: r.PathValue("deployment")})
	}
}

// authorized: the api-key header holds a key, or Authorization: Bearer
// an Entra ID token (or, on the v1 surface, a key).
func (az *AzureSpec) authorized(r *http.Request, v1 bool) bool {
	if k := r.Header.Get("Api-Key"); k != "" {
		return slices.Contains(az.APIKeys, k)
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return false
	}
	return slices.Contains(az.EntraTokens, tok) || v1 && slices.Contains(az.APIKeys, tok)
}

// deploymentModel is the fleet model deployment name serves, "" if none.
func (f *Fleet) deploymentModel(name string) string {
	if m, ok := f.cfg.Azure.Deployments[name]; ok {
		return m
	}
	if f.models[name] != nil {
		return name
	}
	return ""
}

// azureModel sets req's model to the one its deployment serves, or
// returns Azure's 404.
func (f *Fleet) azureModel(a *routeCall, req *llm.Request) *llm.APIError {
	name := a.deployment
	if name == "" {
		name = req.Model
	}
	m := f.deploymentModel(name)
	if m == "" {
		return &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, Code: azureDeploymentCode, Message: azureNoDeployment}
	}
	req.Model = m
	return nil
}

// contentFilterVerdict is what the simulated filter says of a prompt it
// refuses: hate at high severity, the other harm categories safe, no
// jailbreak (the shape of Azure's content_filter_result).
var contentFilterVerdict = []azure.FilterResult{
	{Category: "hate", Filtered: true, Severity: "high"},
	{Category: "jailbreak", Filtered: false, Detected: false},
	{Category: "self_harm", Filtered: false, Severity: "safe"},
	{Category: "sexual", Filtered: false, Severity: "safe"},
	{Category: "violence", Filtered: false, Severity: "safe"},
}

// validate checks an AzureSpec.
func (az *AzureSpec) validate(models map[string]bool) error {
	if len(az.APIKeys) == 0 && len(az.EntraTokens) == 0 {
		return fmt.Errorf("azure: api_keys or entra_tokens: at least one credential is required")
	}
	for d, m := range az.Deployments {
		if !models[m] {
			return fmt.Errorf("azure: deployments.%s: unknown model %q", d, m)
		}
	}
	return nil
}
