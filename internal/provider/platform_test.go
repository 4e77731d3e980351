package provider

import (
	"context"
	"crypto/rsa"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/sim"
)

// The same Claude model on three providers, as their ids name it.
const (
	claudeAnthropic = "claude-sonnet-4-5-20250929"
	claudeBedrock   = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	claudeVertex    = "claude-sonnet-4-5@20250929"
	simRoot         = "http://sim.test"
	testAKID        = "AKIDSIMULATOR0001"
	testSecret      = "sim/secret/key/0001"
	testProject     = "keel-sim-project"
)

// cloudFleet is a fleet serving claudeAnthropic in regions anthropic,
// bedrock and vertex, with an AWS key and a Google service account; it
// returns the service account's key file.
func cloudFleet(t testing.TB, mutate func(*sim.Config)) (*sim.Fleet, string) {
	return cloudFleetKey(t, nil, mutate)
}

// cloudFleetKey is cloudFleet with the service account's key (nil: a new
// one).
func cloudFleetKey(t testing.TB, key *rsa.PrivateKey, mutate func(*sim.Config)) (*sim.Fleet, string) {
	t.Helper()
	cfg := sim.ZeroLatency()
	cfg.Regions = []sim.RegionSpec{{Name: "anthropic"}, {Name: "bedrock"}, {Name: "vertex"}}
	cfg.Models = []sim.ModelSpec{{Name: claudeAnthropic, Capability: 4, ContextWindow: 200_000, Regions: []string{"anthropic", "bedrock", "vertex"}, Formats: []string{"anthropic"}, TemperatureScale: 1}}
	email := "keel@" + testProject + ".iam.gserviceaccount.com"
	var acct sim.GoogleAccount
	var file []byte
	var err error
	if key != nil {
		acct, file, err = sim.GoogleServiceAccount(key, simRoot+"/token", testProject, email)
	} else {
		acct, file, err = sim.NewGoogleServiceAccount(simRoot+"/token", testProject, email)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth = sim.Auth{AWS: []sim.AWSKey{{AccessKeyID: testAKID, SecretAccessKey: testSecret}}, Google: []sim.GoogleAccount{acct}}
	if mutate != nil {
		mutate(&cfg)
	}
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	return f, path
}

func bedrockEndpoint(t testing.TB, f *sim.Fleet, secret string) *Endpoint {
	t.Helper()
	b, err := NewBedrock(context.Background(), BedrockConfig{Region: "us-east-1", BaseURL: sim.BedrockBaseURL(simRoot, "bedrock"),
		Credentials: credentials.NewStaticCredentialsProvider(testAKID, secret, "")})
	if err != nil {
		t.Fatal(err)
	}
	return &Endpoint{ID: "claude/us-east-1/bedrock", Model: "claude", UpstreamModel: claudeBedrock, Region: "us-east-1", Provider: "bedrock",
		Format: llm.FormatAnthropic, Platform: b}
}

func vertexEndpoint(t testing.TB, f *sim.Fleet, saFile string) *Endpoint {
	t.Helper()
	v, err := NewVertex(context.Background(), VertexConfig{Region: "us-east5", CredentialsFile: saFile, BaseURL: sim.VertexBaseURL(simRoot, "vertex"),
		HTTPClient: &http.Client{Transport: f.Transport()}})
	if err != nil {
		t.Fatal(err)
	}
	return &Endpoint{ID: "claude/us-east5/vertex", Model: "claude", UpstreamModel: claudeVertex, Region: "us-east5", Provider: "vertex",
		Format: llm.FormatAnthropic, Platform: v}
}

func anthropicEndpoint() *Endpoint {
	return &Endpoint{ID: "claude/anthropic/anthropic", Model: "claude", UpstreamModel: claudeAnthropic, Region: "anthropic", Provider: "anthropic",
		Format: llm.FormatAnthropic, BaseURL: simRoot + "/r/anthropic", APIKey: "sk-ant-sim"}
}

func claudeRequest(t testing.TB, stream bool) *llm.Request {
	t.Helper()
	body := `{"model":"claude","max_tokens":64,"messages":[{"role":"user","content":"Name three rivers of Europe."}]`
	if stream {
		body += `,"stream":true`
	}
	req, err := anthropic.ParseRequest([]byte(body + "}"))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// answerText is the text of a call's answer, read from its stream when it
// streamed (which must end cleanly).
func answerText(t testing.TB, res *Result) string {
	t.Helper()
	if res.Response != nil {
		var sb strings.Builder
		for _, b := range res.Response.Content {
			sb.WriteString(b.Text)
		}
		return sb.String()
	}
	defer res.Stream.Close()
	var sb strings.Builder
	stopped := false
	for {
		ev, err := res.Stream.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if ev.Type == llm.EventBlockDelta && ev.DeltaType == llm.DeltaText {
			sb.WriteString(ev.Delta)
		}
		stopped = stopped || ev.Type == llm.EventMessageStop
	}
	if !stopped {
		t.Fatal("stream ended without message_stop")
	}
	return sb.String()
}

// TestPlatformsServeTheSameClaude: the same request through Anthropic's
// API, Bedrock (SigV4-signed, eventstream) and Vertex (OAuth2 token from a
// service account), streamed and not, gets the same answer.
func TestPlatformsServeTheSameClaude(t *testing.T) {
	f, sa := cloudFleet(t, nil)
	c := NewClient(f.Transport())
	eps := []*Endpoint{anthropicEndpoint(), bedrockEndpoint(t, f, testSecret), vertexEndpoint(t, f, sa)}
	for _, stream := range []bool{false, true} {
		var want string
		for _, ep := range eps {
			res, err := c.Do(context.Background(), ep, claudeRequest(t, stream), Call{})
			if err != nil {
				t.Fatalf("%s stream=%v: %v", ep.Provider, stream, err)
			}
			got := answerText(t, res)
			if got == "" {
				t.Fatalf("%s stream=%v: empty answer", ep.Provider, stream)
			}
			if want == "" {
				want = got
			} else if got != want {
				t.Errorf("%s stream=%v: answer %q, Anthropic's %q", ep.Provider, stream, got, want)
			}
		}
	}
}

// TestBedrockWrongSecretIsRefused: a signature by the wrong secret is an
// InvalidSignatureException 403, read as an authentication error.
func TestBedrockWrongSecretIsRefused(t *testing.T) {
	f, _ := cloudFleet(t, nil)
	c := NewClient(f.Transport())
	_, err := c.Do(context.Background(), bedrockEndpoint(t, f, "not-the-secret"), claudeRequest(t, false), Call{})
	var e *Error
	if !errors.As(err, &e) || e.API == nil || e.API.Status != 403 || e.API.Type != llm.ErrAuthentication || e.API.RawType != "InvalidSignatureException" {
		t.Fatalf("err = %v, want a 403 InvalidSignatureException authentication_error", err)
	}
}

// TestPlatformFaults: each provider's own fault reaches Keel as the typed
// failure it means.
func TestPlatformFaults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		platform string
		fault    sim.Fault
		status   int
		typ      llm.ErrorType
		raw      string
	}{
		{"bedrock throttling", "bedrock", sim.Fault{Kind: sim.KindRateLimit, Region: "bedrock"}, 429, llm.ErrRateLimit, "ThrottlingException"},
		{"bedrock model not ready", "bedrock", sim.Fault{Kind: sim.KindModelNotReady, Region: "bedrock"}, 429, llm.ErrOverloaded, "ModelNotReadyException"},
		{"bedrock unavailable", "bedrock", sim.Fault{Kind: sim.KindOverloaded, Region: "bedrock"}, 503, llm.ErrOverloaded, "ServiceUnavailableException"},
		{"vertex resource exhausted", "vertex", sim.Fault{Kind: sim.KindRateLimit, Region: "vertex"}, 429, llm.ErrRateLimit, "RESOURCE_EXHAUSTED"},
		{"vertex overloaded", "vertex", sim.Fault{Kind: sim.KindOverloaded, Region: "vertex"}, 529, llm.ErrOverloaded, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, sa := cloudFleet(t, func(c *sim.Config) { c.Faults = []sim.Fault{tc.fault} })
			ep := bedrockEndpoint(t, f, testSecret)
			if tc.platform == "vertex" {
				ep = vertexEndpoint(t, f, sa)
			}
			_, err := NewClient(f.Transport()).Do(context.Background(), ep, claudeRequest(t, false), Call{})
			var e *Error
			if !errors.As(err, &e) || e.API == nil {
				t.Fatalf("err = %v, want an API error", err)
			}
			if e.API.Status != tc.status || e.API.Type != tc.typ || e.API.RawType != tc.raw {
				t.Errorf("got status %d type %s raw %q, want %d %s %q (%v)", e.API.Status, e.API.Type, e.API.RawType, tc.status, tc.typ, tc.raw, e.API)
			}
		})
	}
}

