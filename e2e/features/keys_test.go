package features_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/inproc"
	"github.com/keelmesh/keel/internal/keys"
	reportpkg "github.com/keelmesh/keel/internal/report"
	"github.com/keelmesh/keel/internal/server"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/store/redis/redistest"
	"github.com/keelmesh/keel/internal/store/sqlite"
	"github.com/keelmesh/keel/sim"
)

const adminToken = "admin-test-token"

// keyMesh is a mesh over the simulator's in-memory fleet with virtual keys
// required (server.require_keys), its key store and request log in a
// temporary directory. Its client reaches the HTTP front in memory as a
// network client does (authenticated, unlike the embedded transport), so
// a test can run on virtual time; the upstream recorder keeps the headers
// of every call the fleet received.
type keyMesh struct {
	mesh   *keel.Mesh
	simCfg sim.Config
	fleet  *sim.Fleet
	up     *recorder
	client *http.Client
	reqlog string

	mu      sync.Mutex // guards records
	records []*callrec.Record
}

func newKeyMesh(t *testing.T, simCfg sim.Config, tweak func(*config.Config)) *keyMesh {
	t.Helper()
	fleet, err := sim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	k := &keyMesh{simCfg: simCfg, fleet: fleet, up: &recorder{next: fleet.Transport()}}
	cfg := simfleet.Config(fleet, "http://sim.test")
	dir := t.TempDir()
	cfg.Server.RequireKeys = true
	cfg.Server.AdminToken = adminToken
	cfg.Keys.Path = filepath.Join(dir, "keys.db")
	k.reqlog = filepath.Join(dir, "requests.db")
	cfg.RequestLog.Path = k.reqlog
	on := true
	cfg.RequestLog.Enabled = &on
	if tweak != nil {
		tweak(cfg)
	}
	k.mesh, err = keel.New(cfg, keel.WithUpstream(k.up), keel.WithObserver(callrec.ObserverFunc(func(r *callrec.Record) {
		k.mu.Lock()
		k.records = append(k.records, r)
		k.mu.Unlock()
	})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.mesh.Close() })
	k.client = &http.Client{Transport: &inproc.Transport{Handler: k.mesh.Handler()}}
	return k
}

// createKey makes a key through the admin API.
func (k *keyMesh) createKey(t *testing.T, spec keys.Spec) keys.Created {
	t.Helper()
	b, _ := json.Marshal(spec)
	req, _ := http.NewRequest(http.MethodPost, "http://localhost/admin/keys", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := k.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var c keys.Created
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &c) != nil || c.Secret == "" {
		t.Fatalf("POST /admin/keys: %d %s", resp.StatusCode, body)
	}
	return c
}

// keyViews lists the keys through the admin API.
func (k *keyMesh) keyViews(t *testing.T) map[string]keys.View {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://localhost/admin/keys", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := k.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Keys []keys.View }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string]keys.View{}
	for _, v := range list.Keys {
		out[v.ID] = v
	}
	return out
}

