// Package anthropic converts between the Anthropic Messages API wire format
// (POST /v1/messages: request and response bodies, error bodies and the SSE
// event stream) and Keel's canonical model in package llm, in both
// directions: the server side parses what a client sends and writes what it
// receives; the client side writes what goes upstream and parses what comes
// back.
//
// Nothing is lost on a same-format pass-through: unknown top-level members,
// unknown block members (cache_control, citations …), unknown block types,
// server tools and unknown tool_choice forms are kept verbatim and written
// back, and encoders write known members in a fixed order followed by the
// unknown ones sorted by key, so the output bytes are deterministic.
// Decoding checks the JSON once (jsonx.Valid: a fast check that leaves the
// last word to json.Valid) and then walks it in place with jsonx's member
// and element walkers; encoding appends to a byte slice without
// reflection (jsonx's appenders).
//
// The functions are pure and safe for concurrent use. A StreamWriter or a
// StreamReader serves one stream and is not safe for concurrent use; neither
// starts goroutines, and they block only in the underlying writer or reader.
package anthropic
