package convstate_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/llm"
)

// clock is an injected clock tests move by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newStore(t *testing.T, cfg convstate.Config) (*convstate.Store, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)}
	return convstate.New(convstate.NewMemory(cfg.Bounds()), convstate.Options{Config: cfg, Now: c.now}), c
}

func text(role llm.Role, s string) llm.Message {
	return llm.Message{Role: role, Content: []llm.Block{{Type: llm.BlockText, Text: s}}}
}

func request(prev string, msgs ...llm.Message) *llm.Request {
	r := &llm.Request{Format: llm.FormatResponses, Model: "m", Messages: msgs}
	if prev != "" {
		r.Extra = llm.Extra{"previous_response_id": json.RawMessage(`"` + prev + `"`), "metadata": json.RawMessage(`{"k":"v"}`)}
	}
	return r
}

// A follow-up gets the whole history in front of its input, tool calls
// and their outputs included, and loses previous_response_id (no endpoint
// is asked for state it may not have); the first turn's instructions
// (System) are not carried over, as OpenAI does not.
func TestBeginExpandsHistoryWithToolCalls(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, convstate.Config{})
	first := request("", text(llm.RoleUser, "weather in Paris?"))
	first.System = []llm.Block{{Type: llm.BlockText, Text: "be brief"}}
	keep, ae := s.Begin(ctx, first, "")
	if ae != nil || keep == nil {
		t.Fatalf("Begin = %v, %v", keep != nil, ae)
	}
	call := llm.Block{Type: llm.BlockToolUse, ID: "call_1", Name: "weather", Input: json.RawMessage(`{"city":"Paris"}`)}
	keep(ctx, &llm.Response{ID: "msg_1", Content: []llm.Block{call}, StopReason: llm.StopToolUse}, []byte(`{"id":"resp_1","object":"response"}`), "ep-a")

	output := llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockToolResult, ToolUseID: "call_1", Content: []llm.Block{{Type: llm.BlockText, Text: "18C"}}}}}
	second := request("resp_1", output)
	keep, ae = s.Begin(ctx, second, "")
	if ae != nil {
		t.Fatal(ae)
	}
	want := []llm.Message{text(llm.RoleUser, "weather in Paris?"), {Role: llm.RoleAssistant, Content: []llm.Block{call}}, output}
	if !reflect.DeepEqual(second.Messages, want) {
		t.Fatalf("expanded messages:\n got %s\nwant %s", js(second.Messages), js(want))
	}
	if _, ok := second.Extra["previous_response_id"]; ok || string(second.Extra["metadata"]) != `{"k":"v"}` {
		t.Fatalf("Extra = %v; want previous_response_id gone, the rest kept", second.Extra)
	}
	if second.System != nil {
		t.Fatalf("System = %v; the first turn's instructions must not be carried over", second.System)
	}
	keep(ctx, &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "18C and sunny"}}}, []byte(`{"id":"resp_2"}`), "ep-b")

	// A third turn sees all of it.
	third := request("resp_2", text(llm.RoleUser, "thanks"))
	if _, ae := s.Begin(ctx, third, ""); ae != nil {
		t.Fatal(ae)
	}
	if len(third.Messages) != 5 || third.Messages[3].Text() != "18C and sunny" {
		t.Fatalf("third turn's messages = %+v", third.Messages)
	}
	c, ae := s.Get(ctx, "resp_2", "")
	if ae != nil || string(c.Response) != `{"id":"resp_2"}` || c.Endpoint != "ep-b" {
		t.Fatalf("Get = %+v, %v", c, ae)
	}
}

// An unknown id is OpenAI's 404: invalid_request_error,
// previous_response_not_found, param previous_response_id.
func TestBeginUnknownPreviousIs404(t *testing.T) {
	s, _ := newStore(t, convstate.Config{})
	_, ae := s.Begin(context.Background(), request("resp_nope", text(llm.RoleUser, "hi")), "")
	want := &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrInvalidRequest, Code: "previous_response_not_found", Param: "previous_response_id",
		Message: "Previous response with id 'resp_nope' not found."}
	if !reflect.DeepEqual(ae, want) {
		t.Fatalf("error:\n got %+v\nwant %+v", ae, want)
	}
}

// store false keeps nothing; a wrong type for store or
// previous_response_id is a 400 naming the member.
func TestBeginStoreFalseAndBadMembers(t *testing.T) {
	s, _ := newStore(t, convstate.Config{})
	r := request("", text(llm.RoleUser, "hi"))
	r.Extra = llm.Extra{"store": json.RawMessage("false")}
	if keep, ae := s.Begin(context.Background(), r, ""); keep != nil || ae != nil {
		t.Fatalf("store false: Begin = %v, %v; want nothing to keep", keep != nil, ae)
	}
	for _, tc := range []struct {
		name, member, raw string
	}{
		{"store_string", "store", `"yes"`},
		{"previous_number", "previous_response_id", `12`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request("", text(llm.RoleUser, "hi"))
			r.Extra = llm.Extra{tc.member: json.RawMessage(tc.raw)}
			_, ae := s.Begin(context.Background(), r, "")
			if ae == nil || ae.Status != http.StatusBadRequest || ae.Param != tc.member {
				t.Fatalf("Begin = %v; want 400 on %s", ae, tc.member)
			}
		})
	}
}

