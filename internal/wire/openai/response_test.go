package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

func TestResponseGolden(t *testing.T) {
	for name, path := range cases(t, "response", ".json") {
		t.Run(name, func(t *testing.T) {
			r, err := ParseResponse(readFile(t, path))
			if err != nil {
				t.Fatalf("ParseResponse: %v", err)
			}
			base := strings.TrimSuffix(path, ".json")
			checkGolden(t, base+".canonical.golden", dump(t, r))
			enc, err := EncodeResponse(r)
			if err != nil {
				t.Fatalf("EncodeResponse: %v", err)
			}
			if !json.Valid(enc) {
				t.Fatalf("invalid JSON: %s", enc)
			}
			checkGolden(t, base+".encoded.golden", append(bytes.Clone(enc), '\n'))
			r2, err := ParseResponse(enc)
			if err != nil {
				t.Fatalf("ParseResponse(EncodeResponse): %v", err)
			}
			if !reflect.DeepEqual(r2, r) {
				t.Errorf("round trip differs (-got +want):\n%s", diff(string(dump(t, r2)), string(dump(t, r))))
			}
		})
	}
}

func TestParseResponseMapping(t *testing.T) {
	parse := func(name string) *llm.Response {
		r, err := ParseResponse(readFile(t, "testdata/response/"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"text", parse("text").Text(), "Hello! How can I help?"},
		{"text stop", parse("text").StopReason, llm.StopEndTurn},
		{"text usage", parse("text").Usage.InputTokens, 12},
		{"text fingerprint", parse("text").SystemFingerprint, "fp_abc123"},
		{"text annotations kept", string(parse("text").MessageExtra["annotations"]), "[]"},
		{"text service_tier kept", string(parse("text").Extra["service_tier"]), `"default"`},
		{"tool calls stop", parse("tool_calls").StopReason, llm.StopToolUse},
		{"tool call 0", string(parse("tool_calls").Content[0].Input), `{"city":"Paris"}`},
		{"tool call 1 id", parse("tool_calls").Content[1].ID, "call_b"},
		{"cached usage", parse("cached_usage").Usage, llm.Usage{
			InputTokens: 80, OutputTokens: 300, CacheReadTokens: 1920, CacheWriteTokens: 100, ReasoningTokens: 256,
			Extra: llm.Extra{"cost": json.RawMessage("0.0012"), "prompt_tokens_details": json.RawMessage(`{"audio_tokens":0}`)}}},
		{"length", parse("cached_usage").StopReason, llm.StopMaxTokens},
		{"choice extra", len(parse("cached_usage").ChoiceExtra), 2},
		{"refusal", parse("refusal").Refusal, "I can't help with that."},
		{"content_filter", parse("refusal").StopReason, llm.StopRefusal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("(-got +want):\n- %#v\n+ %#v", tc.got, tc.want)
			}
		})
	}
}

