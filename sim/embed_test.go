package sim

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func postEmbeddings(t *testing.T, h http.Handler, body string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/embeddings", strings.NewReader(body)))
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s: body %q is not JSON: %v", body, w.Body, err)
	}
	return w, out
}

func TestEmbeddingsWireShape(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	w, out := postEmbeddings(t, f.Handler(), `{"model":"text-embedding-3-small","input":["How do I reset my password?","怎么重置密码？"],"dimensions":256}`)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if out["object"] != "list" || out["model"] != "text-embedding-3-small" {
		t.Errorf("object %v model %v, want list and text-embedding-3-small", out["object"], out["model"])
	}
	data := out["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("%d data, want 2", len(data))
	}
	for i, d := range data {
		d := d.(map[string]any)
		if d["object"] != "embedding" || d["index"] != float64(i) {
			t.Errorf("data[%d]: object %v index %v", i, d["object"], d["index"])
		}
		vec := d["embedding"].([]any)
		if len(vec) != 256 {
			t.Errorf("data[%d]: %d dimensions, want 256", i, len(vec))
		}
		var sum float64
		for _, x := range vec {
			sum += x.(float64) * x.(float64)
		}
		if math.Abs(sum-1) > 1e-4 {
			t.Errorf("data[%d]: squared norm %v, want 1 (unit vectors, as text-embedding-3)", i, sum)
		}
	}
	u := out["usage"].(map[string]any)
	if u["prompt_tokens"].(float64) <= 0 || u["prompt_tokens"] != u["total_tokens"] {
		t.Errorf("usage %v: want prompt_tokens = total_tokens > 0", u)
	}
}

// TestEmbeddingsOpenAISDK calls the endpoint through openai-go: floats by
// default, base64 when asked (the SDK decodes it), both equal to Embed.
func TestEmbeddingsOpenAISDK(t *testing.T) {
	_, srv := startFleet(t, ZeroLatency())
	c := openaiClient(srv.BaseURL("", FormatOpenAI))
	const text = "What is your refund policy for Germany?"
	want := Embed(text, 1536)
	for _, format := range []openai.EmbeddingNewParamsEncodingFormat{"", openai.EmbeddingNewParamsEncodingFormatFloat, openai.EmbeddingNewParamsEncodingFormatBase64} {
		res, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
			Model: openai.EmbeddingModelTextEmbedding3Small, EncodingFormat: format,
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)},
		})
		if err != nil {
			t.Fatalf("encoding_format %q: %v", format, err)
		}
		got := res.Data[0].Embedding
		if len(got) != len(want) {
			t.Fatalf("encoding_format %q: %d dimensions, want %d", format, len(got), len(want))
		}
		for i := range got {
			if float32(got[i]) != want[i] {
				t.Fatalf("encoding_format %q: [%d] = %v, want %v", format, i, got[i], want[i])
			}
		}
	}
	_, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "text-embedding-4-huge",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound || ae.Code != "model_not_found" {
		t.Fatalf("unknown model: %v, want a 404 model_not_found", err)
	}
}

func TestEmbeddingsBase64IsLittleEndianFloat32(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	_, out := postEmbeddings(t, f.Handler(), `{"model":"text-embedding-3-large","input":"hello world","encoding_format":"base64","dimensions":8}`)
	raw, err := base64.StdEncoding.DecodeString(out["data"].([]any)[0].(map[string]any)["embedding"].(string))
	if err != nil || len(raw) != 32 {
		t.Fatalf("base64 %d bytes, %v; want 32", len(raw), err)
	}
	want := Embed("hello world", 8)
	for i := range want {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != want[i] {
			t.Errorf("[%d] = %v, want %v", i, got, want[i])
		}
	}
}

// TestEmbeddingsRefusals: what the real API refuses, in OpenAI's error shape.
func TestEmbeddingsRefusals(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("word ", maxEmbeddingTokens+1)
	tests := []struct {
		name, body string
		status     int
		param      string
	}{
		{"not JSON", `{"model":`, 400, ""},
		{"trailing data", `{"model":"text-embedding-3-small","input":"x"} {}`, 400, ""},
		{"no model", `{"input":"x"}`, 400, "model"},
		{"unknown model", `{"model":"gpt-4o","input":"x"}`, 404, ""},
		{"no input", `{"model":"text-embedding-3-small"}`, 400, "input"},
		{"empty string", `{"model":"text-embedding-3-small","input":""}`, 400, "input"},
		{"empty list", `{"model":"text-embedding-3-small","input":[]}`, 400, "input"},
		{"empty string in a list", `{"model":"text-embedding-3-small","input":["a",""]}`, 400, "input"},
		{"empty token list", `{"model":"text-embedding-3-small","input":[[1,2],[]]}`, 400, "input"},
		{"number", `{"model":"text-embedding-3-small","input":5}`, 400, "input"},
		{"bad encoding", `{"model":"text-embedding-3-small","input":"x","encoding_format":"hex"}`, 400, "encoding_format"},
		{"dimensions on ada", `{"model":"text-embedding-ada-002","input":"x","dimensions":256}`, 400, "dimensions"},
		{"zero dimensions", `{"model":"text-embedding-3-small","input":"x","dimensions":0}`, 400, "dimensions"},
		{"too many dimensions", `{"model":"text-embedding-3-small","input":"x","dimensions":1537}`, 400, "dimensions"},
		{"too many tokens", `{"model":"text-embedding-3-small","input":"` + long + `"}`, 400, "input"},
		{"too many inputs", `{"model":"text-embedding-3-small","input":[` + strings.Repeat(`"x",`, maxEmbeddingInputs) + `"x"]}`, 400, "input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, out := postEmbeddings(t, f.Handler(), tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			e, ok := out["error"].(map[string]any)
			if !ok {
				t.Fatalf("body %s: no error object", w.Body)
			}
			if _, ok := e["message"].(string); !ok {
				t.Errorf("error %v: no message", e)
			}
			// OpenAI says invalid_request_error (code model_not_found) for an
			// unknown model too.
			wantType := "invalid_request_error"
			if e["type"] != wantType {
				t.Errorf("type %v, want %v", e["type"], wantType)
			}
			if p, _ := e["param"].(string); p != tc.param {
				t.Errorf("param %v, want %q", e["param"], tc.param)
			}
		})
	}
}

