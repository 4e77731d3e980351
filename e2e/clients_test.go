package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/wire/bedrock"
	"github.com/keelmesh/keel/sim"
)

// The models keel serves in the suite, each named as the simulator's model
// behind it (so sim.Answer computes the expected answer under the same name).
const (
	// chatModel is served by an OpenAI Chat Completions endpoint.
	chatModel = "sim-llama"
	// responsesModel is served by an OpenAI Responses API endpoint
	// (providers[].api: responses).
	responsesModel = "sim-opus"
	// anthropicModel is served by an Anthropic Messages endpoint.
	anthropicModel = "sim-claude"
	// embedModel is served by an OpenAI embeddings endpoint.
	embedModel = "text-embedding-3-small"
	// bedrockModel and vertexModel are sim-claude on the simulator's
	// Amazon Bedrock and Google Vertex AI fronts (simfleet.AddClouds).
	bedrockModel = "sim-claude-bedrock"
	vertexModel  = "sim-claude-vertex"
	// azureModel is sim-llama on the simulator's Azure OpenAI front (the
	// deployment azureDeployment), geminiModel and vertexGeminiModel
	// sim-sonnet on its Gemini API and Gemini-on-Vertex fronts.
	azureModel        = "sim-llama-azure"
	geminiModel       = "sim-sonnet-gemini"
	vertexGeminiModel = "sim-sonnet-vertex"
	azureDeployment   = "gpt4o-prod"
	// azureKey and geminiKey are the keys the simulator's Azure and
	// Gemini fronts accept.
	azureKey  = "az-clients-secret"
	geminiKey = "g-clients-secret"
)

// keelConfig is keel serve's config; %[1]s is the simulator's URL. Every
// endpoint is the simulator's us-east region.
const keelConfig = `# written by e2e/clients_test.go
request_log:
  enabled: false
providers:
  - name: sim-anthropic
    type: anthropic
    base_url: %[1]s/r/us-east
  - name: sim-openai
    type: openai
    base_url: %[1]s/r/us-east/v1
  - name: sim-responses
    type: openai
    api: responses
    base_url: %[1]s/r/us-east/v1
models:
  - name: ` + anthropicModel + `
    endpoints: [{provider: sim-anthropic}]
  - name: ` + chatModel + `
    endpoints: [{provider: sim-openai}]
  - name: ` + responsesModel + `
    endpoints: [{provider: sim-responses}]
  - name: ` + embedModel + `
    kind: embedding
    endpoints: [{provider: sim-openai}]
  - name: ` + bedrockModel + `
    endpoints: [{provider: sim-bedrock, upstream_model: "us.anthropic.sim-claude-v1:0"}]
  - name: ` + vertexModel + `
    endpoints: [{provider: sim-vertex, upstream_model: "sim-claude@20250929"}]
  - name: ` + azureModel + `
    endpoints: [{provider: sim-azure, upstream_model: ` + azureDeployment + `}]
  - name: ` + geminiModel + `
    endpoints: [{provider: sim-gemini, upstream_model: sim-sonnet}]
  - name: ` + vertexGeminiModel + `
    endpoints: [{provider: sim-vertex-gemini, upstream_model: sim-sonnet}]
`

// cloudProviders is keel serve's Bedrock, Vertex (Claude and Gemini),
// Azure OpenAI (deployment URLs in eu-west, api-version, api-key) and
// Gemini API (x-goog-api-key) providers: %[1]s is the simulator's URL,
// %[2]s the Bedrock API key, %[3]s the service account's key file.
const cloudProviders = `  - name: sim-bedrock
    type: anthropic
    base_url: %[1]s/r/bedrock
    api_key: %[2]s
    bedrock: {region: us-east-1}
  - name: sim-vertex
    type: anthropic
    base_url: %[1]s/r/vertex
    vertex: {project: sim-project, region: us-east5, credentials_file: %[3]s}
  - name: sim-vertex-gemini
    type: gemini
    base_url: %[1]s/r/vertex
    vertex: {project: sim-project, region: us-central1, credentials_file: %[3]s}
  - name: sim-azure
    type: azure
    base_url: %[1]s/r/eu-west
    api_version: "2024-10-21"
    api_key: ` + azureKey + `
  - name: sim-gemini
    type: gemini
    base_url: %[1]s/r/us-east
    api_key: ` + geminiKey + `
`