func TestEncodeResponse(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *llm.Response
		want string
	}{
		{
			name: "anthropic origin: thinking dropped, stop_sequence, cache write",
			r: &llm.Response{ID: "msg_1", Model: "claude-x", Created: 1700000000, StopReason: llm.StopSequence, StopSequence: "END",
				Content: []llm.Block{
					{Type: llm.BlockThinking, Thinking: "hmm", Signature: "s"},
					{Type: llm.BlockText, Text: "Hello "},
					{Type: llm.BlockText, Text: "world"},
					{Type: llm.BlockToolUse, ID: "toolu_1", Name: "f", Input: json.RawMessage(`{"a":[1,2]}`)},
					{Type: llm.BlockToolUse, ID: "toolu_2", Name: "g"},
				},
				Usage: llm.Usage{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 100, CacheWriteTokens: 20, ReasoningTokens: 3}},
			want: `{"id":"msg_1","object":"chat.completion","created":1700000000,"model":"claude-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello world","refusal":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"f","arguments":"{\"a\":[1,2]}"}},{"id":"toolu_2","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"stop","logprobs":null}],"usage":{"prompt_tokens":130,"completion_tokens":5,"total_tokens":135,"prompt_tokens_details":{"cached_tokens":100,"cache_write_tokens":20},"completion_tokens_details":{"reasoning_tokens":3}}}`,
		},
		{
			name: "no text gives null content",
			r:    &llm.Response{ID: "x", Model: "m", StopReason: llm.StopMaxTokens},
			want: `{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null},"finish_reason":"length","logprobs":null}],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeResponse(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("(-got +want):\n- %s\n+ %s", got, tc.want)
			}
		})
	}
}

func TestStopReasonMapping(t *testing.T) {
	for _, tc := range []struct {
		stop   llm.StopReason
		finish string
		back   llm.StopReason
	}{
		{llm.StopEndTurn, "stop", llm.StopEndTurn},
		{llm.StopSequence, "stop", llm.StopEndTurn},
		{llm.StopMaxTokens, "length", llm.StopMaxTokens},
		{llm.StopToolUse, "tool_calls", llm.StopToolUse},
		{llm.StopRefusal, "content_filter", llm.StopRefusal},
		{llm.StopPauseTurn, "stop", llm.StopEndTurn},
		{llm.StopContextLimit, "length", llm.StopMaxTokens},
		{"", "", ""},
		{"something_new", "something_new", "something_new"},
	} {
		t.Run(string(tc.stop), func(t *testing.T) {
			if got := finishReason(tc.stop); got != tc.finish {
				t.Errorf("finishReason(%q) = %q, want %q", tc.stop, got, tc.finish)
			}
			if got := stopReason(tc.finish); got != tc.back {
				t.Errorf("stopReason(%q) = %q, want %q", tc.finish, got, tc.back)
			}
		})
	}
	if got := stopReason("function_call"); got != llm.StopToolUse {
		t.Errorf("stopReason(function_call) = %q", got)
	}
}

func TestParseResponseErrors(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"not JSON", `<html>`},
		{"array", `[]`},
		{"choices object", `{"choices":{}}`},
		{"content number", `{"choices":[{"message":{"content":1}}]}`},
		{"usage string", `{"usage":"x"}`},
		{"tokens string", `{"usage":{"prompt_tokens":"1"}}`},
		{"created string", `{"created":"now"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseResponse([]byte(tc.body))
			var e *llm.APIError
			if !errors.As(err, &e) || e.Status != 502 || e.MeshCode != llm.MeshUpstreamProtocolFailed {
				t.Errorf("err = %v, want a 502 %s APIError", err, llm.MeshUpstreamProtocolFailed)
			}
		})
	}
}

func TestErrorGolden(t *testing.T) {
	errs := []struct {
		name string
		e    *llm.APIError
	}{
		{"bad request from keel", &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: "messages[0].role", Message: `messages[0].role: unsupported role "function"`}},
		{"rate limit with code", &llm.APIError{Status: 429, Type: llm.ErrRateLimit, Code: "rate_limit_exceeded", Message: "Rate limit reached", RequestID: "req_1", RetryAfter: 1500 * time.Millisecond}},
		{"upstream raw type", &llm.APIError{Status: 429, Type: llm.ErrRateLimit, RawType: "tokens", Code: "rate_limit_exceeded", Message: "Rate limit reached for gpt-4o on tokens per min (TPM)"}},
		{"quota", &llm.APIError{Status: 429, Type: llm.ErrRateLimit, Code: "insufficient_quota", Message: "You exceeded your current quota"}},
		{"unknown model from keel", &llm.APIError{Status: 404, Type: llm.ErrNotFound, Code: "model_not_found", Message: `model: "gpt-9" is not served by this mesh`}},
		{"server error", &llm.APIError{Status: 500, Type: llm.ErrAPI, Message: "The server had an error"}},
		{"fallback exhausted", &llm.APIError{Status: 503, Type: llm.ErrOverloaded, MeshCode: llm.MeshFallbackExhausted, Message: "all candidates failed"}},
		{"auth", &llm.APIError{Status: 401, Type: llm.ErrAuthentication, Code: "invalid_api_key", Message: "bad key \"x\"\n"}},
	}
	var golden bytes.Buffer
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			body := EncodeError(tc.e)
			if !json.Valid(body) {
				t.Fatalf("invalid JSON: %s", body)
			}
			golden.Write(body)
			golden.WriteByte('\n')
			h := http.Header{}
			if tc.e.RequestID != "" {
				h.Set("x-request-id", tc.e.RequestID)
			}
			if tc.e.RetryAfter != 0 {
				h.Set("retry-after-ms", "1500")
			}
			got := ParseError(tc.e.Status, h, body)
			if !reflect.DeepEqual(got, tc.e) {
				t.Errorf("round trip (-got +want):\n- %+v\n+ %+v", got, tc.e)
			}
		})
	}
	checkGolden(t, "testdata/errors.golden", golden.Bytes())
}

