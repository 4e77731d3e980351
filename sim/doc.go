// Package sim is a simulated LLM provider fleet: models of several
// capability tiers served in several regions, speaking the Anthropic
// Messages API and the OpenAI Chat Completions API byte-compatibly with the
// official SDKs, streaming and not. It is the ground truth of Keel's tests
// and benchmarks, and users' tests may import it.
//
// Answers are deterministic: the text depends only on the seed, the model
// and the conversation, and Answer and AnswerFormat compute it without a
// fleet, so a test knows the exact expected text, tool calls and token
// usage. A last assistant message is where the wire formats differ, as real
// providers do (PROTOCOLS.md §0.11): over the Anthropic format it is a
// prefill and the fleet continues exactly from it, which is what lets a cut
// stream be resumed and checked to the byte; over the OpenAI format it is
// continued only as the model's Continuation says (prefill like llama.cpp,
// continue_final_message like vLLM, prefix like DeepSeek) and by default,
// as OpenAI does, it is history: the answer is a new, complete one, so a
// client that resends the part it already has gets the text twice. A
// model's EchoPrefill makes a continuing endpoint repeat the prefill at
// the start of its answer, as llama.cpp's llama-server does (PROTOCOLS.md
// §6.2).
//
// Under anthropic-version 2026-10-21 the Anthropic endpoints refuse
// temperature, top_p and top_k with a 400, as Anthropic's API does
// (PROTOCOLS.md §0.1).
//
// A prompt over a model's ContextWindow is a 400 in each wire provider's
// own words (Anthropic's "prompt is too long", OpenAI's
// context_length_exceeded code), or in llama.cpp's exceed_context_size_error
// shape on both wires with ContextError "llamacpp".
//
// Temperature sensitivity: at temperature T > 0 each word of a text answer is
// replaced with probability WordChangeProbability(T × the model's
// TemperatureScale) = min(1, T × scale / 2), drawn from a hash of the
// conversation and the call's number, so repeated calls differ and a model's
// output diversity grows with T along a curve its scale stretches (scale 7/3
// at T = 0.3 samples like scale 1 at T = 0.7). At T = 0, or without a
// temperature, nothing is drawn and the answer is the deterministic one.
// AnswerSample(cfg, req, n) is the answer of the fleet's n-th call.
//
// Structured outputs: each wire reads only its own JSON output field, as
// the real APIs do. Over the Anthropic format that is output_config.format
// (or the beta output_format) of type json_schema, and every object schema
// in it must set "additionalProperties": false (Anthropic's documented
// limitation); a response_format member is a 400 ("response_format: Extra
// inputs are not permitted"). Over the OpenAI format it is response_format
// json_object or json_schema, whose strict mode takes only schemas whose
// every object is closed and requires all its properties (PROTOCOLS.md
// §2.1); another type, or an output_config member ("Unrecognized request
// argument supplied: output_config"), is a 400. A model's
// StructuredOutputs says whether it honours a json_schema format (native,
// the default), rejects it with a 400 (unsupported, like gpt-3.5-turbo or
// Claude models before structured outputs) or ignores it (ignored, like
// llama.cpp's server).
//
// Request limits, as the real APIs have them: a body over 32 MiB is a 413
// request_too_large (Anthropic's request size limit; refused unread when
// its Content-Length says so, and the read buffer grows with what arrives,
// never from the Content-Length alone); more than 100,000 messages over the
// Anthropic format, or 2,048 over the OpenAI format, is a 400 naming the
// limit (a model's MaxMessages replaces both).
//
// Field extraction: a request asking for a JSON schema object whose input
// holds "field: value" lines (GroundTruth) for its properties, or whose
// system prompt says "extract", is answered with each field's value from the
// input; with probability ExtractionErrorRate (plus ExtractionErrorPerKTok
// per thousand input tokens) per call and field the value is wrong, so
// fragment fusion and tiering have a ground truth to be scored against
// (TierQuality sets the three tiers apart). A model's Drift moves one
// numeric field of a share of its JSON answers by a bounded amount, as a
// new version of a model does; shadow comparison is measured on it.
//
// Prompt caching (a model's PromptCache; WithPromptCache for every model)
// is modelled as each wire's provider does it: Anthropic's cache_control
// breakpoints with 5-minute and 1-hour TTLs, a minimum length, a 20-block
// lookback and the cache_creation / cache_read usage counts; OpenAI's
// automatic prefix caching from 1,024 tokens in 128-token steps with
// cached_tokens in usage; per model, or per region as Bedrock and Vertex
// AI cache. A hit skips LatencySpec.PrefillPerKTok for the tokens read,
// so its time to first token is shorter (promptcache.go cites the
// documentation of each behaviour). Time is the clock's (time.Now), so a
// TTL passes in virtual time inside a testing/synctest bubble.
//
// Each endpoint (a model in a region) has a finite number of slots with a
// FIFO queue beyond them, a lognormal time to first token, a per-token
// delay and a heavy tail; faults (rate limits, overload, 5xx, resets,
// hangs, cut, failing or stalled streams, malformed JSON, slowdowns of a
// whole call, of its first token or of a stream's pace) are
// injected by rule, at a seeded rate or for an exact number of calls, and
// regions can be taken down, from Go or from the /sim control API.
//
// A Fleet is served in memory through Transport (no sockets, so tests can
// run inside a testing/synctest bubble with virtual time; every wait uses
// time.NewTimer and selects on the request context) or over a real listener
// through Start. A call whose context ends (the client left, or the server
// shuts down) stops: waits return at once, and the passes over a request's
// messages look at the context every 1,024 messages, so a huge request
// cancelled early frees its goroutine and slot promptly. URLs: region R serves POST /r/R/v1/messages and POST
// /r/R/v1/chat/completions; the unprefixed /v1/... routes serve from the
// model's first region; GET /v1/models and /r/R/v1/models list the models
// (in the Anthropic shape when the request has an anthropic-version header).
// POST /v1/embeddings and /r/R/v1/embeddings (every region) are OpenAI's
// Embeddings API over deterministic vectors (Embed; embed.go says what it
// models and what it does not). POST /v1/messages/count_tokens and
// /r/R/v1/messages/count_tokens are Anthropic's token counting, equal to
// the usage input_tokens of the same request's answer (count.go).
// Control API: POST /sim/regions/{name}/down and /up, POST /sim/faults (a
// JSON list that replaces the faults), GET /sim/faults, GET /sim/stats,
// POST /sim/reset.
//
// Everything exported is safe for concurrent use unless its doc says
// otherwise; Config, ModelSpec, Fault and the other spec types are plain
// data.
package sim