func TestEmbedDeterministicUnitVectors(t *testing.T) {
	for _, s := range []string{"How do I reset my password?", "怎么重置密码？", "the of and", "tok17 tok4"} {
		a, b := Embed(s, 512), Embed(s, 512)
		if d := dot(a, b); math.Abs(d-1) > 1e-6 {
			t.Errorf("%q: self-similarity %v, want 1", s, d)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%q: two embeddings differ at %d", s, i)
			}
		}
	}
}

// TestEmbedParaphrasesClose: paraphrases come out closer than questions on
// the same topic that differ in an entity, a number or a negation.
func TestEmbedParaphrasesClose(t *testing.T) {
	tests := []struct {
		name, q, paraphrase, nearMiss string
	}{
		{"entity", "What is your refund policy for Germany?", "How do refunds work for customers in Germany?", "What is your refund policy for France?"},
		{"number", "Can I get a refund if I cancel within 14 days?", "If I cancel in the first 14 days, do I get my money back?", "Can I get a refund if I cancel within 30 days?"},
		{"negation", "Can I return an item that has been opened?", "Is it possible to return an opened item?", "Can I return an item that hasn't been opened?"},
		{"chinese entity", "德国的退款政策是什么？", "请问德国地区的退款政策是怎样的？", "法国的退款政策是什么？"},
		{"chinese number", "十四天内取消能退款吗？", "14天之内取消订单可以退钱吗？", "三十天内取消能退款吗？"},
		{"direction", "How do I convert a string to an integer in JavaScript?", "In JavaScript, how do I turn a string into an integer?", "How do I convert an integer to a string in JavaScript?"},
		{"chinese unit", "会员可以暂停一个月吗？", "会员能暂停一个月吗？", "会员可以暂停一年吗？"},
		{"chinese negation", "拆封的商品可以退货吗？", "商品拆封了还能退货吗？", "没拆封的商品可以退货吗？"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := Embed(tc.q, 1536)
			p, n := dot(q, Embed(tc.paraphrase, 1536)), dot(q, Embed(tc.nearMiss, 1536))
			if p <= n {
				t.Errorf("paraphrase %.3f ≤ near miss %.3f", p, n)
			}
		})
	}
}

func TestHanNumber(t *testing.T) {
	for s, want := range map[string]int{"三": 3, "十": 10, "十五": 15, "二十": 20, "三百五十": 350, "两千": 2000, "二零二四": 2024} {
		if got := hanNumber([]rune(s)); got != want {
			t.Errorf("hanNumber(%s) = %d, want %d", s, got, want)
		}
	}
}

func FuzzEmbeddingInputs(f *testing.F) {
	for _, s := range []string{
		`{"model":"text-embedding-3-small","input":"x"}`,
		`{"model":"text-embedding-3-small","input":["a","怎么重置密码？"],"dimensions":64,"encoding_format":"base64"}`,
		`{"model":"text-embedding-3-large","input":[[1,2],[3]]}`,
		`{"model":"text-embedding-ada-002","input":[5,6],"dimensions":3}`,
		`{"model":"gpt-4o","input":"x"}`,
		`{"model":"text-embedding-3-small","input":""}`,
		`{"model":`,
	} {
		f.Add(s)
	}
	fleet, err := New(ZeroLatency())
	if err != nil {
		f.Fatal(err)
	}
	h := fleet.Handler()
	f.Fuzz(func(t *testing.T, body string) {
		_, inputs, dims, _, err := EmbeddingInputs([]byte(body))
		if err == nil {
			for _, s := range inputs {
				if v := Embed(s, dims); len(v) != dims {
					t.Fatalf("Embed: %d dimensions, want %d", len(v), dims)
				}
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/embeddings", strings.NewReader(body)))
		if (w.Code == http.StatusOK) != (err == nil) {
			t.Fatalf("POST /v1/embeddings %q: status %d, parse error %v", body, w.Code, err)
		}
	})
}