// scriptTimeout bounds one client script; suiteTimeout the whole suite
// after keel is built.
const (
	scriptTimeout = 150 * time.Second
	suiteTimeout  = 170 * time.Second
)

// Must show (issue 24): the real clients, pinned in clients/package-lock.json,
// work against `keel serve` in front of the simulator, and each call's answer
// is the simulator's: the official openai SDK (chat, chat at a base URL
// without /v1, a chat tool round trip,
// responses streamed and not, a Responses function tool round trip,
// text.format json_schema, embeddings.create, models.retrieve), the
// @anthropic-ai/sdk (messages.countTokens, models.retrieve, create, stream),
// the Vercel AI SDK (openai(model), openai.chat(model), anthropic(model):
// generateText, streamText, generateObject), Claude Code (`claude -p`, plain
// and with a Glob tool round trip) and Codex CLI (`codex exec` on a model
// served by an OpenAI Responses endpoint and on one served by an Anthropic
// endpoint). Nothing leaves loopback: every client's HTTP(S)_PROXY is a
// canary that fails the test when anything reaches it.
//
// The scripts (clients/*.mjs) print one JSON line per call; the simulator's
// handler is wrapped in a recorder, and each call's text must equal the text
// of the simulator's answer to the request that carried the call's marker
// "(case SCRIPT.CALL)", and, where the conversation is one plain user turn,
// sim.Answer's text for it. Skips when node or clients/node_modules is
// missing, except under CI=true (.ci/run installs them), where it fails.
func TestClients(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	clients := filepath.Join(root, "clients")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(clients, "node_modules", ".package-lock.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the client suite needs node and clients/node_modules under CI=true (.ci/run: npm ci --prefix clients): %v", err)
		}
		t.Skipf("node or clients/node_modules missing (npm ci --prefix clients): %v", err)
	}

	bin := buildKeel(t, root)

	dir := t.TempDir()
	cfg := sim.DefaultConfig()
	clouds, err := simfleet.AddClouds(&cfg, anthropicModel, dir)
	if err != nil {
		t.Fatal(err)
	}
	// GPT on Azure OpenAI and Gemini on the Gemini API and on Vertex AI
	// (issue 27): the fronts check their keys, api-version and the
	// service account's OAuth2 token as the real services do.
	cfg.Azure = &sim.AzureSpec{APIKeys: []string{azureKey}, Deployments: map[string]string{azureDeployment: chatModel}}
	cfg.Gemini = &sim.GeminiSpec{APIKeys: []string{geminiKey}}
	for i := range cfg.Models {
		if cfg.Models[i].Name == "sim-sonnet" {
			cfg.Models[i].Regions = append(cfg.Models[i].Regions, simfleet.VertexRegion)
		}
	}
	fleet, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{h: fleet.Handler()}
	simSrv := httptest.NewServer(rec)
	defer simSrv.Close()
	canary := &canary{}
	canarySrv := httptest.NewServer(canary)
	defer canarySrv.Close()

	sa, err := clouds.WriteServiceAccount(simSrv.URL)
	if err != nil {
		t.Fatal(err)
	}
	kcfg := strings.Replace(fmt.Sprintf(keelConfig, simSrv.URL), "models:\n", fmt.Sprintf(cloudProviders, simSrv.URL, clouds.BedrockAPIKey(), sa)+"models:\n", 1)
	cfgPath := filepath.Join(dir, "keel.yaml")
	if err := os.WriteFile(cfgPath, []byte(kcfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	keelURL, stopKeel := startKeel(t, ctx, bin, cfgPath)
	defer stopKeel()

	env := []string{
		"KEEL_URL=" + keelURL,
		"KEEL_CHAT_MODEL=" + chatModel,
		"KEEL_RESPONSES_MODEL=" + responsesModel,
		"KEEL_ANTHROPIC_MODEL=" + anthropicModel,
		"KEEL_EMBED_MODEL=" + embedModel,
		"KEEL_CODEX_MODELS=responses=" + responsesModel + ",anthropic=" + anthropicModel,
		"KEEL_CLOUD_MODELS=bedrock=" + bedrockModel + ",vertex=" + vertexModel + ",azure=" + azureModel +
			",gemini=" + geminiModel + ",vertex_gemini=" + vertexGeminiModel,
		"KEEL_CANARY_PROXY=" + canarySrv.URL,
		// The SDKs read no proxy variables, but the canary covers them too.
		"HTTP_PROXY=" + canarySrv.URL, "HTTPS_PROXY=" + canarySrv.URL, "NO_PROXY=127.0.0.1,localhost",
	}

	// The scripts run at once: the calls' markers, not their order, tie
	// each result to the simulator's answer.
	scripts := []string{"openai", "anthropic", "aisdk", "claude", "codex", "clouds"}
	results := make([][]callResult, len(scripts))
	logs := make([]string, len(scripts))
	var wg sync.WaitGroup
	for i, s := range scripts {
		wg.Go(func() {
			results[i], logs[i] = runScript(ctx, node, clients, s+".mjs", env)
		})
	}
	wg.Wait()

	got := map[string]callResult{}
	for i, s := range scripts {
		if len(results[i]) == 0 {
			t.Errorf("%s.mjs reported no call; its output:\n%s", s, logs[i])
		}
		for _, r := range results[i] {
			got[s+"."+r.Call] = r
		}
	}
	exs := rec.exchanges()
	for _, c := range clientCases() {
		t.Run(c.name, func(t *testing.T) {
			r, ok := got[c.name]
			if !ok {
				t.Fatalf("the script reported no result for %s", c.name)
			}
			if r.Error != "" {
				t.Fatalf("%s failed: %s", c.name, r.Error)
			}
			c.check(t, r, exs, cfg)
		})
	}
	for name := range got {
		if !slices.ContainsFunc(clientCases(), func(c clientCase) bool { return c.name == name }) {
			t.Errorf("a script reported %s, which the test does not check", name)
		}
	}
	if hits := canary.list(); len(hits) > 0 {
		t.Errorf("clients tried to leave loopback (through the proxy canary): %q", hits)
	}
	if t.Failed() {
		for i, s := range scripts {
			t.Logf("%s.mjs output:\n%s", s, logs[i])
		}
	}
}

// clientCase is one reported call and what its result must be.
type clientCase struct {
	name  string // SCRIPT.CALL, as its marker "(case SCRIPT.CALL)" says
	check func(t *testing.T, r callResult, exs []exchange, cfg sim.Config)
}

func clientCases() []clientCase {
	simText := func(t *testing.T, r callResult, exs []exchange, _ sim.Config) {}
	cases := []clientCase{
		{"openai.chat", plainTurn(chatModel)},
		{"openai.chat_no_v1", plainTurn(chatModel)},
		{"openai.chat_tool", toolRoundTrip("get_weather", "Sunny, 21 C")},
		{"openai.responses", checks(plainTurn(responsesModel), servedOver("/r/us-east/v1/responses"))},
		{"openai.responses_stream", checks(plainTurn(responsesModel), servedOver("/r/us-east/v1/responses"))},
		{"openai.responses_tool", toolRoundTrip("get_weather", "Cloudy, 18 C")},
		{"openai.responses_json_schema", simText},
		{"openai.embeddings", checkEmbedding},
		{"openai.models_retrieve", modelID(chatModel)},
		{"anthropic.count_tokens", countTokens(anthropicModel)},
		{"anthropic.models_retrieve", modelID(anthropicModel)},
		{"anthropic.create", plainTurn(anthropicModel)},
		{"anthropic.stream", plainTurn(anthropicModel)},
		{"claude.print", simText},
		{"claude.tool", toolRoundTrip("Glob", `"type":"tool_result"`)},
		{"codex.exec.responses", servedOver("/r/us-east/v1/responses")},
		{"codex.exec.anthropic", servedOver("/r/us-east/v1/messages")},
	}
	// Claude on Bedrock and on Vertex, GPT on Azure OpenAI, Gemini on
	// the Gemini API and on Vertex (issue 27), through the official SDKs
	// in both client formats, streamed and not.
	const geminiPath = "/r/vertex/v1/projects/sim-project/locations/us-central1/publishers/google/models/sim-sonnet"
	for _, p := range []struct{ name, model, json, stream string }{
		{"bedrock", anthropicModel, "/r/bedrock/model/us.anthropic.sim-claude-v1:0/invoke", "/r/bedrock/model/us.anthropic.sim-claude-v1:0/invoke-with-response-stream"},
		{"vertex", anthropicModel, "/r/vertex/v1/projects/sim-project/locations/us-east5/publishers/anthropic/models/sim-claude@20250929:rawPredict",
			"/r/vertex/v1/projects/sim-project/locations/us-east5/publishers/anthropic/models/sim-claude@20250929:streamRawPredict"},
		{"azure", chatModel, "/r/eu-west/openai/deployments/" + azureDeployment + "/chat/completions", "/r/eu-west/openai/deployments/" + azureDeployment + "/chat/completions"},
		{"gemini", "sim-sonnet", "/r/us-east/v1beta/models/sim-sonnet:generateContent", "/r/us-east/v1beta/models/sim-sonnet:streamGenerateContent"},
		{"vertex_gemini", "sim-sonnet", geminiPath + ":generateContent", geminiPath + ":streamGenerateContent"},
	} {
		once, streamed := servedOver(p.json), servedOver(p.stream)
		if p.json == p.stream {
			// One URL for both (Azure's deployment URL): the body's
			// stream flag tells them apart.
			once, streamed = checks(once, streamFlag(false)), checks(streamed, streamFlag(true))
		}
		cases = append(cases,
			clientCase{"clouds." + p.name + ".anthropic_create", checks(plainTurn(p.model), once)},
			clientCase{"clouds." + p.name + ".anthropic_stream", checks(plainTurn(p.model), streamed)},
			clientCase{"clouds." + p.name + ".openai_chat", checks(plainTurn(p.model), once)},
			clientCase{"clouds." + p.name + ".openai_chat_stream", checks(plainTurn(p.model), streamed)},
		)
	}
	// The AI SDK's three providers and the simulator path each must reach.
	for _, p := range []struct{ name, path string }{
		{"openai", "/r/us-east/v1/responses"},
		{"openai_chat", "/r/us-east/v1/chat/completions"},
		{"anthropic", "/r/us-east/v1/messages"},
	} {
		cases = append(cases,
			clientCase{"aisdk." + p.name + ".generateText", servedOver(p.path)},
			clientCase{"aisdk." + p.name + ".streamText", servedOver(p.path)},
			clientCase{"aisdk." + p.name + ".generateObject", checks(sameObject, servedOver(p.path))},
		)
	}
	// openai(model)'s tool loop, on a Responses endpoint and on an
	// Anthropic one: the second turn carries an item_reference to the
	// first answer's message, which Keel resolves from its store.
	cases = append(cases,
		clientCase{"aisdk.openai.tools", checks(toolRoundTrip("get_weather", "Rainy, 9 C"), servedOver("/r/us-east/v1/responses"))},
		clientCase{"aisdk.openai_on_anthropic.tools", checks(toolRoundTrip("get_weather", "Rainy, 9 C"), servedOver("/r/us-east/v1/messages"))},
	)
	// Every case that reports text is checked against the simulator's
	// answer to the request that carried its marker.
	for i, c := range cases {
		if c.name == "openai.embeddings" || c.name == "anthropic.count_tokens" || strings.HasSuffix(c.name, "models_retrieve") || strings.HasSuffix(c.name, "generateObject") {
			continue
		}
		inner := c.check
		cases[i].check = func(t *testing.T, r callResult, exs []exchange, cfg sim.Config) {
			t.Helper()
			ex := lastMarked(t, exs, c.name)
			if want := ex.answer().text; strings.TrimSpace(r.Text) != strings.TrimSpace(want) {
				t.Errorf("the client's text is not the simulator's answer (-got +want):\n-%q\n+%q", r.Text, want)
			}
			inner(t, r, exs, cfg)
		}
	}
	return cases
}

type checkFunc = func(*testing.T, callResult, []exchange, sim.Config)

// checks runs each of fs.
func checks(fs ...checkFunc) checkFunc {
	return func(t *testing.T, r callResult, exs []exchange, cfg sim.Config) {
		t.Helper()
		for _, f := range fs {
			f(t, r, exs, cfg)
		}
	}
}

// plainTurn: the conversation is the prompt as one user turn, so the
// answer is sim.Answer's for it.
func plainTurn(model string) func(*testing.T, callResult, []exchange, sim.Config) {
	return func(t *testing.T, r callResult, _ []exchange, cfg sim.Config) {
		t.Helper()
		if want := sim.Answer(cfg, userTurn(model, r.Prompt)).Text(); r.Text != want {
			t.Errorf("text is not sim.Answer's for the prompt (-got +want):\n-%q\n+%q", r.Text, want)
		}
	}
}

// toolRoundTrip: an answer to the marked conversation called tool, the
// last request holds output (the tool's output, or the block that carries
// it), and the last answer called nothing.
func toolRoundTrip(tool, output string) func(*testing.T, callResult, []exchange, sim.Config) {
	return func(t *testing.T, r callResult, exs []exchange, _ sim.Config) {
		t.Helper()
		marked := allMarked(exs, caseOf(t))
		called := slices.ContainsFunc(marked, func(ex exchange) bool { return slices.Contains(ex.answer().tools, tool) })
		if !called {
			t.Errorf("no answer to the marked conversation called %s", tool)
		}
		if len(marked) < 2 {
			t.Fatalf("%d marked requests, want the call and the round trip after it", len(marked))
		}
		last := marked[len(marked)-1]
		if !bytes.Contains(last.reqBody, []byte(output)) {
			t.Errorf("the request after the tool call does not carry the tool output %q: %s", output, clip(last.reqBody))
		}
		if slices.Contains(last.answer().tools, tool) {
			t.Errorf("the last answer called %s again", tool)
		}
	}
}

// servedOver: the marked request reached the simulator at path (which
// wire format and region served it).
func servedOver(path string) checkFunc {
	return func(t *testing.T, _ callResult, exs []exchange, _ sim.Config) {
		t.Helper()
		if ex := lastMarked(t, exs, caseOf(t)); ex.path != path {
			t.Errorf("served over %s %s, want %s", ex.method, ex.path, path)
		}
	}
}

// streamFlag: the marked request's body asked for a stream, or not.
func streamFlag(want bool) checkFunc {
	return func(t *testing.T, _ callResult, exs []exchange, _ sim.Config) {
		t.Helper()
		var b struct {
			Stream bool `json:"stream"`
		}
		if ex := lastMarked(t, exs, caseOf(t)); json.Unmarshal(ex.reqBody, &b) != nil || b.Stream != want {
			t.Errorf("the upstream request's stream is %v (body %s), want %v", b.Stream, clip(ex.reqBody), want)
		}
	}
}

func checkEmbedding(t *testing.T, r callResult, _ []exchange, _ sim.Config) {
	if len(r.Embedding) == 0 {
		t.Fatal("no embedding")
	}
	want := sim.Embed(r.Input, len(r.Embedding))
	for i, x := range r.Embedding {
		if math.Abs(x-float64(want[i])) > 1e-7 {
			t.Fatalf("embedding[%d] = %v, sim.Embed gives %v (of %d dimensions)", i, x, want[i], len(want))
		}
	}
}

func countTokens(model string) func(*testing.T, callResult, []exchange, sim.Config) {
	return func(t *testing.T, r callResult, _ []exchange, cfg sim.Config) {
		t.Helper()
		if want := sim.Answer(cfg, userTurn(model, r.Prompt)).Usage.InputTokens; r.InputTokens != want {
			t.Errorf("input_tokens = %d, want %d (the simulator's usage for the same request)", r.InputTokens, want)
		}
	}
}

func modelID(model string) func(*testing.T, callResult, []exchange, sim.Config) {
	return func(t *testing.T, r callResult, _ []exchange, _ sim.Config) {
		t.Helper()
		var m struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(r.Model, &m); err != nil || m.ID != model {
			t.Errorf("model = %s, want id %q", r.Model, model)
		}
	}
}

// sameObject: the object the client parsed is the simulator's JSON answer.
func sameObject(t *testing.T, r callResult, exs []exchange, _ sim.Config) {
	ex := lastMarked(t, exs, caseOf(t))
	a := ex.answer()
	want := a.text
	if len(a.toolInputs) > 0 {
		// A JSON mode built on a forced tool (the AI SDK's Anthropic
		// provider without structured outputs): the object is its input.
		want = a.toolInputs[len(a.toolInputs)-1]
	}
	var got, exp any
	if err := json.Unmarshal(r.Object, &got); err != nil {
		t.Fatalf("object %s: %v", r.Object, err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatalf("the simulator's answer %q is not JSON: %v", want, err)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(exp)
	if !bytes.Equal(g, w) {
		t.Errorf("object (-got +want):\n-%s\n+%s", g, w)
	}
}

func userTurn(model, prompt string) *llm.Request {
	return &llm.Request{Model: model, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: prompt}}}}}
}

