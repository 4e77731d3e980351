package translate

import (
	"github.com/keelmesh/keel/internal/llm"
)

// maxGeminiStops is the Gemini API's cap on stop sequences
// (ai.google.dev/api/generate-content#generationconfig: up to 5).
const maxGeminiStops = 5

// gemini adapts the top level of r to what the Gemini API expresses:
// one candidate, no user id, no parallel-call switch, at most five stop
// sequences, text or JSON answers (json_object, json_schema); what it
// cannot carry is dropped and named.
func (t *prep) gemini(r *llm.Request) {
	if r.N > 1 {
		t.unsupported("n")
	}
	r.N = 0
	if r.UserID != "" {
		t.hint("user")
		r.UserID = ""
	}
	if len(r.MetadataExtra) > 0 {
		for _, k := range sortedKeys(r.MetadataExtra) {
			t.unsupported("metadata." + k)
		}
		r.MetadataExtra = nil
	}
	if len(r.StreamOptionsExtra) > 0 {
		for _, k := range sortedKeys(r.StreamOptionsExtra) {
			t.hint("stream_options." + k)
		}
		r.StreamOptionsExtra = nil
	}
	r.IncludeUsage, r.MaxTokensLegacy = false, false
	if len(r.StopSequences) > maxGeminiStops {
		t.unsupported("stop_sequences[5:]")
		r.StopSequences = r.StopSequences[:maxGeminiStops:maxGeminiStops]
	}
	if r.ParallelToolCalls != nil {
		if !*r.ParallelToolCalls && len(r.Tools) > 0 {
			t.unsupported("parallel_tool_calls")
		}
		r.ParallelToolCalls = nil
	}
	if tc := r.ToolChoice; tc != nil && tc.DisableParallel != nil {
		c := *tc
		if *c.DisableParallel {
			t.unsupported("disable_parallel_tool_use")
		}
		c.DisableParallel = nil
		r.ToolChoice = &c
	}
	if rf := r.ResponseFormat; rf != nil {
		switch rf.Type {
		case "text":
			r.ResponseFormat = nil
		case "json_object":
		case "json_schema":
			if rf.Schema == nil {
				t.unsupported("response_format:json_schema")
				r.ResponseFormat = nil
				break
			}
			if rf.Description != "" {
				t.hint("response_format.description")
			}
			for _, k := range sortedKeys(rf.Extra) {
				t.unsupported("response_format." + k)
			}
		default:
			t.unsupported("response_format:" + rf.Type)
			r.ResponseFormat = nil
		}
	}
	if len(r.System) > 0 {
		sys := make([]llm.Block, 0, len(r.System))
		for _, b := range r.System {
			t.blockExtra(&b)
			sys = append(sys, b)
		}
		r.System = sys
	}
}
