package convstate_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/llm"
)

// BenchmarkBeginKeep is what storing adds to a Responses call with the
// memory backend: Begin (no previous_response_id) and keep of a one-turn
// conversation with a 1 KiB response object.
func BenchmarkBeginKeep(b *testing.B) {
	s := convstate.New(convstate.NewMemory(convstate.Config{}.Bounds()), convstate.Options{})
	ctx := context.Background()
	resp := &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "Hello! How can I help you today?"}}}
	pad := make([]byte, 1024)
	for i := range pad {
		pad[i] = 'x'
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		served := []byte(`{"id":"resp_` + strconv.Itoa(i) + `","object":"response","pad":"` + string(pad) + `"}`)
		keep, ae := s.Begin(ctx, request("", text(llm.RoleUser, "Hello there")), "")
		if ae != nil {
			b.Fatal(ae)
		}
		keep(ctx, resp, served, "ep")
	}
}

// BenchmarkBeginExpand is a follow-up's lookup and expansion of a stored
// ten-turn conversation.
func BenchmarkBeginExpand(b *testing.B) {
	s := convstate.New(convstate.NewMemory(convstate.Bounds{}), convstate.Options{})
	ctx := context.Background()
	prev := ""
	for i := range 10 {
		keep, ae := s.Begin(ctx, request(prev, text(llm.RoleUser, "question "+strconv.Itoa(i))), "")
		if ae != nil {
			b.Fatal(ae)
		}
		prev = "resp_" + strconv.Itoa(i)
		keep(ctx, &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "an answer of a few words " + strconv.Itoa(i)}}}, []byte(`{"id":"`+prev+`"}`), "ep")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ae := s.Begin(ctx, request(prev, text(llm.RoleUser, "next")), ""); ae != nil {
			b.Fatal(ae)
		}
	}
}
