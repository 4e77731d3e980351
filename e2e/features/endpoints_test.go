package features_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/keys"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/server"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// embeddingModel is the embedding model withEmbeddings declares, served
// by the simulator (sim/embed.go) in every region.
const embeddingModel = "text-embedding-3-small"

// withEmbeddings declares embeddingModel (kind embedding) on the
// simulator's OpenAI endpoints in its three regions, priced so that a
// call's cost shows.
func withEmbeddings(cfg *config.Config) {
	base := strings.TrimSuffix(cfg.Provider(simfleet.OpenAIProvider).BaseURL, "/v1")
	m := config.Model{Name: embeddingModel, Kind: config.KindEmbedding, Capability: 3, Price: config.Price{InputPerMTok: 1000}}
	for _, r := range []string{"us-east", "eu-west", "ap-south"} {
		m.Endpoints = append(m.Endpoints, config.Endpoint{Provider: simfleet.OpenAIProvider, Region: r, BaseURL: base + "/r/" + r + "/v1"})
	}
	cfg.Models = append(cfg.Models, m)
}

// TestCountTokensThroughSDK: anthropic-sdk-go's messages.countTokens
// (and the beta one, ?beta=true) through Keel, by proxy and embedded,
// answers exactly the input_tokens the simulator's answer to the same
// request reports, counted upstream (no estimate header).
func TestCountTokensThroughSDK(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	ctx := context.Background()
	const text = "How many tokens are in this sentence, counted the way the answer's usage counts them?"
	want := sim.Answer(e.simCfg, &llm.Request{Model: "sim-sonnet", MaxTokens: 64, HasMaxTokens: true,
		System:   []llm.Block{{Type: llm.BlockText, Text: "Count carefully."}},
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}}}).Usage.InputTokens
	for mode, c := range anthropicClients(e) {
		t.Run(mode, func(t *testing.T) {
			var resp *http.Response
			n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "sim-sonnet",
				System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("Count carefully.")},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}}, aoption.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			if n.InputTokens != int64(want) || want == 0 {
				t.Errorf("input_tokens %d, want the answer's usage %d", n.InputTokens, want)
			}
			if h := resp.Header.Get("X-Mesh-Token-Count"); h != "" || resp.Header.Get("X-Mesh-Model") != "sim-sonnet" {
				t.Errorf("X-Mesh-Token-Count %q X-Mesh-Model %q, want an upstream count of sim-sonnet", h, resp.Header.Get("X-Mesh-Model"))
			}
			bn, err := c.Beta.Messages.CountTokens(ctx, anthropic.BetaMessageCountTokensParams{Model: "sim-sonnet",
				System:   anthropic.BetaMessageCountTokensParamsSystemUnion{OfString: anthropic.String("Count carefully.")},
				Messages: []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock(text))}})
			if err != nil {
				t.Fatal(err)
			}
			if bn.InputTokens != int64(want) {
				t.Errorf("beta input_tokens %d, want %d", bn.InputTokens, want)
			}
		})
	}
}

// TestCountTokensFailover: with the region Keel tries first down, the
// count fails over to another region and stays exact.
func TestCountTokensFailover(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	ctx := context.Background()
	if err := e.fleet.SetRegionDown("us-east", true); err != nil {
		t.Fatal(err)
	}
	c := anthropicClients(e)["proxy"]
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Count me while a region is down."))}
	want := sim.Answer(e.simCfg, userText("sim-opus", "Count me while a region is down.", 64)).Usage.InputTokens
	var resp *http.Response
	n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "sim-opus", Messages: msgs},
		aoption.WithHeader("X-Mesh-Behavior", `{"preferred_region":"us-east"}`), aoption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if n.InputTokens != int64(want) {
		t.Errorf("input_tokens %d, want %d", n.InputTokens, want)
	}
	if resp.Header.Get("X-Mesh-Attempts") != "2" || resp.Header.Get("X-Mesh-Region") == "us-east" || resp.Header.Get("X-Mesh-Token-Count") != "" {
		t.Errorf("attempts %q region %q token count %q: want a failover from us-east to an upstream count",
			resp.Header.Get("X-Mesh-Attempts"), resp.Header.Get("X-Mesh-Region"), resp.Header.Get("X-Mesh-Token-Count"))
	}
}