// call posts body to path with the key, reading the whole answer.
func (k *keyMesh) call(t *testing.T, path, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://localhost"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	if strings.HasSuffix(path, "/messages") {
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	resp, err := k.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// meshCode reads mesh_error_code from an SDK error's raw JSON: the body
// (anthropic-sdk-go) or its error object (openai-go).
func meshCode(raw string) string {
	var v struct {
		Code  string `json:"mesh_error_code"`
		Error struct {
			Code string `json:"mesh_error_code"`
		} `json:"error"`
	}
	json.Unmarshal([]byte(raw), &v)
	if v.Code != "" {
		return v.Code
	}
	return v.Error.Code
}

// Issue 17, must-show "Keys": the 401, 403 and 429 answers of virtual keys
// reach the official SDKs as their API errors, with mesh_error_code in the
// raw JSON and retry-after on a 429; a served call says its cost; and the
// virtual key never goes upstream.
func TestVirtualKeyErrorsReachTheSDKs(t *testing.T) {
	k := newKeyMesh(t, sim.ZeroLatency(), nil)
	ctx := context.Background()
	good := k.createKey(t, keys.Spec{Team: "search"})
	haikuOnly := k.createKey(t, keys.Spec{Limits: keys.Limits{Models: []string{"sim-haiku"}}})
	revoked := k.createKey(t, keys.Spec{})
	req, _ := http.NewRequest(http.MethodPost, "http://localhost/admin/keys/"+revoked.Key.ID+"/revoke", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := k.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("revoke: status %d", resp.StatusCode)
	}
	type outcome struct {
		Status  int
		Type    string
		Code    string
		Retry   bool // a retry-after header
		NoRetry bool // x-should-retry: false
	}
	cases := []struct {
		name  string
		key   func() string // evaluated at the call (rpm and budget keys are made per SDK)
		model string
		calls int // the outcome is the last call's
		want  outcome
	}{
		{"served", func() string { return good.Secret }, "sim-haiku", 1, outcome{Status: 200}},
		{"unknown key", func() string { return keys.SecretPrefix + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" }, "sim-haiku", 1,
			outcome{401, "authentication_error", llm401, false, false}},
		{"a provider key", func() string { return "sk-ant-api03-provider" }, "sim-haiku", 1, outcome{401, "authentication_error", llm401, false, false}},
		{"revoked key", func() string { return revoked.Secret }, "sim-haiku", 1, outcome{401, "authentication_error", llm401, false, false}},
		{"model not allowed", func() string { return haikuOnly.Secret }, "sim-opus", 1, outcome{403, "permission_error", "MESH_KEY_MODEL_FORBIDDEN", false, true}},
		{"requests per minute", func() string { return k.createKey(t, keys.Spec{Limits: keys.Limits{RPM: 1}}).Secret }, "sim-haiku", 2,
			outcome{429, "rate_limit_error", "MESH_KEY_RATE_LIMITED", true, false}},
		{"daily budget", func() string { return k.createKey(t, keys.Spec{Limits: keys.Limits{DailyUSD: 1e-9}}).Secret }, "sim-haiku", 1,
			outcome{429, "rate_limit_error", "MESH_KEY_BUDGET_EXCEEDED", true, true}},
	}
	for _, c := range cases {
		t.Run(c.name+"/anthropic-sdk-go", func(t *testing.T) {
			cl := anthropic.NewClient(aoption.WithBaseURL("http://localhost"), aoption.WithHTTPClient(k.client), aoption.WithAPIKey(c.key()),
				aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry(), aoption.WithMaxRetries(0))
			var raw *http.Response
			var err error
			for range c.calls {
				_, err = cl.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(c.model), MaxTokens: 32,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about keels."))}}, aoption.WithResponseInto(&raw))
			}
			got := outcome{Status: raw.StatusCode}
			var ae *anthropic.Error
			if errors.As(err, &ae) {
				got.Type, got.Code = string(ae.Type()), meshCode(ae.RawJSON())
			} else if err != nil {
				t.Fatalf("err %v, want an API error", err)
			}
			checkKeyOutcome(t, raw, got.Status, got.Type, got.Code, c.want.Status, c.want.Type, c.want.Code, c.want.Retry, c.want.NoRetry)
		})
		t.Run(c.name+"/openai-go", func(t *testing.T) {
			cl := openai.NewClient(ooption.WithBaseURL("http://localhost/v1"), ooption.WithHTTPClient(k.client), ooption.WithAPIKey(c.key()), ooption.WithMaxRetries(0))
			var raw *http.Response
			var err error
			for range c.calls {
				_, err = cl.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: c.model, MaxTokens: openai.Int(32),
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about keels.")}}, ooption.WithResponseInto(&raw))
			}
			got := outcome{Status: raw.StatusCode}
			var oe *openai.Error
			if errors.As(err, &oe) {
				got.Type, got.Code = oe.Type, meshCode(oe.RawJSON())
			} else if err != nil {
				t.Fatalf("err %v, want an API error", err)
			}
			checkKeyOutcome(t, raw, got.Status, got.Type, got.Code, c.want.Status, openaiType(c.want.Type, c.want.Code), c.want.Code, c.want.Retry, c.want.NoRetry)
		})
	}
	for _, h := range k.up.reqs {
		for name, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, keys.SecretPrefix) {
					t.Errorf("an upstream call carried the virtual key in %s", name)
				}
			}
		}
	}
	if len(k.up.reqs) == 0 {
		t.Error("no upstream call was made")
	}
}

const llm401 = "MESH_KEY_INVALID"

