package features_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/sim"
)

// The same Claude model on three providers, as each names it.
const (
	claudeAnthropicID = "claude-sonnet-4-5-20250929"
	claudeBedrockID   = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	claudeVertexID    = "claude-sonnet-4-5@20250929"
	cloudAKID         = "AKIDKEELTEST0001"
	cloudSecret       = "keel/test/secret/0001"
	cloudProject      = "keel-test-project"
)

// cloudSim is a fleet serving Claude in regions anthropic, bedrock and
// vertex (the three providers), the AWS key it accepts set in the
// environment (the standard credential chain's first source) and a
// service-account key file for Vertex.
type cloudSim struct {
	cfg    sim.Config
	saFile string
}

func newCloudSim(t *testing.T) *cloudSim {
	t.Helper()
	cfg := sim.DefaultConfig()
	lat := sim.LatencySpec{Concurrency: 64, TTFT: sim.Duration(20 * time.Millisecond), PerToken: sim.Duration(time.Millisecond)}
	cfg.Regions = []sim.RegionSpec{{Name: "anthropic", Latency: lat}, {Name: "bedrock", Latency: lat}, {Name: "vertex", Latency: lat}}
	cfg.Models = []sim.ModelSpec{{Name: claudeAnthropicID, Capability: 4, ContextWindow: 200_000, Regions: []string{"anthropic", "bedrock", "vertex"},
		Formats: []string{"anthropic"}, TemperatureScale: 1, Price: sim.Price{InputPerMTok: 3, OutputPerMTok: 15}}}
	acct, file, err := sim.NewGoogleServiceAccount("http://sim.test/token", cloudProject, "keel@"+cloudProject+".iam.gserviceaccount.com")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth = sim.Auth{AWS: []sim.AWSKey{{AccessKeyID: cloudAKID, SecretAccessKey: cloudSecret}}, Google: []sim.GoogleAccount{acct}}
	saFile := filepath.Join(t.TempDir(), "service-account.json")
	if err := os.WriteFile(saFile, file, 0o600); err != nil {
		t.Fatal(err)
	}
	// The AWS standard chain, hermetic: environment credentials, no files,
	// no instance metadata.
	t.Setenv("AWS_ACCESS_KEY_ID", cloudAKID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", cloudSecret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return &cloudSim{cfg: cfg, saFile: saFile}
}

// cloudConfig is a Keel config with the three providers, the model claude
// on all three (anthropic first), and one model per provider.
func (c *cloudSim) cloudConfig(t *testing.T) *config.Config {
	t.Helper()
	y := fmt.Sprintf(`
providers:
  - name: anthropic
    type: anthropic
    base_url: http://sim.test/r/anthropic
    api_key: sk-ant-test
  - name: bedrock-us
    type: anthropic
    base_url: http://sim.test/r/bedrock
    bedrock:
      region: us-east-1
  - name: vertex
    type: anthropic
    base_url: http://sim.test/r/vertex
    vertex:
      project: %s
      region: us-east5
      credentials_file: %s
models:
  - name: claude
    endpoints:
      - {provider: anthropic, region: anthropic, upstream_model: %s}
      - {provider: bedrock-us, region: us-east-1, upstream_model: %s}
      - {provider: vertex, region: us-east5, upstream_model: %s}
  - name: claude-bedrock-vertex
    endpoints:
      - {provider: bedrock-us, region: us-east-1, upstream_model: %[4]s}
      - {provider: vertex, region: us-east5, upstream_model: %[5]s}
  - name: claude-bedrock
    endpoints:
      - {provider: bedrock-us, region: us-east-1, upstream_model: %[4]s}
  - name: claude-vertex
    endpoints:
      - {provider: vertex, region: us-east5, upstream_model: %[5]s}
request_log:
  enabled: false
`, cloudProject, c.saFile, claudeAnthropicID, claudeBedrockID, claudeVertexID)
	cfg, err := config.Parse([]byte(y), "cloud.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (c *cloudSim) mesh(t *testing.T) *simMesh {
	t.Helper()
	return newSimMesh(t, c.cfg, func(cfg *config.Config) { *cfg = *c.cloudConfig(t) })
}

func (s *simMesh) lastRecord(t *testing.T) *callrec.Record {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.records) == 0 {
		t.Fatal("no call recorded")
	}
	return s.records[len(s.records)-1]
}

// Must show: through the official Go SDKs, in both client formats,
// streamed and not, Claude on Bedrock (SigV4 with the standard chain's
// environment credentials, eventstream) and on Vertex (a service
// account's OAuth2 token) answers through Keel, and Keel names the
// provider that served.
func TestClaudeOnBedrockAndVertexThroughTheOfficialSDKs(t *testing.T) {
	c := newCloudSim(t)
	s := c.mesh(t)
	defer s.mesh.Close()
	if err := s.mesh.CheckCredentials(context.Background()); err != nil {
		t.Fatalf("CheckCredentials: %v", err)
	}
	ac := anthropic.NewClient(aoption.WithHTTPClient(s.mesh.HTTPClient()), aoption.WithBaseURL("http://keel.test"), aoption.WithAPIKey("client-key"), aoption.WithMaxRetries(0))
	oc := openai.NewClient(ooption.WithHTTPClient(s.mesh.HTTPClient()), ooption.WithBaseURL("http://keel.test/v1"), ooption.WithAPIKey("client-key"), ooption.WithMaxRetries(0))
	ctx := context.Background()
	const prompt = "Name three rivers of Europe."
	for _, tc := range []struct{ model, provider string }{{"claude-bedrock", "bedrock-us"}, {"claude-vertex", "vertex"}} {
		var texts []string
		msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(tc.model), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
		if err != nil {
			t.Fatalf("%s anthropic: %v", tc.model, err)
		}
		texts = append(texts, msg.Content[0].Text)
		s.checkServed(t, tc.model+" anthropic", tc.provider)

		st := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(tc.model), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
		var acc anthropic.Message
		for st.Next() {
			if err := acc.Accumulate(st.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("%s anthropic stream: %v", tc.model, err)
		}
		texts = append(texts, acc.Content[0].Text)
		s.checkServed(t, tc.model+" anthropic stream", tc.provider)

		cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: tc.model, MaxCompletionTokens: openai.Int(64),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
		if err != nil {
			t.Fatalf("%s openai: %v", tc.model, err)
		}
		texts = append(texts, cc.Choices[0].Message.Content)
		s.checkServed(t, tc.model+" openai", tc.provider)

		os := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: tc.model, MaxCompletionTokens: openai.Int(64),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
		var sb strings.Builder
		for os.Next() {
			if ch := os.Current(); len(ch.Choices) > 0 {
				sb.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		if err := os.Err(); err != nil {
			t.Fatalf("%s openai stream: %v", tc.model, err)
		}
		texts = append(texts, sb.String())
		s.checkServed(t, tc.model+" openai stream", tc.provider)

		for i, txt := range texts {
			if txt == "" || txt != texts[0] {
				t.Errorf("%s: answer %d is %q, want the first one's %q", tc.model, i, txt, texts[0])
			}
		}
	}
}

func (s *simMesh) checkServed(t *testing.T, what, provider string) {
	t.Helper()
	r := s.lastRecord(t)
	if r.ServedProvider != provider {
		t.Errorf("%s: served by provider %q, want %q", what, r.ServedProvider, provider)
	}
}

// Must show: a 429 storm on Anthropic's API (every call answered 429
// with retry-after: 30) while Bedrock and Vertex are healthy: no client
// sees an error, and nothing is sent to Anthropic within 30 s of a 429.
func TestAnthropic429StormServedByBedrockAndVertex(t *testing.T) {
	c := newCloudSim(t)
	c.cfg.Faults = []sim.Fault{{Kind: sim.KindRateLimit, Region: "anthropic", RetryAfter: sim.Duration(30 * time.Second)}}
	synctest.Test(t, func(t *testing.T) {
		s := c.mesh(t)
		defer s.mesh.Close()
		var wg sync.WaitGroup
		var mu sync.Mutex
		statuses := map[int]int{}
		for i := range 300 { // 5 calls a second for 60 s
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 200 * time.Millisecond)
				stream := ""
				if i%2 == 1 {
					stream = `,"stream":true`
				}
				r := s.call(t, "/v1/messages", fmt.Sprintf(`{"model":"claude","max_tokens":16%s,"messages":[{"role":"user","content":"storm %d"}]}`, stream, i))
				mu.Lock()
				statuses[r.status]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		if statuses[200] != 300 {
			t.Fatalf("statuses %v, want 300 × 200", statuses)
		}
		var anth []time.Time
		byRegion := map[string]int{}
		for _, p := range s.up.posts() {
			byRegion[p.region]++
			if p.region == "anthropic" {
				anth = append(anth, p.at)
			}
		}
		if len(anth) == 0 {
			t.Fatalf("nothing was sent to Anthropic (posts by region %v): the storm was never met", byRegion)
		}
		for i := 1; i < len(anth); i++ {
			if gap := anth[i].Sub(anth[i-1]); gap < 30*time.Second {
				t.Errorf("a call went to Anthropic %v after its 429 (retry-after 30s)", gap)
			}
		}
		if byRegion["bedrock"] == 0 || byRegion["vertex"] == 0 {
			t.Errorf("posts by region %v: want Bedrock and Vertex both serving", byRegion)
		}
		t.Logf("posts by region %v; Anthropic tried at %d moments", byRegion, len(anth))
	})
}

// Must show: a Bedrock stream whose eventstream carries a
// modelStreamErrorException frame mid-way is continued on Vertex, and the
// client gets exactly the text an unbroken stream gives.
func TestBedrockExceptionFrameContinuedOnVertex(t *testing.T) {
	c := newCloudSim(t)
	s := c.mesh(t)
	defer s.mesh.Close()
	body := `{"model":"%s","max_tokens":48,"stream":true,"messages":[{"role":"user","content":"Describe the Danube in two sentences."}]}`
	want := s.call(t, "/v1/messages", fmt.Sprintf(body, "claude-vertex"))
	if want.status != 200 {
		t.Fatalf("unbroken stream: %d %s", want.status, want.body)
	}
	for range 20 { // until the call meets Bedrock first and the fault fires
		s.fleet.SetFaults([]sim.Fault{{Kind: sim.KindStreamError, Region: "bedrock", AfterTokens: 6, Count: 1}})
		got := s.call(t, "/v1/messages", fmt.Sprintf(body, "claude-bedrock-vertex"))
		r := s.lastRecord(t)
		if len(s.fleet.Faults()) != 0 || len(r.Attempts) == 0 || r.Attempts[0].Provider != "bedrock-us" {
			continue // Vertex served it first (a hedge may have met the fault)
		}
		if got.status != 200 {
			t.Fatalf("status %d: %s", got.status, got.body)
		}
		if g, w := streamText(t, got.body), streamText(t, want.body); g != w || g == "" {
			t.Fatalf("continued text %q, want the unbroken stream's %q", g, w)
		}
		if r.Recovered == 0 || r.ServedProvider != "vertex" || !slices.ContainsFunc(r.Attempts, func(a callrec.Attempt) bool { return a.Provider == "bedrock-us" }) {
			t.Fatalf("record: recovered %d, served by %q, attempts %+v; want a recovery on vertex after bedrock-us", r.Recovered, r.ServedProvider, r.Attempts)
		}
		return
	}
	t.Fatal("no call met the Bedrock fault first in 20 tries")
}

// streamText is the text of an Anthropic SSE stream's deltas.
func streamText(t *testing.T, body []byte) string {
	t.Helper()
	var sb strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || !strings.Contains(data, `"text_delta"`) {
			continue
		}
		_, rest, _ := strings.Cut(data, `"text":`)
		var s string
		if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimSuffix(rest, "}"), "}"), "%q", &s); err != nil {
			t.Fatalf("delta %s: %v", data, err)
		}
		sb.WriteString(s)
	}
	return sb.String()
}

// Must show: Vertex's OAuth2 tokens are refreshed during a long run: an
// hour of calls (virtual time) with 10-minute tokens, no call fails and
// no expired token reaches Vertex.
func TestVertexTokensRefreshedInALongRun(t *testing.T) {
	c := newCloudSim(t)
	c.cfg.Auth.GoogleTokenTTL = sim.Duration(10 * time.Minute)
	synctest.Test(t, func(t *testing.T) {
		s := c.mesh(t)
		defer s.mesh.Close()
		for i := range 21 {
			r := s.call(t, "/v1/messages", fmt.Sprintf(`{"model":"claude-vertex","max_tokens":8,"messages":[{"role":"user","content":"tick %d"}]}`, i))
			if r.status != 200 {
				t.Fatalf("call %d at %v: %d %s", i, time.Duration(i)*3*time.Minute, r.status, r.body)
			}
			time.Sleep(3 * time.Minute)
		}
		if n := s.fleet.TokensIssued(); n < 6 {
			t.Errorf("%d tokens issued in an hour of 10-minute tokens, want at least 6", n)
		}
		if n := s.fleet.AuthRefusals(); n != 0 {
			t.Errorf("%d calls refused for their authentication", n)
		}
	})
}

// TestCountTokensOnVertexAndBedrock: a token count for Claude on Vertex
// goes to Vertex's count-tokens model; Bedrock's Messages API has none, so
// for Claude only on Bedrock it is estimated, and nothing is sent there.
func TestCountTokensOnVertexAndBedrock(t *testing.T) {
	c := newCloudSim(t)
	s := c.mesh(t)
	defer s.mesh.Close()
	for _, tc := range []struct{ model, region string }{{"claude-vertex", "vertex"}, {"claude-bedrock", ""}} {
		before := len(s.up.posts())
		r := s.call(t, "/v1/messages/count_tokens", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"How many tokens is this?"}]}`, tc.model))
		if r.status != 200 || !strings.Contains(string(r.body), `"input_tokens":`) {
			t.Fatalf("%s: %d %s", tc.model, r.status, r.body)
		}
		var regions []string
		for _, p := range s.up.posts()[before:] {
			if p.region != "" { // "" is the token endpoint
				regions = append(regions, p.region)
			}
		}
		want := []string{tc.region}
		if tc.region == "" {
			want = nil
		}
		if !slices.Equal(regions, want) {
			t.Errorf("%s: count sent to regions %v, want %v", tc.model, regions, want)
		}
	}
}