// A conversation is its key's: another virtual key neither reads,
// deletes nor continues it (404, as for an unknown id), and storing the
// same id does not replace it.
func TestConversationsArePerKey(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, convstate.Config{})
	keep, _ := s.Begin(ctx, request("", text(llm.RoleUser, "hi")), "key-a")
	keep(ctx, &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "hello"}}}, []byte(`{"id":"resp_a"}`), "ep")
	if _, ae := s.Get(ctx, "resp_a", "key-b"); ae == nil || ae.Status != 404 {
		t.Fatalf("Get by another key = %v; want 404", ae)
	}
	if ae := s.Delete(ctx, "resp_a", "key-b"); ae == nil || ae.Status != 404 {
		t.Fatalf("Delete by another key = %v; want 404", ae)
	}
	if _, ae := s.Begin(ctx, request("resp_a", text(llm.RoleUser, "more")), "key-b"); ae == nil || ae.Code != "previous_response_not_found" {
		t.Fatalf("follow-up by another key = %v; want previous_response_not_found", ae)
	}
	// The same id served to another key (a response cache shared across
	// keys replays ids) is that key's own entry: neither replaces the other.
	keep, _ = s.Begin(ctx, request("", text(llm.RoleUser, "hi")), "key-b")
	keep(ctx, &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "hello b"}}}, []byte(`{"id":"resp_a","b":1}`), "ep")
	if c, ae := s.Get(ctx, "resp_a", "key-a"); ae != nil || string(c.Response) != `{"id":"resp_a"}` {
		t.Fatalf("key-a's resp_a after key-b stored one: %+v, %v", c, ae)
	}
	if c, ae := s.Get(ctx, "resp_a", "key-b"); ae != nil || string(c.Response) != `{"id":"resp_a","b":1}` {
		t.Fatalf("key-b's resp_a: %+v, %v", c, ae)
	}
	if ae := s.Delete(ctx, "resp_a", "key-a"); ae != nil {
		t.Fatal(ae)
	}
	if _, ae := s.Get(ctx, "resp_a", "key-a"); ae == nil || ae.Status != 404 || ae.Message != "Response with id 'resp_a' not found." {
		t.Fatalf("Get after Delete = %v; want 404", ae)
	}
}

// A conversation expires store_ttl after it was kept (injected clock).
func TestConversationExpires(t *testing.T) {
	ctx := context.Background()
	s, clk := newStore(t, convstate.Config{TTL: time.Hour})
	keep, _ := s.Begin(ctx, request("", text(llm.RoleUser, "hi")), "")
	keep(ctx, &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "hello"}}}, []byte(`{"id":"resp_t"}`), "ep")
	clk.t = clk.t.Add(time.Hour - time.Millisecond)
	if _, ae := s.Begin(ctx, request("resp_t", text(llm.RoleUser, "more")), ""); ae != nil {
		t.Fatalf("just before the TTL: %v", ae)
	}
	clk.t = clk.t.Add(time.Millisecond)
	if _, ae := s.Begin(ctx, request("resp_t", text(llm.RoleUser, "more")), ""); ae == nil || ae.Code != "previous_response_not_found" {
		t.Fatalf("at the TTL: %v; want previous_response_not_found", ae)
	}
}

// max_conversations drops the oldest conversation first.
func TestConversationBoundEvictsOldest(t *testing.T) {
	ctx := context.Background()
	s, clk := newStore(t, convstate.Config{MaxConversations: 2})
	for _, id := range []string{"resp_1", "resp_2", "resp_3"} {
		keep, _ := s.Begin(ctx, request("", text(llm.RoleUser, "hi")), "")
		keep(ctx, &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "hello"}}}, []byte(`{"id":"`+id+`"}`), "ep")
		clk.t = clk.t.Add(time.Second)
	}
	if _, ae := s.Get(ctx, "resp_1", ""); ae == nil || ae.Status != 404 {
		t.Fatalf("oldest: %v; want evicted", ae)
	}
	for _, id := range []string{"resp_2", "resp_3"} {
		if _, ae := s.Get(ctx, id, ""); ae != nil {
			t.Fatalf("%s: %v", id, ae)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  convstate.Config
		ok   bool
	}{
		{"zero", convstate.Config{}, true},
		{"redis", convstate.Config{Store: "redis"}, true},
		{"negative_ttl", convstate.Config{TTL: -1}, false},
		{"negative_entries", convstate.Config{MaxConversations: -1}, false},
		{"negative_bytes", convstate.Config{MaxBytes: -1}, false},
		{"unknown_store", convstate.Config{Store: "disk"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate = %v; want ok %v", err, tc.ok)
			}
		})
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// failingBackend is a backend that cannot be reached.
type failingBackend struct{}

func (failingBackend) Put(context.Context, string, *convstate.Conversation, time.Time, time.Time) error {
	return errors.New("connection refused")
}
func (failingBackend) Get(context.Context, string, time.Time) (*convstate.Conversation, error) {
	return nil, errors.New("connection refused")
}
func (failingBackend) Delete(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("connection refused")
}

// A backend that cannot be reached: a follow-up is a 503 (never served
// without its history), GET and DELETE too; keeping only logs (the
// client has its answer).
func TestBackendDownIs503(t *testing.T) {
	ctx := context.Background()
	s := convstate.New(failingBackend{}, convstate.Options{})
	keep, ae := s.Begin(ctx, request("", text(llm.RoleUser, "hi")), "")
	if ae != nil {
		t.Fatal(ae)
	}
	keep(ctx, &llm.Response{}, []byte(`{"id":"resp_1"}`), "ep")
	_, ae = s.Begin(ctx, request("resp_1", text(llm.RoleUser, "more")), "")
	if ae == nil || ae.Status != http.StatusServiceUnavailable || ae.MeshCode != llm.MeshOverloaded {
		t.Fatalf("follow-up with the backend down: %v; want 503 MESH_OVERLOADED", ae)
	}
	if _, ae := s.Response(ctx, "resp_1", ""); ae == nil || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("GET with the backend down: %v; want 503", ae)
	}
	if ae := s.Delete(ctx, "resp_1", ""); ae == nil || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("DELETE with the backend down: %v; want 503", ae)
	}
}