func checkKeyOutcome(t *testing.T, raw *http.Response, status int, typ, code string, wantStatus int, wantType, wantCode string, wantRetry, wantNoRetry bool) {
	t.Helper()
	if status != wantStatus || typ != wantType || code != wantCode {
		t.Errorf("(-got +want)\n-%d %s %s\n+%d %s %s", status, typ, code, wantStatus, wantType, wantCode)
	}
	if status == 200 {
		if c, err := strconv.ParseFloat(raw.Header.Get("X-Mesh-Cost"), 64); err != nil || c <= 0 {
			t.Errorf("X-Mesh-Cost %q on a served call", raw.Header.Get("X-Mesh-Cost"))
		}
		return
	}
	ra := raw.Header.Get("Retry-After")
	if (ra != "") != wantRetry {
		t.Errorf("retry-after %q, want one: %v", ra, wantRetry)
	}
	if wantCode == "MESH_KEY_BUDGET_EXCEEDED" {
		now := time.Now().UTC()
		midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
		secs, _ := strconv.Atoi(ra)
		if d := midnight.Sub(now).Seconds(); math.Abs(float64(secs)-d) > 2 {
			t.Errorf("retry-after %s s, want the %v s to the end of the UTC day", ra, d)
		}
		wantNoRetry = midnight.Sub(now) > time.Minute
	}
	if got := raw.Header.Get("X-Should-Retry") == "false"; got != wantNoRetry {
		t.Errorf("x-should-retry %q, want false: %v", raw.Header.Get("X-Should-Retry"), wantNoRetry)
	}
	if raw.Header.Get("X-Mesh-Error-Code") != wantCode {
		t.Errorf("X-Mesh-Error-Code %q", raw.Header.Get("X-Mesh-Error-Code"))
	}
}

// Issue 17, must-show "Keys": requests, tokens and budgets stay exact
// under 50 concurrent clients of one key. Each client keeps one call in
// flight, retries when the refusal says calls in flight hold the rest
// (retry-after: 1) and stops at a refusal until the window's end. The
// simulator answers with known token counts, on virtual time, with its
// default latency (so calls overlap and hedges happen).
func TestVirtualKeyLimitsExactUnder50Clients(t *testing.T) {
	const clients = 50
	const body = `{"model":"sim-haiku","max_tokens":64,"messages":[{"role":"user","content":"Tell me about keels."}]}`
	req := userText("sim-haiku", "Tell me about keels.", 64)
	usage := sim.Answer(sim.DefaultConfig(), req).Usage
	price := func(in, out int) float64 { return (float64(in)*0.8 + float64(out)*4) / 1e6 } // sim-haiku
	callCost, callTokens := price(usage.InputTokens, usage.OutputTokens), usage.InputTokens+usage.OutputTokens
	resIn := keys.EstimatePrompt(req)
	resUSD, resTokens := price(resIn, 64), resIn+64
	if resUSD < callCost || resTokens < callTokens {
		t.Fatalf("the reservation ($%v, %d tokens) is below the call ($%v, %d): the test's premise", resUSD, resTokens, callCost, callTokens)
	}
	for _, c := range []struct {
		name   string
		limits keys.Limits
	}{
		{"requests per minute", keys.Limits{RPM: 137}},
		{"tokens per minute", keys.Limits{TPM: 40_000}},
		{"daily budget", keys.Limits{DailyUSD: 123.5 * callCost}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := newKeyMesh(t, sim.DefaultConfig(), nil)
				secret := k.createKey(t, keys.Spec{Limits: c.limits}).Secret
				var mu sync.Mutex
				served, spent, refusals := 0, 0.0, map[string]int{}
				var wg sync.WaitGroup
				for range clients {
					wg.Go(func() {
						for {
							resp, b := k.call(t, "/v1/messages", secret, body)
							if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "1" {
								time.Sleep(10 * time.Millisecond) // calls in flight hold the rest
								continue
							}
							mu.Lock()
							if resp.StatusCode == 200 {
								cost, _ := strconv.ParseFloat(resp.Header.Get("X-Mesh-Cost"), 64)
								served++
								spent += cost
							} else {
								refusals[resp.Header.Get("X-Mesh-Error-Code")]++
							}
							mu.Unlock()
							if resp.StatusCode != 200 {
								if resp.StatusCode != 429 {
									t.Errorf("status %d: %s", resp.StatusCode, b)
								}
								return
							}
						}
					})
				}
				wg.Wait()
				// What each call cost beyond its reservation (a hedge whose
				// both answers came back): the most a window may overshoot.
				k.mu.Lock()
				excessUSD, excessTokens, tokens, hedged := 0.0, 0, 0, 0
				for _, r := range k.records {
					n := 0
					for _, a := range r.Attempts {
						n += a.InputTokens + a.OutputTokens
					}
					tokens += max(n, r.Usage.PromptTokens()+r.Usage.OutputTokens)
					excessUSD += max(0, r.Cost-resUSD)
					excessTokens += max(0, n-resTokens)
					if r.Hedges > 0 {
						hedged++
					}
				}
				k.mu.Unlock()
				t.Logf("%d served, %d hedged, $%.6f spent (budget $%.6f), %d tokens, refusals %v", served, hedged, spent, c.limits.DailyUSD, tokens, refusals)
				switch {
				case c.limits.RPM > 0:
					if served != c.limits.RPM || refusals["MESH_KEY_RATE_LIMITED"] != clients {
						t.Errorf("%d calls served in the minute, %v refused; want exactly %d, and each client refused once", served, refusals, c.limits.RPM)
					}
				case c.limits.TPM > 0:
					if tokens > c.limits.TPM+excessTokens || tokens > c.limits.TPM+clients*callTokens || tokens <= c.limits.TPM-resTokens {
						t.Errorf("%d tokens used: want within (%d, %d] (the limit, beyond it only what calls used past their reservation: %d)",
							tokens, c.limits.TPM-resTokens, c.limits.TPM+excessTokens, excessTokens)
					}
				default:
					if spent > c.limits.DailyUSD+excessUSD+1e-9 || spent > c.limits.DailyUSD+clients*callCost || spent <= c.limits.DailyUSD-resUSD {
						t.Errorf("$%v spent: want within ($%v, $%v] (the budget, beyond it only what calls cost past their reservation: $%v)",
							spent, c.limits.DailyUSD-resUSD, c.limits.DailyUSD+excessUSD, excessUSD)
					}
					if v := k.keyViews(t); len(v) != 1 {
						t.Errorf("keys %v", v)
					} else {
						for _, kv := range v {
							if math.Abs(kv.DayUSD-spent) > 1e-9 || kv.InFlight != 0 {
								t.Errorf("the key's day spend $%v (%d in flight), want the calls' X-Mesh-Cost sum $%v", kv.DayUSD, kv.InFlight, spent)
							}
						}
					}
				}
			})
		})
	}
}

