package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

var embeddingCases = []struct {
	name, body string
	model      string
	inputs     []string
	mesh       string
	err        string // a substring of the error's message
}{
	{name: "string", body: `{"model":"e","input":"hello world"}`, model: "e", inputs: []string{"hello world"}},
	{name: "strings", body: `{"input":["a","b c"],"model":"e","dimensions":8}`, model: "e", inputs: []string{"a", "b c"}},
	{name: "token ids", body: `{"model":"e","input":[1,2,3]}`, model: "e", inputs: []string{"t t t "}},
	{name: "token id lists", body: `{"model":"e","input":[[1],[2,3]]}`, model: "e", inputs: []string{"t ", "t t "}},
	{name: "mesh behavior", body: `{"model":"e","input":"x","mesh_behavior":{"preferred_region":"eu"}}`, model: "e", inputs: []string{"x"}, mesh: `{"preferred_region":"eu"}`},
	{name: "no model", body: `{"input":"x"}`, err: "you must provide a model parameter"},
	{name: "empty model", body: `{"model":"","input":"x"}`, err: "non-empty string"},
	{name: "model not a string", body: `{"model":3,"input":"x"}`, err: "non-empty string"},
	{name: "no input", body: `{"model":"e"}`, err: "you must provide an input parameter"},
	{name: "input an object", body: `{"model":"e","input":{}}`, err: "input: expected"},
	{name: "not an object", body: `["model"]`, err: "not a JSON object"},
	{name: "not json", body: `{"model":`, err: "not a JSON object"},
}

func TestParseEmbeddings(t *testing.T) {
	for _, tc := range embeddingCases {
		t.Run(tc.name, func(t *testing.T) {
			model, inputs, mesh, ae := parseEmbeddings([]byte(tc.body))
			if tc.err != "" {
				if ae == nil || ae.Status != 400 || !strings.Contains(ae.Message, tc.err) {
					t.Fatalf("error %+v, want a 400 containing %q", ae, tc.err)
				}
				return
			}
			if ae != nil {
				t.Fatal(ae)
			}
			if model != tc.model || !reflect.DeepEqual(inputs, tc.inputs) || string(mesh) != tc.mesh {
				t.Errorf("(-got +want):\n-%q %q %s\n+%q %q %s", model, inputs, mesh, tc.model, tc.inputs, tc.mesh)
			}
		})
	}
}

// FuzzParseEmbeddings checks parseEmbeddings never panics, refuses only
// with a 400, and accepts only bodies with a model and some input.
func FuzzParseEmbeddings(f *testing.F) {
	for _, tc := range embeddingCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		model, inputs, _, ae := parseEmbeddings(body)
		if ae != nil {
			if ae.Status != 400 || ae.Message == "" {
				t.Fatalf("error %+v is not a 400", ae)
			}
			return
		}
		if model == "" || inputs == nil {
			t.Fatalf("accepted model %q inputs %v", model, inputs)
		}
	})
}

var upstreamBodyCases = []struct {
	name, body, model, want string
}{
	{name: "renamed", body: `{"model":"alias","input":"x"}`, model: "up", want: `{"model":"up","input":"x"}`},
	{name: "unchanged", body: `{ "model" : "up", "input": "x" }`, model: "up", want: `{ "model" : "up", "input": "x" }`},
	{name: "mesh behavior dropped", body: `{"mesh_behavior":{"hedge":false},"model":"up","input":"x"}`, model: "up", want: `{"model":"up","input":"x"}`},
	{name: "escaped model key", body: `{"mod\u0065l":"a","messages":[]}`, model: "b", want: `{"mod\u0065l":"b","messages":[]}`},
}

func TestUpstreamBody(t *testing.T) {
	for _, tc := range upstreamBodyCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(upstreamBody([]byte(tc.body), tc.model)); got != tc.want {
				t.Errorf("(-got +want):\n-%s\n+%s", got, tc.want)
			}
		})
	}
}