// parseErrorCases are TestParseError's table, and FuzzParseError's seeds.
var parseErrorCases = []struct {
	name   string
	status int
	h      http.Header
	body   string
	want   llm.APIError
}{
	{"openai 401 says invalid_request_error", 401, http.Header{"X-Request-Id": {"req_9"}},
		`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
		llm.APIError{Status: 401, Type: llm.ErrAuthentication, Code: "invalid_api_key", Message: "Incorrect API key provided", RequestID: "req_9"}},
	{"non-JSON body", 502, nil, "  <html>Bad Gateway</html>\n",
		llm.APIError{Status: 502, Type: llm.ErrAPI, Message: "<html>Bad Gateway</html>"}},
	{"empty body", 503, http.Header{"Retry-After": {"7"}}, "",
		llm.APIError{Status: 503, Type: llm.ErrOverloaded, Message: "Service Unavailable", RetryAfter: 7 * time.Second}},
	{"error is a string", 400, nil, `{"error":"bad things"}`,
		llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, Message: "bad things"}},
	{"top-level message and numeric code", 429, http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, `{"message":"slow down","error":{"code":1302,"type":"tokens"}}`,
		llm.APIError{Status: 429, Type: llm.ErrRateLimit, RawType: "tokens", Code: "1302", Message: "slow down", RetryAfter: 250 * time.Millisecond}},
	{"server_error on 503", 503, nil, `{"error":{"message":"Overloaded","type":"server_error"}}`,
		llm.APIError{Status: 503, Type: llm.ErrOverloaded, Message: "Overloaded"}},
	{"mesh code from another keel", 504, nil, `{"error":{"message":"deadline","type":"timeout_error","mesh_error_code":"MESH_TIMEOUT"}}`,
		llm.APIError{Status: 504, Type: llm.ErrTimeout, RawType: "timeout_error", MeshCode: llm.MeshTimeout, Message: "deadline"}},
	{"long text truncated", 500, nil, strings.Repeat("é", 600),
		llm.APIError{Status: 500, Type: llm.ErrAPI, Message: strings.Repeat("é", 512) + "…"}},
	{"garbage retry-after", 429, http.Header{"Retry-After": {"soon"}}, `{}`,
		llm.APIError{Status: 429, Type: llm.ErrRateLimit, Message: "Too Many Requests"}},
	// vllm-project/vllm#4667, #20409: vLLM's top-level shape.
	{"vllm top-level type and code", 400, nil,
		`{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 122946 tokens (112946 in the messages, 10000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`,
		llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, RawType: "BadRequestError", Code: "400", Message: "This model's maximum context length is 16384 tokens. However, you requested 122946 tokens (112946 in the messages, 10000 in the completion). Please reduce the length of the messages or completion."}},
	// PROTOCOLS.md §6.2: llama.cpp's numeric code and its own type.
	{"llama.cpp context size", 400, nil,
		`{"error":{"code":400,"message":"request (1441 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":1441,"n_ctx":1024}}`,
		llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, RawType: "exceed_context_size_error", Code: "400", Message: "request (1441 tokens) exceeds the available context size (1024 tokens), try increasing it"}},
	// google-gemini/gemini-cli#6678: Google's status, in an array.
	{"gemini status in an array", 400, nil,
		`[{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","errors":[{"message":"x","domain":"global","reason":"badRequest"}],"status":"INVALID_ARGUMENT"}}]`,
		llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, RawType: "INVALID_ARGUMENT", Code: "400", Message: "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."}},
	// aws-samples/assessment-generator#2: AWS names the error in a header.
	{"aws error type header", 400, http.Header{"X-Amzn-Errortype": {"ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"}},
		`{"message":"Input is too long for requested model."}`,
		llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, RawType: "ValidationException", Message: "Input is too long for requested model."}},
}

func TestParseError(t *testing.T) {
	for _, tc := range parseErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseError(tc.status, tc.h, []byte(tc.body))
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("(-got +want):\n- %+v\n+ %+v", *got, tc.want)
			}
		})
	}
	t.Run("retry-after HTTP date", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			at := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
			got := ParseError(429, http.Header{"Retry-After": {at}}, nil)
			if got.RetryAfter != 30*time.Second {
				t.Errorf("RetryAfter = %v, want 30s", got.RetryAfter)
			}
		})
	})
}