// TestBedrockStreamExceptionFrame: an exception frame mid-stream
// (modelStreamErrorException) ends the stream with the wire's error event
// after the text sent so far.
func TestBedrockStreamExceptionFrame(t *testing.T) {
	f, _ := cloudFleet(t, func(c *sim.Config) {
		c.Faults = []sim.Fault{{Kind: sim.KindStreamError, Region: "bedrock", AfterTokens: 3}}
	})
	res, err := NewClient(f.Transport()).Do(context.Background(), bedrockEndpoint(t, f, testSecret), claudeRequest(t, true), Call{})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Stream.Close()
	deltas := 0
	var last *llm.Event
	for {
		ev, err := res.Stream.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if ev.Type == llm.EventBlockDelta {
			deltas++
		}
		last = ev
	}
	if deltas != 3 {
		t.Errorf("%d deltas before the exception, want 3", deltas)
	}
	if last == nil || last.Type != llm.EventError || last.Err == nil || !strings.Contains(last.Err.Message, "ModelStreamErrorException") {
		t.Fatalf("last event %+v, want the error event of a modelStreamErrorException", last)
	}
}

// TestProbeReachesThePlatformHost: a platform endpoint (no base URL of its
// own) is probed at its platform's host, without credentials, so an
// ejected Bedrock or Vertex endpoint can be probed back in.
func TestProbeReachesThePlatformHost(t *testing.T) {
	f, sa := cloudFleet(t, nil)
	var got []*http.Request
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r)
		return f.Transport().RoundTrip(r)
	})
	c := NewClient(rt)
	for _, ep := range []*Endpoint{bedrockEndpoint(t, f, testSecret), vertexEndpoint(t, f, sa)} {
		got = nil
		if err := c.Probe(context.Background(), ep); err != nil {
			t.Fatalf("%s: %v", ep.Provider, err)
		}
		if len(got) != 1 || got[0].URL.Host != "sim.test" || got[0].Method != http.MethodGet || got[0].Header.Get("Authorization") != "" {
			t.Fatalf("%s: probe requests %v, want one unauthenticated GET to the platform's host", ep.Provider, got)
		}
	}
}