// FuzzUpstreamBody checks that a JSON object comes out a JSON object
// with the same members but mesh_behavior, and model set.
func FuzzUpstreamBody(f *testing.F) {
	for _, tc := range upstreamBodyCases {
		f.Add([]byte(tc.body), tc.model)
	}
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		var in map[string]json.RawMessage
		if !utf8.ValidString(model) || !jsonx.Valid(body) || json.Unmarshal(body, &in) != nil || in == nil || len(jsonx.TrimSpace(body)) == 0 {
			return
		}
		out := upstreamBody(body, model)
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("upstreamBody(%q) = %q: %v", body, out, err)
		}
		if _, ok := in["model"]; ok {
			var m string
			if json.Unmarshal(got["model"], &m) != nil || m != model {
				t.Fatalf("model %s, want %q", got["model"], model)
			}
		}
		if _, ok := got["mesh_behavior"]; ok {
			t.Fatal("mesh_behavior kept")
		}
		delete(in, "mesh_behavior")
		if len(got) != len(in) {
			t.Fatalf("members %v, want %v", got, in)
		}
	})
}

func TestAPIPath(t *testing.T) {
	for in, want := range map[string]string{
		"/chat/completions": "/v1/chat/completions", "/embeddings": "/v1/embeddings", "/models": "/v1/models",
		"/models/gpt-4o": "/v1/models/gpt-4o", "/models/meta-llama/Llama-3": "/v1/models/meta-llama/Llama-3",
		"/v1/models": "/v1/models", "/messages": "/messages", "/": "/", "/modelsx": "/modelsx",
	} {
		if got := apiPath(in); got != want {
			t.Errorf("apiPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSideRouteMatch(t *testing.T) {
	get := &sideRoutes[3] // /v1/models/{id}
	cases := []struct {
		name, path string
		embedded   bool
		rest       string
		ok         bool
	}{
		{name: "root", path: "/v1/models/sim-sonnet", rest: "sim-sonnet", ok: true},
		{name: "slash in id", path: "/v1/models/meta-llama/Llama-3", rest: "meta-llama/Llama-3", ok: true},
		{name: "no id", path: "/v1/models/", ok: false},
		{name: "prefixed, served", path: "/openai/v1/models/x", embedded: true, rest: "x", ok: true},
		{name: "prefixed, not embedded", path: "/openai/v1/models/x", ok: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rest, ok := get.match(tc.path, tc.embedded)
			if rest != tc.rest || ok != tc.ok {
				t.Errorf("match = %q %v, want %q %v", rest, ok, tc.rest, tc.ok)
			}
		})
	}
	emb := &sideRoutes[1]
	if _, ok := emb.match("/v1/embeddings", false); !ok {
		t.Error("/v1/embeddings not matched")
	}
	if _, ok := emb.match("/proxy/embeddings", true); !ok {
		t.Error("embedded /proxy/embeddings not matched")
	}
}

// TestUnknownLogLimit: a burst of lines, then one per interval, each
// saying how many it suppressed.
func TestUnknownLogLimit(t *testing.T) {
	var u unknownLog
	now := time.Unix(0, 0)
	for i := range unknownLogBurst {
		if n, ok := u.allow(now); !ok || n != 0 {
			t.Fatalf("line %d: %d %v, want allowed", i, n, ok)
		}
	}
	for range 3 {
		if _, ok := u.allow(now); ok {
			t.Fatal("allowed beyond the burst")
		}
	}
	if n, ok := u.allow(now.Add(unknownLogEvery)); !ok || n != 3 {
		t.Errorf("after an interval: %d %v, want allowed with 3 suppressed", n, ok)
	}
}

func TestWithInputs(t *testing.T) {
	msgs := func(texts ...string) []llm.Message {
		var out []llm.Message
		for _, s := range texts {
			out = append(out, llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: s}}})
		}
		return out
	}
	cases := []struct {
		name, body string
		msgs       []llm.Message
		want       string
	}{
		{name: "string stays a string", body: `{"model":"e","input":"mail a@b.c","dimensions":8}`, msgs: msgs("mail [EMAIL]"), want: `{"model":"e","input":"mail [EMAIL]","dimensions":8}`},
		{name: "list stays a list", body: `{"input":["x","a@b.c"],"model":"e"}`, msgs: msgs("x", "[EMAIL]"), want: `{"input":["x","[EMAIL]"],"model":"e"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(withInputs([]byte(tc.body), tc.msgs)); got != tc.want {
				t.Errorf("(-got +want):\n-%s\n+%s", got, tc.want)
			}
		})
	}
}