// TestCountTokensEstimated: a model served only by OpenAI-format
// endpoints, and one whose every counting endpoint is down, get Keel's
// estimate, marked X-Mesh-Token-Count: estimated; an unknown model is
// Anthropic's 404, never an estimate.
func TestCountTokensEstimated(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	ctx := context.Background()
	c := anthropicClients(e)["proxy"]
	for _, r := range []string{"us-east", "ap-south"} { // sim-claude's regions
		if err := e.fleet.SetRegionDown(r, true); err != nil {
			t.Fatal(err)
		}
	}
	const text = "Estimate the tokens of this sentence, please."
	want := keys.EstimatePrompt(userText("", text, 0))
	for _, model := range []string{"sim-llama", "sim-claude"} {
		t.Run(model, func(t *testing.T) {
			var resp *http.Response
			n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(model),
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}},
				aoption.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Header.Get("X-Mesh-Token-Count") != "estimated" || n.InputTokens != int64(want) || want <= 0 {
				t.Errorf("X-Mesh-Token-Count %q input_tokens %d, want the estimate %d", resp.Header.Get("X-Mesh-Token-Count"), n.InputTokens, want)
			}
		})
	}
	_, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "no-such-model",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown model: %v, want a 404", err)
	}
	// A request Anthropic would refuse is refused, in its shape, never
	// estimated.
	resp, body := e.post(t, "/v1/messages/count_tokens", `{"model":"sim-llama"}`, "anthropic-version", "2023-06-01")
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Mesh-Token-Count") != "" || !strings.Contains(string(body), `"invalid_request_error"`) {
		t.Errorf("no messages: %d %s, want Anthropic's 400", resp.StatusCode, body)
	}
}

// TestEmbeddingsThroughSDK: openai-go's embeddings.create through Keel,
// by proxy (base URL with and without /v1) and embedded, answers the
// simulator's vectors (sim.Embed), with the cost of its tokens.
func TestEmbeddingsThroughSDK(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), withEmbeddings)
	ctx := context.Background()
	const text = "Keels keep ships upright."
	want := sim.Embed(text, 1536)
	clients := openaiClients(e)
	clients["proxy without /v1"] = openai.NewClient(ooption.WithBaseURL(e.proxy.URL), ooption.WithAPIKey("client-key"))
	for mode, c := range clients {
		t.Run(mode, func(t *testing.T) {
			var resp *http.Response
			res, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: embeddingModel,
				Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{text, text}}}, ooption.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Data) != 2 || len(res.Data[1].Embedding) != len(want) {
				t.Fatalf("%d vectors, want 2 of %d dimensions", len(res.Data), len(want))
			}
			for i, x := range res.Data[1].Embedding {
				if float32(x) != want[i] {
					t.Fatalf("[%d] = %v, want %v", i, x, want[i])
				}
			}
			cost, _ := strconv.ParseFloat(resp.Header.Get("X-Mesh-Cost"), 64)
			if wantCost := float64(res.Usage.PromptTokens) * 1000 / 1e6; res.Usage.PromptTokens == 0 || cost != wantCost {
				t.Errorf("X-Mesh-Cost %v for %d tokens, want %v", cost, res.Usage.PromptTokens, wantCost)
			}
		})
	}
	// An embedding model is not a chat model, nor a chat model an
	// embedding one: OpenAI's 404 either way.
	c := clients["proxy"]
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: embeddingModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
		t.Errorf("chat with an embedding model: %v, want a 404", err)
	}
	_, err = c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "sim-llama",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.Code != "model_not_found" {
		t.Errorf("embeddings with a chat model: %v, want a 404 model_not_found", err)
	}
}