// caseOf is the case name of a subtest of TestClients.
func caseOf(t *testing.T) string { return t.Name()[strings.LastIndex(t.Name(), "/")+1:] }

// callResult is one line a script prints.
type callResult struct {
	Call        string          `json:"call"`
	Error       string          `json:"error"`
	Text        string          `json:"text"`
	Prompt      string          `json:"prompt"`
	Object      json.RawMessage `json:"object"`
	Input       string          `json:"input"`
	Embedding   []float64       `json:"embedding"`
	InputTokens int             `json:"input_tokens"`
	Model       json.RawMessage `json:"model"`
}

// runScript runs one client script and returns its result lines and its
// whole output (stdout, then stderr).
func runScript(ctx context.Context, node, dir, script string, env []string) ([]callResult, string) {
	ctx, cancel := context.WithTimeout(ctx, scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var out []callResult
	sc := bufio.NewScanner(bytes.NewReader(stdout.Bytes()))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r callResult
		if bytes.HasPrefix(sc.Bytes(), []byte(`{"call":`)) && json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	log := stdout.String() + stderr.String()
	if err != nil {
		log += fmt.Sprintf("\n(%s: %v)", script, err)
	}
	return out, log
}

// buildKeel builds cmd/keel into a temporary directory.
func buildKeel(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "keel")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/keel")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/keel: %v\n%s", err, out)
	}
	return bin
}

