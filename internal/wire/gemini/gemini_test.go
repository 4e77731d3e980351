package gemini

import (
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

var responseCases = []struct {
	name string
	body string
	want *llm.Response
	err  *llm.APIError
}{
	{
		name: "text",
		body: `{"candidates":[{"content":{"parts":[{"text":"Hi."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":2,"totalTokenCount":6},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
		want: &llm.Response{ID: "r1", Model: "gemini-2.5-flash", Content: []llm.Block{{Type: llm.BlockText, Text: "Hi."}}, StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 4, OutputTokens: 2}},
	},
	{
		name: "thoughts, cache and a call",
		body: `{"candidates":[{"content":{"parts":[{"text":"Hmm.","thought":true},{"functionCall":{"id":"fc-1","name":"f","args":{"a":1}}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":60,"candidatesTokenCount":5,"thoughtsTokenCount":7,"totalTokenCount":112},"responseId":"r2"}`,
		want: &llm.Response{ID: "r2", Content: []llm.Block{{Type: llm.BlockThinking, Thinking: "Hmm."}, {Type: llm.BlockToolUse, ID: "fc-1", Name: "f", Input: []byte(`{"a":1}`)}},
			StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 40, CacheReadTokens: 60, OutputTokens: 12, ReasoningTokens: 7}},
	},
	{
		name: "max tokens",
		body: `{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"MAX_TOKENS","index":0}]}`,
		want: &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "Hi"}}, StopReason: llm.StopMaxTokens},
	},
	{
		name: "unsafe answer",
		body: `{"candidates":[{"finishReason":"SAFETY","index":0}]}`,
		want: &llm.Response{StopReason: llm.StopRefusal},
	},
	{
		name: "blocked prompt",
		body: `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3}}`,
		err:  blocked("PROHIBITED_CONTENT"),
	},
}

func TestParseResponse(t *testing.T) {
	for _, tc := range responseCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseResponse([]byte(tc.body))
			if tc.err != nil {
				var ae *llm.APIError
				if !errors.As(err, &ae) || !reflect.DeepEqual(ae, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseResponse:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestResponseRoundTrip: what EncodeResponse writes, ParseResponse reads
// back (ids aside: Gemini 2 calls carry none).
func TestResponseRoundTrip(t *testing.T) {
	in := &llm.Response{ID: "r", Model: "m", Content: []llm.Block{{Type: llm.BlockThinking, Thinking: "t"}, {Type: llm.BlockText, Text: "x"}, {Type: llm.BlockToolUse, Name: "f", Input: []byte(`{}`)}},
		StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 3, OutputTokens: 9, ReasoningTokens: 4}}
	b, err := EncodeResponse(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ParseResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	in.Content[2].ID = callID("r", 0)
	if !reflect.DeepEqual(out, in) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

var errorCases = []struct {
	name   string
	status int
	header http.Header
	body   string
	want   llm.APIError
}{
	{"rate limit with RetryInfo", 429, nil,
		`{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"38s"}]}}`,
		llm.APIError{Status: 429, Type: llm.ErrRateLimit, RawType: "RESOURCE_EXHAUSTED", Message: "You exceeded your current quota.", RetryAfter: 38 * time.Second}},
	{"retry-after header wins", 429, http.Header{"Retry-After": {"2"}},
		`{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"38s"}]}}`,
		llm.APIError{Status: 429, Type: llm.ErrRateLimit, RawType: "RESOURCE_EXHAUSTED", Message: "slow down", RetryAfter: 2 * time.Second}},
	{"overloaded", 503, nil, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`,
		llm.APIError{Status: 503, Type: llm.ErrOverloaded, RawType: "UNAVAILABLE", Message: "The model is overloaded. Please try again later."}},
	{"bad key", 400, nil, `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`,
		llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, RawType: "INVALID_ARGUMENT", Message: "API key not valid. Please pass a valid API key."}},
	{"array wrapped", 404, nil, `[{"error":{"code":404,"message":"models/x is not found","status":"NOT_FOUND"}}]`,
		llm.APIError{Status: 404, Type: llm.ErrNotFound, RawType: "NOT_FOUND", Message: "models/x is not found"}},
	{"not json", 502, nil, `<html>Bad Gateway</html>`, llm.APIError{Status: 502, Type: llm.ErrAPI, Message: "<html>Bad Gateway</html>"}},
	{"empty", 500, nil, ``, llm.APIError{Status: 500, Type: llm.ErrAPI, Message: "Internal Server Error"}},
}

func TestParseError(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseError(tc.status, tc.header, []byte(tc.body))
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("ParseError:\n got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

func TestEncodeErrorRoundTrip(t *testing.T) {
	for _, e := range []llm.APIError{
		{Status: 429, Type: llm.ErrRateLimit, RawType: "RESOURCE_EXHAUSTED", Message: "quota", RetryAfter: 1500 * time.Millisecond},
		{Status: 403, Type: llm.ErrPermission, RawType: "PERMISSION_DENIED", Message: "no key"},
		{Status: 400, Type: llm.ErrInvalidRequest, RawType: "INVALID_ARGUMENT", Message: "bad"},
	} {
		got := ParseError(e.Status, nil, EncodeError(&e))
		if !reflect.DeepEqual(*got, e) {
			t.Errorf("ParseError(EncodeError):\n got %+v\nwant %+v", *got, e)
		}
	}
}

var streamCases = []struct {
	name  string
	body  string
	types []llm.EventType
	err   error
	text  string
}{
	{"text", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}],\"role\":\"model\"},\"index\":0}],\"responseId\":\"s\"}\r\n\r\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":1,\"candidatesTokenCount\":2,\"totalTokenCount\":3}}\r\n\r\n",
		[]llm.EventType{llm.EventMessageStart, llm.EventBlockStart, llm.EventBlockDelta, llm.EventBlockDelta, llm.EventBlockStop, llm.EventMessageDelta, llm.EventMessageStop}, nil, "ab"},
	{"cut", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}],\"role\":\"model\"},\"index\":0}]}\n\n",
		[]llm.EventType{llm.EventMessageStart, llm.EventBlockStart, llm.EventBlockDelta}, ErrStreamCut, "a"},
	{"error object", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}],\"role\":\"model\"},\"index\":0}]}\n\ndata: {\"error\":{\"code\":503,\"message\":\"overloaded\",\"status\":\"UNAVAILABLE\"}}\n\n",
		[]llm.EventType{llm.EventMessageStart, llm.EventBlockStart, llm.EventBlockDelta, llm.EventError}, nil, "a"},
	{"blocked", "data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"}}\n\n", []llm.EventType{llm.EventError}, nil, ""},
	{"bad json", "data: {\"candidates\":\n\n", nil, errors.New("any"), ""},
}

func TestStreamReader(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			rd := NewStreamReader(strings.NewReader(tc.body))
			var types []llm.EventType
			var text strings.Builder
			var err error
			for {
				var ev *llm.Event
				ev, err = rd.Next()
				if err != nil {
					break
				}
				types = append(types, ev.Type)
				if ev.DeltaType == llm.DeltaText {
					text.WriteString(ev.Delta)
				}
			}
			switch {
			case tc.err == nil && err != io.EOF:
				t.Fatalf("ended with %v, want io.EOF", err)
			case tc.err == ErrStreamCut && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Fatalf("ended with %v, want a cut", err)
			case tc.err != nil && err == io.EOF:
				t.Fatalf("ended cleanly, want an error")
			}
			if !reflect.DeepEqual(types, tc.types) || text.String() != tc.text {
				t.Errorf("events %v text %q, want %v %q", types, text.String(), tc.types, tc.text)
			}
		})
	}
}

// FuzzParseResponse: any body parses or fails, never panics; an answer
// has a stop reason.
func FuzzParseResponse(f *testing.F) {
	for _, tc := range responseCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseResponse(body)
		if err == nil && r.StopReason == "" {
			t.Fatalf("answer without a stop reason: %+v", r)
		}
	})
}

// FuzzStreamReader: any stream ends (EOF, a cut, an error), never panics
// nor loops, and a clean end follows message_stop or an error event.
func FuzzStreamReader(f *testing.F) {
	for _, tc := range streamCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rd := NewStreamReader(strings.NewReader(string(body)))
		var last llm.EventType
		for i := 0; ; i++ {
			if i > 4*len(body)+16 {
				t.Fatal("too many events")
			}
			ev, err := rd.Next()
			if err == io.EOF {
				if last != llm.EventMessageStop && last != llm.EventError {
					t.Fatalf("clean end after %v", last)
				}
				return
			}
			if err != nil {
				return
			}
			last = ev.Type
		}
	})
}

// FuzzParseError: any body and status give an error with a message and
// a type, never a panic.
func FuzzParseError(f *testing.F) {
	for _, tc := range errorCases {
		f.Add(tc.status, []byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 599 {
			return
		}
		e := ParseError(status, nil, body)
		if e.Message == "" || e.Type == "" {
			t.Fatalf("ParseError(%d, %q) = %+v", status, body, e)
		}
	})
}

// FuzzParseRequest: the simulator's parser takes any body without
// panicking, and what it accepts encodes back.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":5,"temperature":0.5}}`))
	f.Add([]byte(`{"contents":[{"role":"user","parts":[{"text":"w?"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"output":"x"}}}]}],"tools":[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"type":"object"}}]}]}`))
	f.Add([]byte(`{"contents":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseRequest(body)
		if err != nil {
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		if len(r.Messages) == 0 {
			t.Fatal("a request without contents was accepted")
		}
	})
}