// TestEmbeddingsOneEndpointDown (must show): with one of the three
// embedding endpoints down, every call succeeds (0 client errors), served
// by the others, with the simulator's vectors.
func TestEmbeddingsOneEndpointDown(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), withEmbeddings)
	ctx := context.Background()
	if err := e.fleet.SetRegionDown("eu-west", true); err != nil {
		t.Fatal(err)
	}
	c := openaiClients(e)["proxy"]
	const calls = 20
	errs, failovers := 0, 0
	for i := range calls {
		text := "sentence number " + strconv.Itoa(i)
		var resp *http.Response
		// Half the calls prefer the region that is down: Keel tries it
		// first (until it knows it is down) and fails over.
		opts := []ooption.RequestOption{ooption.WithResponseInto(&resp), ooption.WithMaxRetries(0)}
		if i%2 == 0 {
			opts = append(opts, ooption.WithHeader("X-Mesh-Behavior", `{"preferred_region":"eu-west"}`))
		}
		res, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: embeddingModel,
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}}, opts...)
		if err != nil {
			errs++
			continue
		}
		if r := resp.Header.Get("X-Mesh-Region"); r == "eu-west" || r == "" {
			t.Errorf("call %d served in %q, want another region than eu-west", i, r)
		}
		if resp.Header.Get("X-Mesh-Attempts") != "1" {
			failovers++
		}
		want := sim.Embed(text, 1536)
		for j, x := range res.Data[0].Embedding {
			if float32(x) != want[j] {
				t.Fatalf("call %d: [%d] = %v, want %v", i, j, x, want[j])
			}
		}
	}
	if errs != 0 {
		t.Errorf("%d client errors in %d calls, want 0", errs, calls)
	}
	// The first call that prefers the endpoint that is down fails over and
	// marks it down; it is probed back in after 5 ms, backing off to the
	// probe interval, so on a slow machine (-race in CI) a later preferring
	// call may find it probed in and fail over again: at least one, at most
	// the calls that preferred it.
	if failovers < 1 || failovers > calls/2 {
		t.Errorf("%d calls failed over, want 1 to %d (the calls that preferred the endpoint that is down)", failovers, calls/2)
	}
	t.Logf("%d calls, %d client errors, %d failed over from the endpoint that is down", calls, errs, failovers)
}

// TestModelsGetThroughSDK: models.retrieve in both SDKs, by proxy and
// embedded: the model with its context window (OpenAI: context_window;
// Anthropic: max_input_tokens); an unknown id is each provider's 404.
func TestModelsGetThroughSDK(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), withEmbeddings)
	ctx := context.Background()
	clients := openaiClients(e)
	clients["proxy without /v1"] = openai.NewClient(ooption.WithBaseURL(e.proxy.URL), ooption.WithAPIKey("client-key"))
	for mode, c := range clients {
		t.Run("openai/"+mode, func(t *testing.T) {
			m, err := c.Models.Get(ctx, "sim-llama")
			if err != nil {
				t.Fatal(err)
			}
			var extra struct {
				ContextWindow int `json:"context_window"`
			}
			json.Unmarshal([]byte(m.RawJSON()), &extra)
			if m.ID != "sim-llama" || m.Object != "model" || extra.ContextWindow != 128_000 {
				t.Errorf("model %s object %s context window %d, want sim-llama model 128000", m.ID, m.Object, extra.ContextWindow)
			}
			_, err = c.Models.Get(ctx, "gpt-nope")
			var ae *openai.Error
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.Code != "model_not_found" || ae.Type != "invalid_request_error" {
				t.Errorf("unknown model: %v, want 404 invalid_request_error model_not_found", err)
			}
			emb, err := c.Models.Get(ctx, embeddingModel)
			if err != nil || !strings.Contains(emb.RawJSON(), `"kind":"embedding"`) {
				t.Errorf("embedding model: %v %s", err, emb.RawJSON())
			}
		})
	}
	for mode, c := range anthropicClients(e) {
		t.Run("anthropic/"+mode, func(t *testing.T) {
			m, err := c.Models.Get(ctx, "sim-sonnet", anthropic.ModelGetParams{})
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != "sim-sonnet" || m.MaxInputTokens != 200_000 || m.Type != "model" {
				t.Errorf("model %s max_input_tokens %d type %s, want sim-sonnet 200000 model", m.ID, m.MaxInputTokens, m.Type)
			}
			_, err = c.Models.Get(ctx, "claude-nope", anthropic.ModelGetParams{})
			var ae *anthropic.Error
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || !strings.Contains(ae.RawJSON(), `"not_found_error"`) {
				t.Errorf("unknown model: %v, want a 404 not_found_error", err)
			}
		})
	}
}

// TestUnversionedChat: openai-go with the bare host as base URL (the
// paths without /v1, as OpenAI-compatible servers serve them) chats and
// lists models.
func TestUnversionedChat(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	ctx := context.Background()
	c := openai.NewClient(ooption.WithBaseURL(e.proxy.URL), ooption.WithAPIKey("client-key"))
	want := sim.Answer(e.simCfg, userText("sim-llama", "Say something without a version.", 64))
	r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "sim-llama", MaxTokens: openai.Int(64),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say something without a version.")}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Choices[0].Message.Content != want.Text() {
		t.Errorf("content %q, want %q", r.Choices[0].Message.Content, want.Text())
	}
	page, err := c.Models.List(ctx)
	if err != nil || len(page.Data) == 0 {
		t.Fatalf("models list: %v, %d models", err, len(page.Data))
	}
}