var listeningRE = regexp.MustCompile(`msg="keel: listening" addr=(http://\S+)`)

// startKeel starts `keel serve --config cfgPath` on a free loopback port
// and returns its URL once it listens, and a function that stops it.
func startKeel(t *testing.T, ctx context.Context, bin, cfgPath string) (string, func()) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, "serve", "--config", cfgPath, "--listen", "127.0.0.1:0")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	var logBuf bytes.Buffer
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logMu.Lock()
			logBuf.Write(sc.Bytes())
			logBuf.WriteByte('\n')
			logMu.Unlock()
			if m := listeningRE.FindSubmatch(sc.Bytes()); m != nil {
				select {
				case addr <- string(m[1]):
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		<-exited
		if t.Failed() {
			logMu.Lock()
			t.Logf("keel serve log:\n%s", logBuf.String())
			logMu.Unlock()
		}
	}
	select {
	case u := <-addr:
		return u, stop
	case err := <-exited:
		t.Fatalf("keel serve exited before listening: %v\n%s", err, logBuf.String())
	case <-ctx.Done():
		stop()
		t.Fatal("keel serve did not listen in time")
	}
	return "", nil
}

// exchange is one request the simulator served and its answer's bytes.
type exchange struct {
	method, path string
	reqBody      []byte
	status       int
	respBody     []byte
}