// Issue 17, must-show "Spend": known token counts at known prices — each
// call's X-Mesh-Cost (a stream's in its trailer), each key's spend (admin
// API and /metrics) and keel report's spend by key and team.
func TestSpendPerCallKeyAndReport(t *testing.T) {
	k := newKeyMesh(t, sim.ZeroLatency(), nil)
	search := k.createKey(t, keys.Spec{Team: "search"})
	ads := k.createKey(t, keys.Spec{Team: "ads"})
	// Prices per MTok from the built-in table (the simulator's own).
	prices := map[string][2]float64{"sim-haiku": {0.8, 4}, "sim-sonnet": {3, 15}, "sim-opus": {15, 75}}
	calls := []struct {
		key         keys.Created
		path, model string
		stream      bool
		text        string
		maxTokens   int
	}{
		{search, "/v1/messages", "sim-haiku", false, "Tell me about keels.", 64},
		{search, "/v1/chat/completions", "sim-sonnet", true, "Name three rivers of Europe.", 48},
		{search, "/v1/messages", "sim-sonnet", true, "Describe a harbour at dawn.", 32},
		{ads, "/v1/chat/completions", "sim-opus", false, "Write a slogan for a sailing school.", 40},
	}
	perKey := map[string]float64{}
	perTeam := map[string]float64{}
	for i, c := range calls {
		u := sim.Answer(k.simCfg, userText(c.model, c.text, c.maxTokens)).Usage
		p := prices[c.model]
		want := (float64(u.InputTokens)*p[0] + float64(u.OutputTokens)*p[1]) / 1e6
		perKey[c.key.Key.ID] += want
		perTeam[c.key.Key.Team] += want
		body := fmt.Sprintf(`{"model":%q,"max_tokens":%d,"stream":%v,"messages":[{"role":"user","content":%q}]}`, c.model, c.maxTokens, c.stream, c.text)
		resp, b := k.call(t, c.path, c.key.Secret, body)
		got := resp.Header.Get("X-Mesh-Cost")
		if c.stream {
			if got != "" {
				t.Errorf("call %d: a stream's header carries X-Mesh-Cost %q: its cost is known at its end only", i, got)
			}
			got = resp.Trailer.Get("X-Mesh-Cost")
		}
		if resp.StatusCode != 200 || got != server.FormatCost(want) {
			t.Errorf("call %d (%s, %d in, %d out): status %d, X-Mesh-Cost %q, want %q (%s)", i, c.model, u.InputTokens, u.OutputTokens, resp.StatusCode, got, server.FormatCost(want), b)
		}
	}
	views := k.keyViews(t)
	for id, want := range perKey {
		if got := views[id].DayUSD; math.Abs(got-want) > 1e-9 || math.Abs(views[id].MonthUSD-want) > 1e-9 {
			t.Errorf("key %s spent $%v today, $%v this month; want $%v", id, got, views[id].MonthUSD, want)
		}
	}
	metrics := k.get(t, "/metrics")
	for id, want := range perKey {
		got := 0.0
		for _, line := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(line, "mesh_spend_usd_total{") && strings.Contains(line, `key="`+id+`"`) {
				v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				got += v
			}
		}
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("mesh_spend_usd_total{key=%q} = %v, want %v", id, got, want)
		}
	}
	k.mesh.Close() // writes the request log
	rd, err := sqlite.OpenReader(k.reqlog)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rep, err := reportpkg.Build(rd.Query(context.Background(), time.Time{}), reportpkg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Spend.ByKey) != 2 || len(rep.Spend.ByTeam) != 2 {
		t.Fatalf("report spend %+v, want two keys in two teams", rep.Spend)
	}
	for _, ks := range rep.Spend.ByKey {
		if math.Abs(ks.USD-perKey[ks.Key]) > 1e-9 {
			t.Errorf("report: key %s spent $%v, want $%v", ks.Key, ks.USD, perKey[ks.Key])
		}
	}
	for _, ts := range rep.Spend.ByTeam {
		if math.Abs(ts.USD-perTeam[ts.Team]) > 1e-9 || ts.Keys != 1 {
			t.Errorf("report: team %s spent $%v over %d keys, want $%v over 1", ts.Team, ts.USD, ts.Keys, perTeam[ts.Team])
		}
	}
	if total := perTeam["search"] + perTeam["ads"]; math.Abs(rep.Cost.TotalUSD-total) > 1e-9 || math.Abs(rep.Spend.TotalUSD-total) > 1e-9 {
		t.Errorf("report cost $%v, spend $%v; want both $%v", rep.Cost.TotalUSD, rep.Spend.TotalUSD, total)
	}
}

