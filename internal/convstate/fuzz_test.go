package convstate_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/llm"
)

// FuzzBegin: whatever a client puts in store and previous_response_id,
// Begin answers 400 (a wrong type), 404 (an id it does not hold) or
// prepares the request, and never sends previous_response_id on.
func FuzzBegin(f *testing.F) {
	for _, seed := range [][2]string{
		{`true`, `"resp_1"`}, {`false`, `"resp_nope"`}, {`null`, `null`}, {`"yes"`, `12`},
		{`1`, `""`}, {`{}`, `["resp_1"]`}, {``, `"resp_1"`}, {`true`, ``},
	} {
		f.Add(seed[0], seed[1])
	}
	s := convstate.New(convstate.NewMemory(convstate.Bounds{}), convstate.Options{})
	keep, _ := s.Begin(context.Background(), request(""), "")
	keep(context.Background(), &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}, []byte(`{"id":"resp_1"}`), "ep")
	f.Fuzz(func(t *testing.T, store, prev string) {
		r := request("", text(llm.RoleUser, "next"))
		r.Extra = llm.Extra{}
		if store != "" {
			r.Extra["store"] = json.RawMessage(store)
		}
		if prev != "" {
			r.Extra["previous_response_id"] = json.RawMessage(prev)
		}
		_, ae := s.Begin(context.Background(), r, "")
		switch {
		case ae == nil:
			if _, ok := r.Extra["previous_response_id"]; ok {
				t.Fatalf("previous_response_id %s left in the request", prev)
			}
		case ae.Status != http.StatusBadRequest && ae.Status != http.StatusNotFound:
			t.Fatalf("store %s, previous_response_id %s: status %d, want 400 or 404", store, prev, ae.Status)
		}
	})
}

// FuzzDecode: Decode never panics on what a store hands back, and what it
// accepts encodes back to a record it reads the same.
func FuzzDecode(f *testing.F) {
	for _, c := range []*convstate.Conversation{
		{ID: "resp_1", Response: json.RawMessage(`{"id":"resp_1"}`)},
		{ID: "resp_2", Owner: "key", Endpoint: "ep", Messages: []llm.Message{text(llm.RoleUser, "hi"),
			{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockToolUse, ID: "c", Name: "f", Input: json.RawMessage(`{}`)}}}},
			Response: json.RawMessage(`{"id":"resp_2","output":[]}`)},
	} {
		b, err := convstate.Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"response":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := convstate.Decode(b)
		if err != nil || !json.Valid(c.Response) {
			return
		}
		again, err := convstate.Encode(c)
		if err != nil {
			t.Fatalf("Encode of a decoded record: %v", err)
		}
		c2, err := convstate.Decode(again)
		if err != nil || c2.ID != c.ID || c2.Owner != c.Owner || len(c2.Messages) != len(c.Messages) || string(c2.Response) != string(c.Response) {
			t.Fatalf("round trip of %s: %+v, %v", b, c2, err)
		}
	})
}
