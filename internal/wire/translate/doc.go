// Package translate makes a canonical request parsed from one wire format
// sendable to an endpoint that speaks another (Anthropic Messages, OpenAI
// Chat Completions and the OpenAI Responses API, each to each), and makes
// that endpoint's answer readable by the client again. What is particular
// to the Responses API (reasoning effort and verbosity, built-in and custom
// tools, opaque reasoning state kept to its family) is in responses.go and
// docs/RESPONSES.md. It sits between parsing and encoding: the codecs in internal/wire
// convert faithfully what both formats can say; this package decides what to
// do with what only one of them can.
//
// Prepare is called by the provider before it encodes a request for an
// endpoint whose format differs from the request's. It returns a new request
// (the caller's is never modified) and a Report:
//
//   - content the target cannot carry (a document, audio, an image in a
//     tool result, thinking, a server tool; Report.Lost) makes Prepare fail
//     with a 400 naming it and the endpoint under the default Policy, and is
//     dropped and listed under Policy{Unsupported: "drop"};
//   - other features the target cannot express (top_k, unknown members)
//     are dropped and listed in Report.Dropped (sent to the client as
//     X-Mesh-Dropped) under the default Policy, or make Prepare fail with a
//     400 naming the feature and the endpoint under
//     Policy{Unsupported: "reject"};
//   - hints that do not change what the model is asked (cache_control, image
//     detail, n=1, store, service_tier …) are always dropped and listed,
//     never rejected;
//   - what can be translated is: tool names OpenAI would reject are mapped,
//     tool-use ids Anthropic would reject are sanitised, json_schema
//     response_format becomes Anthropic output_config.format and back,
//     disable_parallel_tool_use ⇄ parallel_tool_calls, safety_identifier →
//     user, a missing max_tokens gets DefaultMaxTokens, a transcript of only
//     system messages becomes one user message, and a user turn of tool
//     results followed by a user turn of text becomes one turn.
//
// The Report then restores what was mapped in the answer: RestoreResponse
// and RestoreEvent put the client's tool names and ids back and remove
// members only the upstream's format understands.
//
// What the codecs already do and this package relies on: system prompt ⇄
// leading system message and the hoisting of OpenAI system/developer
// messages into the Anthropic system prompt (wire/anthropic.EncodeRequest),
// tool_result blocks ⇄ tool messages written right after the assistant turn
// (wire/openai.EncodeRequest), base64 image ⇄ data: URL, URL images, stop
// reasons ⇄ finish reasons, usage with cached tokens, and the stream event
// mapping in both directions.
//
// Everything here is pure: no I/O, no goroutines, safe for concurrent use. A
// Report is immutable once returned.
package translate