// get reads path from the mesh's HTTP front.
func (k *keyMesh) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := k.client.Get("http://localhost" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// BenchmarkProxyVirtualKey is a non-streaming call through the proxy's
// handler (no sockets; the simulator in memory) without keys and with a
// virtual key whose every limit is checked: the difference is what the
// key costs a call end to end.
func BenchmarkProxyVirtualKey(b *testing.B) {
	const body = `{"model":"sim-haiku","max_tokens":16,"messages":[{"role":"user","content":"Tell me about keels."}]}`
	for _, keyed := range []bool{false, true} {
		name := "open"
		if keyed {
			name = "key"
		}
		b.Run(name, func(b *testing.B) {
			fleet, err := sim.New(sim.ZeroLatency())
			if err != nil {
				b.Fatal(err)
			}
			cfg := simfleet.Config(fleet, "http://sim.test")
			if keyed {
				cfg.Server.RequireKeys = true
				cfg.Keys.Path = filepath.Join(b.TempDir(), "keys.db")
			}
			m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			secret := "none"
			if keyed {
				st, err := sqlite.OpenKeys(cfg.Keys.Path)
				if err != nil {
					b.Fatal(err)
				}
				_, secret, err = keys.Create(context.Background(), st, keys.Spec{Team: "t", Limits: keys.Limits{Models: []string{"sim-haiku"},
					RPM: 1 << 30, TPM: 1 << 30, DailyUSD: 1e9, MonthlyUSD: 1e9}}, time.Now())
				st.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
			h := m.Handler()
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, "http://localhost/v1/messages", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Anthropic-Version", "2023-06-01")
				req.Header.Set("X-Api-Key", secret)
				rw := &discardWriter{h: http.Header{}}
				h.ServeHTTP(rw, req)
				if rw.status != 200 {
					b.Fatalf("status %d", rw.status)
				}
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps the status only.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return len(p), nil
}
func (w *discardWriter) WriteHeader(s int) { w.status = s }

// Calls a virtual key refuses (403 model, 429 rpm) reach no upstream but
// are in the request log with their key, team, status and code; and the
// log says what the response cache did for each call.
func TestRefusedCallsAndCacheInRequestLog(t *testing.T) {
	k := newKeyMesh(t, sim.ZeroLatency(), func(c *config.Config) { c.Cache.Enabled = true })
	key := k.createKey(t, keys.Spec{Team: "search", Limits: keys.Limits{RPM: 2, Models: []string{"sim-haiku"}}})
	body := func(model string) string {
		return fmt.Sprintf(`{"model":%q,"max_tokens":16,"temperature":0,"messages":[{"role":"user","content":"Tell me about keels."}]}`, model)
	}
	for i, c := range []struct {
		model  string
		status int
		cache  string
	}{
		{"sim-opus", 403, ""}, // not in the key's models: refused
		{"sim-haiku", 200, "miss"},
		{"sim-haiku", 200, "hit"},
		{"sim-haiku", 429, ""}, // the minute's two requests are made
	} {
		resp, b := k.call(t, "/v1/messages", key.Secret, body(c.model))
		if resp.StatusCode != c.status || resp.Header.Get("X-Mesh-Cache") != c.cache {
			t.Fatalf("call %d: %d, X-Mesh-Cache %q, want %d %q: %s", i, resp.StatusCode, resp.Header.Get("X-Mesh-Cache"), c.status, c.cache, b)
		}
	}
	if n := k.up.count(); n != 1 {
		t.Errorf("%d calls reached the upstream, want 1 (the miss)", n)
	}
	k.mesh.Close() // writes the request log
	rd, err := sqlite.OpenReader(k.reqlog)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []string
	for row, err := range rd.Query(context.Background(), time.Time{}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %d %s %s %s %s", row.Model, row.Status, row.MeshErrorCode, row.KeyID, row.Team, row.Cache))
	}
	want := []string{
		"sim-opus 403 MESH_KEY_MODEL_FORBIDDEN " + key.Key.ID + " search ",
		"sim-haiku 200  " + key.Key.ID + " search miss",
		"sim-haiku 200  " + key.Key.ID + " search hit",
		"sim-haiku 429 MESH_KEY_RATE_LIMITED " + key.Key.ID + " search ",
	}
	if !slices.Equal(got, want) {
		t.Errorf("request log rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// With a redis section two meshes (replicas) share their virtual keys and
// each key's limits: a key made through one replica's admin API works on
// the other at once, and its rpm counts the calls of both.
func TestKeysSharedAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	shared := func(c *config.Config) {
		c.Redis = config.Redis{URL: config.Secret(rs.URL()), KeyPrefix: "keys-test:"}
	}
	a := newKeyMesh(t, sim.ZeroLatency(), shared)
	b := newKeyMesh(t, sim.ZeroLatency(), shared)
	body := `{"model":"sim-haiku","max_tokens":16,"messages":[{"role":"user","content":"Tell me about keels."}]}`
	var key keys.Created
	var got []int
	for {
		// The calls must fall in one minute (rpm's window, on the wall
		// clock: the replicas talk to a real Redis): a run that crossed
		// a minute's end is made again with a fresh key.
		start := time.Now().Unix() / 60
		key = a.createKey(t, keys.Spec{Team: "search", Limits: keys.Limits{RPM: 3}})
		got = got[:0]
		for i := range 5 {
			k := a
			if i%2 == 1 {
				k = b
			}
			resp, _ := k.call(t, "/v1/messages", key.Secret, body)
			got = append(got, resp.StatusCode)
		}
		if time.Now().Unix()/60 == start {
			break
		}
	}
	if want := []int{200, 200, 200, 429, 429}; !slices.Equal(got, want) {
		t.Errorf("five calls alternating between the replicas with rpm 3: %v, want %v", got, want)
	}
	if v, ok := b.keyViews(t)[key.Key.ID]; !ok || v.Team != "search" {
		t.Errorf("replica B's key list: %+v, want the key made on A", v)
	}
}

// openaiType is the OpenAI format's word for an error of Anthropic type
// typ and mesh code mesh (wire/openai wireErrorType).
func openaiType(typ, mesh string) string {
	switch typ {
	case "authentication_error", "permission_error", "not_found_error":
		return "invalid_request_error"
	case "rate_limit_error":
		if mesh == "MESH_KEY_BUDGET_EXCEEDED" {
			return "insufficient_quota"
		}
		return "requests"
	}
	return typ
}
