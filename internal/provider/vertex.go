package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
	googleerr "github.com/keelmesh/keel/internal/wire/google"
)

// VertexVersion is the anthropic_version Vertex AI documents for
// Anthropic models (cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude).
const VertexVersion = "vertex-2023-10-16"

// cloudPlatformScope is the OAuth2 scope Vertex AI calls need.
const cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// VertexConfig configures a Google Vertex AI platform.
type VertexConfig struct {
	// Project is the Google Cloud project; empty: the credentials' own.
	Project string
	// Region is the location: "global", a multi-region ("us", "eu") or a
	// region (us-east5, europe-west1, …).
	Region string
	// CredentialsFile is a Google credentials JSON file (a service
	// account key, an authorized user, an external account); empty:
	// Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, the
	// gcloud user's, the metadata server's).
	CredentialsFile string
	// BaseURL overrides the Vertex AI host of the region (a Private
	// Service Connect endpoint, a test server).
	BaseURL string
	// HTTPClient, when set, fetches the tokens (tests: the simulator's
	// in-memory transport); nil: http.DefaultClient.
	HTTPClient *http.Client
}

// Vertex is Google Vertex AI's rawPredict and streamRawPredict for
// Anthropic models (cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude):
// POST {host}/v1/projects/{p}/locations/{r}/publishers/anthropic/models/{model}:rawPredict
// (:streamRawPredict for a stream, which is Anthropic's own SSE), with an
// OAuth2 access token from golang.org/x/oauth2/google, cached and
// refreshed by it before the token expires. Token counts go to the
// count-tokens model. Safe for concurrent use.
type Vertex struct {
	project, region string
	base            string // …/publishers/anthropic/models/
	ts              oauth2.TokenSource
	auth            atomic.Pointer[vertexAuth] // the header of the last token
}

type vertexAuth struct {
	tok    *oauth2.Token
	header []string
}

// NewVertex resolves cfg's credentials (a file read, or ADC found: no
// token is fetched until the first call or Check).
func NewVertex(ctx context.Context, cfg VertexConfig) (*Vertex, error) {
	if cfg.Region == "" {
		return nil, errors.New("vertex: region is required")
	}
	tctx := context.WithoutCancel(ctx)
	if cfg.HTTPClient != nil {
		tctx = context.WithValue(tctx, oauth2.HTTPClient, cfg.HTTPClient)
	}
	var creds *google.Credentials
	var err error
	if cfg.CredentialsFile != "" {
		data, rerr := os.ReadFile(cfg.CredentialsFile)
		if rerr != nil {
			return nil, fmt.Errorf("reading Google credentials: %w", rerr)
		}
		var f struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(data, &f); err != nil || f.Type == "" {
			return nil, fmt.Errorf("google credentials file %s: not a credentials JSON with a \"type\"", cfg.CredentialsFile)
		}
		creds, err = google.CredentialsFromJSONWithType(tctx, data, google.CredentialsType(f.Type), cloudPlatformScope)
	} else {
		creds, err = google.FindDefaultCredentials(tctx, cloudPlatformScope)
	}
	if err != nil {
		return nil, fmt.Errorf("finding Google credentials: %w", err)
	}
	v := &Vertex{project: cfg.Project, region: cfg.Region, ts: creds.TokenSource}
	if v.project == "" {
		v.project = creds.ProjectID
	}
	if v.project == "" {
		return nil, errors.New("vertex: no project: set vertex.project (the credentials name none)")
	}
	host := strings.TrimRight(cfg.BaseURL, "/")
	if host == "" {
		host = vertexHost(cfg.Region)
	}
	v.base = host + "/v1/projects/" + url.PathEscape(v.project) + "/locations/" + url.PathEscape(v.region) + "/publishers/anthropic/models/"
	return v, nil
}

// vertexHost is the Vertex AI host of a location, as Google's docs and
// the official SDK name it: aiplatform.googleapis.com for global, the
// multi-region hosts for us and eu, {region}-aiplatform.googleapis.com
// otherwise.
func vertexHost(region string) string {
	switch region {
	case "global":
		return "https://aiplatform.googleapis.com"
	case "us", "eu":
		return "https://aiplatform." + region + ".rep.googleapis.com"
	}
	return "https://" + region + "-aiplatform.googleapis.com"
}

// Name implements Platform.
func (*Vertex) Name() string { return "vertex" }

// DefaultVersion implements Platform: vertex-2023-10-16.
func (*Vertex) DefaultVersion() string { return VertexVersion }

// KeepsStream implements Platform: streamRawPredict takes "stream": true
// in the body, as the official SDK sends it.
func (*Vertex) KeepsStream() bool { return true }

// BetasInBody implements Platform: Vertex takes the anthropic-beta header
// as the official SDK sends it.
func (*Vertex) BetasInBody() bool { return false }

// CallURL implements Platform.
func (v *Vertex) CallURL(model string, stream bool) string {
	if stream {
		return v.base + url.PathEscape(model) + ":streamRawPredict"
	}
	return v.base + url.PathEscape(model) + ":rawPredict"
}

// PostURL implements Platform: the token count is the count-tokens
// model's rawPredict (the body keeps its model).
func (v *Vertex) PostURL(path, _ string) string {
	if p, _, _ := strings.Cut(path, "?"); p == wire.CountTokensPath {
		return v.base + "count-tokens:rawPredict"
	}
	return ""
}

// Authorize implements Platform: the OAuth2 access token as a bearer
// token. The token source caches the token and fetches a new one before
// it expires; the header string is built once per token.
func (v *Vertex) Authorize(_ context.Context, req *http.Request, _ []byte) error {
	tok, err := v.ts.Token()
	if err != nil {
		return fmt.Errorf("getting a Google access token: %w", err)
	}
	a := v.auth.Load()
	if a == nil || a.tok != tok {
		a = &vertexAuth{tok: tok, header: []string{tok.Type() + " " + tok.AccessToken}}
		v.auth.Store(a)
	}
	req.Header["Authorization"] = a.header
	return nil
}

// NewStreamReader implements Platform: Anthropic's SSE.
func (*Vertex) NewStreamReader(r io.Reader) wire.StreamReader {
	return wire.For(llm.FormatAnthropic).NewStreamReader(r)
}

// ParseError implements Platform: Google's error shape, or a model's
// Anthropic error relayed.
func (*Vertex) ParseError(status int, h http.Header, body []byte) *llm.APIError {
	return googleerr.ParseError(status, h, body)
}

// Check implements Platform: a token is fetched.
func (v *Vertex) Check(context.Context) error {
	if _, err := v.ts.Token(); err != nil {
		return fmt.Errorf("getting a Google access token: %w", err)
	}
	return nil
}
