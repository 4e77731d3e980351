package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/bedrock"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/keelmesh/keel/internal/llm"
	wireanthropic "github.com/keelmesh/keel/internal/wire/anthropic"
)

// sent is one upstream request as it left for the simulator, and the
// status it got.
type sent struct {
	method, path, query string
	header              http.Header
	body                []byte
	status              int
}

// recorder records the requests it passes to rt, except token fetches.
type recorder struct {
	rt  http.RoundTripper
	mu  sync.Mutex
	got []sent
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := r.rt.RoundTrip(req)
	if req.URL.Path != "/token" {
		s := sent{method: req.Method, path: req.URL.EscapedPath(), query: req.URL.RawQuery, header: req.Header.Clone(), body: body}
		if resp != nil {
			s.status = resp.StatusCode
		}
		r.mu.Lock()
		r.got = append(r.got, s)
		r.mu.Unlock()
	}
	return resp, err
}

func (r *recorder) take(t *testing.T) sent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	if len(got) != 1 {
		t.Fatalf("%d requests recorded, want 1", len(got))
	}
	return got[0]
}

var sigV4Header = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, SignedHeaders=([^,]+), Signature=[0-9a-f]{64}$`)

// compareSent reports every difference between Keel's request and the
// official SDK's, field for field: method, path, query, the body's JSON
// members, the headers an upstream reads (auth compared by scheme and
// scope: both signatures were verified by the simulator).
func compareSent(t *testing.T, keel, sdk sent) {
	t.Helper()
	if keel.status != http.StatusOK || sdk.status != http.StatusOK {
		t.Errorf("statuses: Keel %d, SDK %d; want both 200 (authenticated and accepted)", keel.status, sdk.status)
	}
	if keel.method != sdk.method || keel.path != sdk.path || keel.query != sdk.query {
		t.Errorf("request line: Keel %s %s?%s, SDK %s %s?%s", keel.method, keel.path, keel.query, sdk.method, sdk.path, sdk.query)
	}
	var kb, sb map[string]any
	if err := json.Unmarshal(keel.body, &kb); err != nil {
		t.Fatalf("Keel's body: %v", err)
	}
	if err := json.Unmarshal(sdk.body, &sb); err != nil {
		t.Fatalf("SDK's body: %v", err)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		seen := map[string]bool{}
		for k := range kb {
			seen[k] = true
		}
		for k := range sb {
			seen[k] = true
		}
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		if !reflect.DeepEqual(kb[k], sb[k]) {
			t.Errorf("body member %q: Keel %v, SDK %v", k, kb[k], sb[k])
		}
	}
	for _, h := range []string{"Content-Type", "Accept", "Anthropic-Version", "Anthropic-Beta", "X-Api-Key", "X-Amz-Security-Token"} {
		if k, s := keel.header.Get(h), sdk.header.Get(h); k != s {
			t.Errorf("header %s: Keel %q, SDK %q", h, k, s)
		}
	}
	ka, sa := keel.header.Get("Authorization"), sdk.header.Get("Authorization")
	km, sm := sigV4Header.FindStringSubmatch(ka), sigV4Header.FindStringSubmatch(sa)
	switch {
	case km != nil && sm != nil:
		for i, name := range []string{"", "access key", "date", "region", "service"} {
			if i > 0 && km[i] != sm[i] {
				t.Errorf("SigV4 %s: Keel %q, SDK %q", name, km[i], sm[i])
			}
		}
		for _, h := range []string{"host", "x-amz-date"} {
			if !slices.Contains(strings.Split(km[5], ";"), h) {
				t.Errorf("Keel's signature does not cover %s (signed %s)", h, km[5])
			}
		}
	case strings.HasPrefix(ka, "Bearer ") && strings.HasPrefix(sa, "Bearer "):
	default:
		t.Errorf("authorization: Keel %q, SDK %q: not the same scheme", ka, sa)
	}
}

// sdkCall is the call both make: a system prompt, a tool, stop
// sequences, metadata and a beta.
func sdkCall(model string, stream bool) anthropic.MessageNewParams {
	_ = stream
	return anthropic.MessageNewParams{
		Model:         anthropic.Model(model),
		MaxTokens:     64,
		System:        []anthropic.TextBlockParam{{Text: "Answer briefly."}},
		Messages:      []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Name three rivers of Europe."))},
		StopSequences: []string{"\n\n\n"},
		Metadata:      anthropic.MetadataParam{UserID: anthropic.String("user-42")},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "lookup", Description: anthropic.String("Look a river up."),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"name": map[string]any{"type": "string"}}}}}},
	}
}

// keelCall sends, through Keel's client, the Anthropic request the SDK
// would have sent to Anthropic's API (captured before its platform
// middleware), with the client's headers.
func keelCall(t *testing.T, c *Client, ep *Endpoint, anthropicBody []byte, h http.Header) {
	t.Helper()
	req, err := wireanthropic.ParseRequest(anthropicBody)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(context.Background(), ep, req, Call{ClientHeader: h})
	if err != nil {
		t.Fatalf("Keel's call: %v", err)
	}
	answerText(t, res)
}

// capture records the SDK's request as it would go to Anthropic's API.
type capture struct {
	body   []byte
	header http.Header
}

func (c *capture) middleware(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	c.body, c.header = b, r.Header.Clone()
	return next(r)
}

func (c *capture) sdkStream(t *testing.T, client anthropic.Client, params anthropic.MessageNewParams, stream bool, opts ...option.RequestOption) {
	t.Helper()
	ctx := context.Background()
	if !stream {
		if _, err := client.Messages.New(ctx, params, opts...); err != nil {
			t.Fatalf("SDK call: %v", err)
		}
		return
	}
	s := client.Messages.NewStreaming(ctx, params, opts...)
	for s.Next() {
	}
	if err := s.Err(); err != nil {
		t.Fatalf("SDK stream: %v", err)
	}
}

// TestBedrockRequestsEqualTheOfficialSDKs: for the same call, the request
// Keel sends to Bedrock equals the one the official anthropic-sdk-go
// bedrock package sends, field for field, streamed and not, at the SDK's
// API version and at Bedrock's documented one; both signatures verify.
func TestBedrockRequestsEqualTheOfficialSDKs(t *testing.T) {
	f, _ := cloudFleet(t, nil)
	rec := &recorder{rt: f.Transport()}
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(testAKID, testSecret, "")}
	for _, tc := range []struct {
		name        string
		sdkVersion  string // the anthropic-version the SDK is given; "" its own
		keelVersion string // the endpoint's anthropic_version; "" Bedrock's
	}{
		{"sdk version", "", "2026-10-21"},
		{"bedrock version", "bedrock-2023-05-31", ""},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", tc.name, stream), func(t *testing.T) {
				var cp capture
				opts := []option.RequestOption{option.WithHTTPClient(&http.Client{Transport: rec}), option.WithMiddleware(cp.middleware),
					bedrock.WithConfig(awsCfg), option.WithBaseURL(simRoot), option.WithMaxRetries(0),
					option.WithHeader("anthropic-beta", "context-1m-2025-08-07")}
				if tc.sdkVersion != "" {
					opts = append(opts, option.WithHeader("anthropic-version", tc.sdkVersion))
				}
				client := anthropic.NewClient(opts...)
				cp.sdkStream(t, client, sdkCall(claudeBedrock, stream), stream)
				sdk := rec.take(t)

				ep := bedrockEndpoint(t, f, testSecret)
				ep.Platform.(*Bedrock).base = simRoot
				ep.AnthropicVersion = tc.keelVersion
				keelCall(t, NewClient(rec), ep, cp.body, cp.header)
				compareSent(t, rec.take(t), sdk)
			})
		}
	}
}

// TestVertexRequestsEqualTheOfficialSDKs: the same for the official
// vertex package (OAuth2 tokens from the same service account).
func TestVertexRequestsEqualTheOfficialSDKs(t *testing.T) {
	f, saFile := cloudFleet(t, nil)
	rec := &recorder{rt: f.Transport()}
	data, err := os.ReadFile(saFile)
	if err != nil {
		t.Fatal(err)
	}
	tctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Transport: f.Transport()})
	creds, err := google.CredentialsFromJSONWithType(tctx, data, google.ServiceAccount, "https://www.googleapis.com/auth/cloud-platform")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		sdkVersion  string
		keelVersion string
	}{
		{"sdk version", "", "2026-10-21"},
		{"vertex version", VertexVersion, ""},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", tc.name, stream), func(t *testing.T) {
				var cp capture
				opts := []option.RequestOption{option.WithHTTPClient(&http.Client{Transport: rec}), option.WithMiddleware(cp.middleware),
					vertex.WithCredentials(tctx, "us-east5", testProject, creds), option.WithBaseURL(simRoot + "/"), option.WithMaxRetries(0),
					option.WithHeader("anthropic-beta", "context-1m-2025-08-07")}
				if tc.sdkVersion != "" {
					opts = append(opts, option.WithHeader("anthropic-version", tc.sdkVersion))
				}
				client := anthropic.NewClient(opts...)
				cp.sdkStream(t, client, sdkCall(claudeVertex, stream), stream)
				sdk := rec.take(t)

				v, err := NewVertex(context.Background(), VertexConfig{Region: "us-east5", Project: testProject, CredentialsFile: saFile, BaseURL: simRoot,
					HTTPClient: &http.Client{Transport: f.Transport()}})
				if err != nil {
					t.Fatal(err)
				}
				ep := &Endpoint{ID: "claude/us-east5/vertex", Model: "claude", UpstreamModel: claudeVertex, Provider: "vertex", Format: llm.FormatAnthropic, Platform: v, AnthropicVersion: tc.keelVersion}
				keelCall(t, NewClient(rec), ep, cp.body, cp.header)
				compareSent(t, rec.take(t), sdk)
			})
		}
	}
}