// TestRootAnswers: HEAD / (Claude Code's connectivity probe) and GET /
// answer 200, through anthropic-sdk-go's client (which fails on any
// other status) and raw.
func TestRootAnswers(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	c := anthropicClients(e)["proxy"]
	var resp *http.Response
	if err := c.Execute(context.Background(), http.MethodHead, "", nil, nil, aoption.WithResponseInto(&resp)); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD / through the SDK: %v", err)
	}
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		resp, body := doRaw(t, e.proxy.URL+"/", method, "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s /: %d %s", method, resp.StatusCode, body)
		}
		if method == http.MethodGet && !strings.Contains(string(body), "/v1/messages") {
			t.Errorf("GET / = %q, want the API named", body)
		}
	}
}

// TestUnknownRouteCountedAndLogged: a request for a path Keel does not
// serve is a 404 in the caller's format, counted in /metrics by method
// (no path label) and logged with its path but never its query.
func TestUnknownRouteCountedAndLogged(t *testing.T) {
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	m, err := keel.New(simfleet.Config(fleet, "http://sim.test"), keel.WithUpstream(fleet.Transport()),
		keel.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(m.Handler())
	t.Cleanup(func() {
		proxy.Close()
		m.Close()
	})
	resp, body := doRaw(t, proxy.URL+"/v1/assistants?api_key=sk-secret-in-query", http.MethodPost, `{}`)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"invalid_request_error"`) && !strings.Contains(string(body), `"not_found_error"`) {
		t.Errorf("POST /v1/assistants: %d %s", resp.StatusCode, body)
	}
	doRaw(t, proxy.URL+"/v2/whatever", http.MethodGet, "", "anthropic-version", "2023-06-01")
	doRaw(t, proxy.URL+"/nope", "PROPFIND", "")
	code, metricsText := get(t, m, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for method, want := range map[string]float64{"POST": 1, "GET": 1, "other": 1} {
		if got := metricValue(t, metricsText, "mesh_unknown_route_total", `method="`+method+`"`); got != want {
			t.Errorf("mesh_unknown_route_total{method=%q} = %v, want %v", method, got, want)
		}
	}
	if strings.Contains(metricsText, "assistants") {
		t.Error("/metrics names the unknown path")
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var seen []string
	for _, l := range lines {
		var rec struct {
			Msg, Method, Path string
		}
		if json.Unmarshal([]byte(l), &rec) == nil && strings.Contains(rec.Msg, "no route") {
			seen = append(seen, rec.Method+" "+rec.Path)
		}
	}
	if strings.Join(seen, ", ") != "POST /v1/assistants, GET /v2/whatever, PROPFIND /nope" {
		t.Errorf("logged %q, want one line per request", seen)
	}
	if strings.Contains(logs.String(), "sk-secret-in-query") {
		t.Error("the log holds the query's secret")
	}
}

// TestSideCallsWithVirtualKeys: embeddings and token counts made with a
// virtual key are checked against its model list and rate limit and
// metered: an embeddings call's cost (its tokens at the model's input
// price) is the key's spend; a count costs nothing.
func TestSideCallsWithVirtualKeys(t *testing.T) {
	k := newKeyMesh(t, sim.ZeroLatency(), withEmbeddings)
	key := k.createKey(t, keys.Spec{Team: "search", Limits: keys.Limits{Models: []string{embeddingModel, "sim-sonnet"}, RPM: 2}})
	resp, b := k.call(t, "/v1/embeddings", key.Secret, `{"model":"`+embeddingModel+`","input":["one two three","four five"]}`)
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.Usage.PromptTokens != 5 {
		t.Fatalf("embeddings: %d %s", resp.StatusCode, b)
	}
	want := 5 * 1000 / 1e6
	if got := resp.Header.Get("X-Mesh-Cost"); got != server.FormatCost(want) {
		t.Errorf("X-Mesh-Cost %q, want %q", got, server.FormatCost(want))
	}
	resp, b = k.call(t, "/v1/messages/count_tokens", key.Secret, `{"model":"sim-sonnet","messages":[{"role":"user","content":"count me"}]}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Mesh-Cost") != "0" {
		t.Errorf("count_tokens: %d cost %q %s", resp.StatusCode, resp.Header.Get("X-Mesh-Cost"), b)
	}
	if v := k.keyViews(t)[key.Key.ID]; math.Abs(v.DayUSD-want) > 1e-12 {
		t.Errorf("key spent $%v today, want $%v", v.DayUSD, want)
	}
	// Not on the key's model list: refused before any upstream call.
	before := k.up.count()
	resp, b = k.call(t, "/v1/messages/count_tokens", key.Secret, `{"model":"sim-opus","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), llm.MeshKeyModelForbidden) || resp.Header.Get("X-Mesh-Token-Count") != "" {
		t.Errorf("a model off the key's list: %d %s, want 403 %s", resp.StatusCode, b, llm.MeshKeyModelForbidden)
	}
	// The third metered request within the minute is over the key's rpm (2).
	resp, b = k.call(t, "/v1/embeddings", key.Secret, `{"model":"`+embeddingModel+`","input":"x"}`)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), llm.MeshKeyRateLimited) {
		t.Errorf("over rpm: %d %s, want 429 %s", resp.StatusCode, b, llm.MeshKeyRateLimited)
	}
	if k.up.count() != before {
		t.Errorf("%d upstream calls for refused requests, want 0", k.up.count()-before)
	}
}

// TestSideCallsPII: with personal-data detection on, an embeddings
// input and a token count reach the upstream without the personal data
// (redacted, said in X-Mesh-PII), the vector is the simulator's for the
// text it received, and a route that blocks refuses before any upstream
// call.
func TestSideCallsPII(t *testing.T) {
	m, up := piiMesh(t, withEmbeddings)
	ctx := context.Background()
	email := piiFields["email"]
	oc := openai.NewClient(ooption.WithHTTPClient(m.HTTPClient()), ooption.WithAPIKey("k"))
	var resp *http.Response
	res, err := oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: embeddingModel,
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("Write to me at " + email + " about keels")}}, ooption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if h := resp.Header.Get("X-Mesh-PII"); h != "redact; EMAIL=1" {
		t.Errorf("X-Mesh-PII %q, want redact; EMAIL=1", h)
	}
	reqs, _ := up.all()
	if len(reqs) != 1 || strings.Contains(reqs[0], email) {
		t.Fatalf("upstream got %q, want one call without the address", reqs)
	}
	var sent struct{ Input string }
	if err := json.Unmarshal([]byte(reqs[0]), &sent); err != nil || !strings.HasPrefix(sent.Input, "Write to me at ") {
		t.Fatalf("upstream input %q (%v)", sent.Input, err)
	}
	want := sim.Embed(sent.Input, 1536)
	for i, x := range res.Data[0].Embedding {
		if float32(x) != want[i] {
			t.Fatalf("[%d] = %v, want the embedding of the redacted text", i, x)
		}
	}

	ac := anthropic.NewClient(aoption.WithHTTPClient(m.HTTPClient()), aoption.WithAPIKey("k"), aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry())
	n, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "sim-sonnet",
		System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("Reply to " + email)},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("My card is " + piiFields["card"]))}},
		aoption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	reqs, _ = up.all()
	if last := reqs[len(reqs)-1]; len(reqs) != 2 || strings.Contains(last, email) || strings.Contains(last, piiFields["card"]) || n.InputTokens <= 0 {
		t.Errorf("count: upstream got %q, answer %d", reqs, n.InputTokens)
	}
	if h := resp.Header.Get("X-Mesh-PII"); !strings.Contains(h, "EMAIL=1") || !strings.Contains(h, "CARD=1") {
		t.Errorf("count: X-Mesh-PII %q", h)
	}

	_, err = oc.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: embeddingModel,
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"fine", "mail " + email}}},
		ooption.WithHeader("X-Mesh-Behavior", `{"pii":"block"}`))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || !strings.Contains(ae.RawJSON(), llm.MeshPIIBlocked) {
		t.Errorf("blocked: %v, want 400 %s", err, llm.MeshPIIBlocked)
	}
	if reqs, _ = up.all(); len(reqs) != 2 {
		t.Errorf("%d upstream calls, want none for the blocked call", len(reqs)-2)
	}
}
