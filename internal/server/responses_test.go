package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
)

func TestResponsesItemPath(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		embedded   bool
		id         string
		ok         bool
	}{
		{"v1", "/v1/responses/resp_1", false, "resp_1", true},
		{"no_v1", "/responses/resp_1", false, "resp_1", true},
		{"embedded_prefix", "/openai/v1/responses/resp_1", true, "resp_1", true},
		{"prefix_not_embedded", "/openai/v1/responses/resp_1", false, "", false},
		{"collection", "/v1/responses", false, "", false},
		{"empty_id", "/v1/responses/", false, "", false},
		{"input_items", "/v1/responses/resp_1/input_items", false, "", false},
		{"cancel", "/v1/responses/resp_1/cancel", false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, ok := responsesItemPath(tc.path, tc.embedded)
			if id != tc.id || ok != tc.ok {
				t.Fatalf("responsesItemPath(%q, %v) = %q, %v; want %q, %v", tc.path, tc.embedded, id, ok, tc.id, tc.ok)
			}
		})
	}
}

func FuzzResponsesItemPath(f *testing.F) {
	for _, p := range []string{"/v1/responses/resp_1", "/responses/x", "/a/responses/b", "/v1/responses/", "/v1/responses/a/b", "/responses//"} {
		f.Add(p, true)
		f.Add(p, false)
	}
	f.Fuzz(func(t *testing.T, path string, embedded bool) {
		id, ok := responsesItemPath(path, embedded)
		if ok && (id == "" || strings.Contains(id, "/") || !strings.HasSuffix(path, "/responses/"+id)) {
			t.Fatalf("responsesItemPath(%q) = %q: not the path's last segment after /responses/", path, id)
		}
	})
}

// keyCaller is a Caller with a key id (the admission is never used here).
type keyCaller string

func (k keyCaller) Labels() (string, string) { return string(k), "" }
func (keyCaller) Admit(context.Context, *llm.Request) (func(float64, int), *llm.APIError) {
	return func(float64, int) {}, nil
}

// GET returns the stored response object byte for byte, DELETE answers
// OpenAI's response.deleted object, and then both are OpenAI's 404 in
// the OpenAI error shape; another key sees nothing; other methods 405.
func TestResponseItemGetDelete(t *testing.T) {
	conv := convstate.New(convstate.NewMemory(convstate.Bounds{}), convstate.Options{})
	keep, ae := conv.Begin(context.Background(), &llm.Request{Format: llm.FormatResponses, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}}}, "key-a")
	if ae != nil {
		t.Fatal(ae)
	}
	served := `{"id":"resp_42","object":"response","status":"completed","output":[]}`
	keep(context.Background(), &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "hello"}}}, []byte(served), "ep")
	caller := keyCaller("key-a")
	s := New(Options{Conversations: conv, Authenticate: func(r *http.Request) (Caller, *llm.APIError) {
		if k := r.Header.Get("X-Key"); k != "" {
			return keyCaller(k), nil
		}
		return caller, nil
	}})
	do := func(method, path, key string) (int, string) {
		r := httptest.NewRequest(method, "http://localhost"+path, nil)
		if key != "" {
			r.Header.Set("X-Key", key)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	notFound := `{"error":{"message":"Response with id 'resp_42' not found.","type":"invalid_request_error","param":null,"code":null}}`
	for _, tc := range []struct {
		name, method, path, key string
		status                  int
		body                    string
	}{
		{"get", http.MethodGet, "/v1/responses/resp_42", "", 200, served},
		{"get_without_v1", http.MethodGet, "/responses/resp_42", "", 200, served},
		{"other_key", http.MethodGet, "/v1/responses/resp_42", "key-b", 404, notFound},
		{"other_key_delete", http.MethodDelete, "/v1/responses/resp_42", "key-b", 404, notFound},
		{"post", http.MethodPost, "/v1/responses/resp_42", "", 405, ""},
		{"stream_replay", http.MethodGet, "/v1/responses/resp_42?stream=true", "", 400, ""},
		{"delete", http.MethodDelete, "/v1/responses/resp_42", "", 200, `{"id":"resp_42","object":"response.deleted","deleted":true}`},
		{"get_deleted", http.MethodGet, "/v1/responses/resp_42", "", 404, notFound},
		{"delete_deleted", http.MethodDelete, "/responses/resp_42", "", 404, notFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := do(tc.method, tc.path, tc.key)
			if status != tc.status || tc.body != "" && body != tc.body {
				t.Fatalf("%s %s = %d %s; want %d %s", tc.method, tc.path, status, body, tc.status, tc.body)
			}
			if status >= 400 {
				var e struct {
					Error struct{ Type string } `json:"error"`
				}
				if json.Unmarshal([]byte(body), &e) != nil || e.Error.Type == "" {
					t.Fatalf("error body %s is not OpenAI's shape", body)
				}
			}
		})
	}
}

// A stream's answer is kept once, at the first event that ends it
// (message_delta), before that event is written; a stream that ends in
// an error event keeps nothing.
func TestStreamKeeperKeepsAtTheEnd(t *testing.T) {
	usage := &llm.Usage{InputTokens: 3, OutputTokens: 2}
	events := []*llm.Event{
		{Type: llm.EventMessageStart, Message: &llm.Response{ID: "resp_s1", Model: "m"}},
		{Type: llm.EventBlockStart, Index: 0, Block: &llm.Block{Type: llm.BlockText}},
		{Type: llm.EventBlockDelta, Index: 0, DeltaType: llm.DeltaText, Delta: "Hel"},
		{Type: llm.EventBlockDelta, Index: 0, DeltaType: llm.DeltaText, Delta: "lo"},
		{Type: llm.EventBlockStop, Index: 0},
		{Type: llm.EventMessageDelta, StopReason: llm.StopEndTurn, Usage: usage},
		{Type: llm.EventMessageStop},
	}
	var kept []string
	var at []int
	k := &streamKeeper{codec: wire.For(llm.FormatResponses), endpoint: func() string { return "ep-1" },
		keep: func(_ context.Context, resp *llm.Response, served []byte, endpoint string) {
			kept = append(kept, resp.Text()+" "+endpoint+" "+string(served[:len(`{"id":"resp_s1"`)]))
		}}
	for i, ev := range events {
		n := len(kept)
		k.see(context.Background(), ev)
		if len(kept) > n {
			at = append(at, i)
		}
	}
	if len(kept) != 1 || at[0] != 5 || kept[0] != `Hello ep-1 {"id":"resp_s1"` {
		t.Fatalf("kept %q at events %v; want once, at message_delta (5), the whole answer", kept, at)
	}

	kept = nil
	k = &streamKeeper{codec: wire.For(llm.FormatResponses), endpoint: func() string { return "ep-1" },
		keep: func(context.Context, *llm.Response, []byte, string) { kept = append(kept, "x") }}
	for _, ev := range append(events[:4:4], &llm.Event{Type: llm.EventError, Err: &llm.APIError{Type: llm.ErrOverloaded}}) {
		k.see(context.Background(), ev)
	}
	if len(kept) != 0 {
		t.Fatal("a stream that failed was kept")
	}
	var none *streamKeeper
	none.see(context.Background(), events[0]) // store false: no keeper, no effect
}
