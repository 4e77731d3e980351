// Package openai converts between the OpenAI Chat Completions wire format and
// Keel's canonical model (package llm), in both directions: requests,
// responses, errors and SSE streams.
//
// Server side (what an OpenAI client sends and receives): ParseRequest,
// EncodeResponse, EncodeError, StreamWriter. Client side (what Keel sends to
// an OpenAI upstream and reads back): EncodeRequest / EncodeUpstreamRequest,
// ParseResponse, ParseError, StreamReader.
//
// Same-format pass-through is lossless: every member the codec does not map
// is kept verbatim (Extra maps, Block.Raw, Tool.Raw, ToolChoice.Raw) and
// ParseRequest(EncodeRequest(ParseRequest(b))) equals ParseRequest(b); the
// same holds for responses and for streams read and re-written. Encoders
// write known members in a fixed order and Extra sorted by key, so their
// output is deterministic. The one cross-format concern handled here is the
// Anthropic top-level system prompt, written as a leading system message;
// the rest of cross-format translation belongs to the caller.
//
// Parsers never panic on any input (they are fuzzed). Functions are safe for
// concurrent use; a StreamReader or StreamWriter is used by one goroutine.
// The package starts no goroutines.
package openai