// TestPlatformURLs: the hosts and paths of Bedrock's and Vertex's model
// calls, as their docs and the official SDK build them.
func TestPlatformURLs(t *testing.T) {
	for _, tc := range []struct{ region, want string }{
		{"global", "https://aiplatform.googleapis.com"},
		{"us", "https://aiplatform.us.rep.googleapis.com"},
		{"eu", "https://aiplatform.eu.rep.googleapis.com"},
		{"us-east5", "https://us-east5-aiplatform.googleapis.com"},
	} {
		if got := vertexHost(tc.region); got != tc.want {
			t.Errorf("vertexHost(%q) = %q, want %q", tc.region, got, tc.want)
		}
	}
	b, err := NewBedrock(context.Background(), BedrockConfig{Region: "eu-central-1", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	for stream, want := range map[bool]string{
		false: "https://bedrock-runtime.eu-central-1.amazonaws.com/model/eu.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke",
		true:  "https://bedrock-runtime.eu-central-1.amazonaws.com/model/eu.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream",
	} {
		if got := b.CallURL("eu.anthropic.claude-sonnet-4-5-20250929-v1:0", stream); got != want {
			t.Errorf("CallURL(stream=%v) = %q, want %q", stream, got, want)
		}
	}
	if got := b.PostURL("/v1/messages/count_tokens", "m"); got != "" {
		t.Errorf("Bedrock PostURL(count_tokens) = %q, want none", got)
	}
}

// TestPlatformsOverRealSockets: over loopback through keel serve's
// upstream transport (the lean HTTP/1.1 client for plain http), a
// SigV4-signed Bedrock call verifies (the Host it signed is the one sent)
// and Vertex gets its token and answers, streamed and not.
func TestPlatformsOverRealSockets(t *testing.T) {
	f, sa := cloudFleet(t, nil)
	srv, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rt := NewUpstreamTransport(TransportOptions{})
	defer rt.CloseIdleConnections()
	b, err := NewBedrock(context.Background(), BedrockConfig{Region: "us-east-1", BaseURL: sim.BedrockBaseURL(srv.URL(), "bedrock"),
		Credentials: credentials.NewStaticCredentialsProvider(testAKID, testSecret, "")})
	if err != nil {
		t.Fatal(err)
	}
	// The service account's token_uri names sim.test: its requests are
	// sent to the loopback server whatever host they name.
	toSim := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Host = strings.TrimPrefix(srv.URL(), "http://")
		return rt.RoundTrip(r)
	})
	v, err := NewVertex(context.Background(), VertexConfig{Region: "us-east5", CredentialsFile: sa, BaseURL: sim.VertexBaseURL(srv.URL(), "vertex"),
		HTTPClient: &http.Client{Transport: toSim}})
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(rt)
	for _, ep := range []*Endpoint{
		{ID: "claude/us-east-1/bedrock", Model: "claude", UpstreamModel: claudeBedrock, Provider: "bedrock", Format: llm.FormatAnthropic, Platform: b},
		{ID: "claude/us-east5/vertex", Model: "claude", UpstreamModel: claudeVertex, Provider: "vertex", Format: llm.FormatAnthropic, Platform: v},
	} {
		for _, stream := range []bool{false, true} {
			res, err := c.Do(context.Background(), ep, claudeRequest(t, stream), Call{})
			if err != nil {
				t.Fatalf("%s stream=%v: %v", ep.Provider, stream, err)
			}
			if answerText(t, res) == "" {
				t.Fatalf("%s stream=%v: empty answer", ep.Provider, stream)
			}
		}
	}
}