// recorder wraps the simulator's handler and keeps every exchange.
// Safe for concurrent use.
type recorder struct {
	h  http.Handler
	mu sync.Mutex // guards following
	ex []exchange
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rw := &recWriter{ResponseWriter: w, status: http.StatusOK}
	rc.h.ServeHTTP(rw, r)
	rc.mu.Lock()
	rc.ex = append(rc.ex, exchange{method: r.Method, path: r.URL.Path, reqBody: body, status: rw.status, respBody: rw.buf.Bytes()})
	rc.mu.Unlock()
}

func (rc *recorder) exchanges() []exchange {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.ex)
}

// recWriter copies what is written; Flush and Unwrap keep the simulator's
// streaming (http.ResponseController) working through it.
type recWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *recWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *recWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	return w.ResponseWriter.Write(p)
}

func (w *recWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *recWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// allMarked returns the exchanges whose request carries "(case name)".
func allMarked(exs []exchange, name string) []exchange {
	marker := []byte("(case " + name + ")")
	var out []exchange
	for _, ex := range exs {
		if bytes.Contains(ex.reqBody, marker) {
			out = append(out, ex)
		}
	}
	return out
}

func lastMarked(t *testing.T, exs []exchange, name string) exchange {
	t.Helper()
	m := allMarked(exs, name)
	if len(m) == 0 {
		t.Fatalf("the simulator received no request carrying (case %s)", name)
	}
	return m[len(m)-1]
}

// simAnswer is what an answer held: its text, the tools it called and
// their JSON inputs.
type simAnswer struct {
	text       string
	tools      []string
	toolInputs []string
}

// answer reads the simulator's answer in any of the wire formats it speaks,
// a JSON body or an SSE stream: Anthropic Messages, OpenAI Chat Completions,
// the OpenAI Responses API and Gemini's generateContent (thought parts,
// Gemini's thinking, are not the answer's text).
func (ex exchange) answer() simAnswer {
	var a simAnswer
	var text strings.Builder
	args := map[int]*strings.Builder{}
	var order []int
	addArgs := func(i int, s string) {
		if args[i] == nil {
			args[i] = &strings.Builder{}
			order = append(order, i)
		}
		args[i].WriteString(s)
	}
	// ev is the union of the fields read from one JSON value.
	type ev struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		OutputIndex  int    `json:"output_index"`
		Delta        json.RawMessage
		ContentBlock struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"content_block"`
		Item struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"item"`
		Content []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		Output []struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Content   []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			Delta struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					Index    int `json:"index"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text         string `json:"text"`
					Thought      bool   `json:"thought"`
					FunctionCall *struct {
						Name string          `json:"name"`
						Args json.RawMessage `json:"args"`
					} `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	read := func(e ev) {
		switch e.Type {
		case "content_block_start": // Anthropic stream
			if e.ContentBlock.Type == "tool_use" {
				a.tools = append(a.tools, e.ContentBlock.Name)
			}
		case "content_block_delta":
			var d struct{ Type, Text, PartialJSON string }
			var raw map[string]string
			json.Unmarshal(e.Delta, &raw)
			d.Type, d.Text, d.PartialJSON = raw["type"], raw["text"], raw["partial_json"]
			switch d.Type {
			case "text_delta":
				text.WriteString(d.Text)
			case "input_json_delta":
				addArgs(e.Index, d.PartialJSON)
			}
		case "response.output_item.added": // Responses stream
			if e.Item.Type == "function_call" {
				a.tools = append(a.tools, e.Item.Name)
			}
		case "response.output_text.delta":
			var s string
			json.Unmarshal(e.Delta, &s)
			text.WriteString(s)
		case "response.function_call_arguments.delta":
			var s string
			json.Unmarshal(e.Delta, &s)
			addArgs(e.OutputIndex, s)
		case "message": // Anthropic JSON
			for _, c := range e.Content {
				switch c.Type {
				case "text":
					text.WriteString(c.Text)
				case "tool_use":
					a.tools = append(a.tools, c.Name)
					a.toolInputs = append(a.toolInputs, string(c.Input))
				}
			}
		}
		for _, o := range e.Output { // Responses JSON
			switch o.Type {
			case "message":
				for _, c := range o.Content {
					if c.Type == "output_text" {
						text.WriteString(c.Text)
					}
				}
			case "function_call":
				a.tools = append(a.tools, o.Name)
				a.toolInputs = append(a.toolInputs, o.Arguments)
			}
		}
		for _, c := range e.Choices { // Chat Completions, JSON and stream
			if c.Message.Content != nil {
				text.WriteString(*c.Message.Content)
			}
			for _, tc := range c.Message.ToolCalls {
				a.tools = append(a.tools, tc.Function.Name)
				a.toolInputs = append(a.toolInputs, tc.Function.Arguments)
			}
			if c.Delta.Content != nil {
				text.WriteString(*c.Delta.Content)
			}
			for _, tc := range c.Delta.ToolCalls {
				if tc.Function.Name != "" {
					a.tools = append(a.tools, tc.Function.Name)
				}
				addArgs(tc.Index, tc.Function.Arguments)
			}
		}
		for _, c := range e.Candidates { // Gemini, JSON and stream
			for _, p := range c.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					a.tools = append(a.tools, p.FunctionCall.Name)
					a.toolInputs = append(a.toolInputs, string(p.FunctionCall.Args))
				case !p.Thought:
					text.WriteString(p.Text)
				}
			}
		}
	}
	body := bytes.TrimSpace(ex.respBody)
	if strings.HasSuffix(ex.path, "/invoke-with-response-stream") {
		// Bedrock's eventstream: each frame's Anthropic event as a data line.
		var lines bytes.Buffer
		r := bedrock.NewStreamReader(bytes.NewReader(ex.respBody))
		for {
			e, err := r.Next()
			if err != nil {
				break
			}
			lines.WriteString("data: ")
			lines.Write(e.Raw)
			lines.WriteByte('\n')
		}
		body = lines.Bytes()
	}
	if bytes.HasPrefix(body, []byte("{")) {
		var e ev
		if json.Unmarshal(body, &e) == nil {
			read(e)
		}
	} else {
		for line := range bytes.SplitSeq(body, []byte("\n")) {
			data, ok := bytes.CutPrefix(line, []byte("data:"))
			if !ok {
				continue
			}
			var e ev
			if json.Unmarshal(bytes.TrimSpace(data), &e) == nil {
				read(e)
			}
		}
	}
	for _, i := range order {
		a.toolInputs = append(a.toolInputs, args[i].String())
	}
	a.text = text.String()
	return a
}

// canary is the proxy every client is given: anything that reaches it was
// on its way off loopback. It refuses and records. Safe for concurrent use.
type canary struct {
	mu   sync.Mutex // guards following
	hits []string
}

func (c *canary) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.hits = append(c.hits, r.Method+" "+r.Host+r.URL.RequestURI())
	c.mu.Unlock()
	http.Error(w, "keel client suite: no internet", http.StatusForbidden)
}

func (c *canary) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.hits)
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}
