// Package responses converts between the OpenAI Responses API wire format
// (POST /v1/responses) and Keel's canonical model (package llm), in both
// directions: requests, answers and SSE streams. Errors share the Chat
// Completions shape ({"error":{message,type,param,code}}), so the codec
// table uses package openai's error functions for this format too.
//
// The facts this package relies on, with their sources, are in
// docs/RESPONSES.md.
//
// Mapping onto the canonical model:
//   - instructions is the top-level system prompt (Request.System, one text
//     block, SystemIsString);
//   - input is a string (one user message) or a list of items; every item
//     becomes one llm.Message: a message item keeps its role and parts, a
//     function_call is an assistant message of one tool_use block (its id
//     call_id), a function_call_output a user message of one tool_result
//     block, a reasoning item an assistant message of one BlockReasoning
//     block holding the item verbatim in Raw (its encrypted_content in Data,
//     its summary text in Thinking), and any other item an assistant (or,
//     for a *_output item, user) message of one block of the item's type
//     with Raw set; a custom_tool_call is a tool_use block whose input is
//     {"input": text}, its output a tool_result, both kept verbatim in Raw
//     too. A reasoning item whose encrypted_content carries Anthropic
//     thinking (opaque.go) is read back as that thinking block. Members of
//     an item the model has no field for (id,
//     status, phase …) are kept in Message.Extra;
//   - function tools map onto llm.Tool; every other tool type (web_search,
//     file_search, namespace, custom, mcp …) is kept verbatim in Tool.Raw;
//   - text.format is Request.ResponseFormat (flat here, nested under
//     json_schema in Chat Completions); other members of text (verbosity)
//     stay in Extra["text"];
//   - reasoning, metadata, store, include, previous_response_id,
//     prompt_cache_key and every other member are kept verbatim in Extra
//     (PreviousResponseID reads one).
//
// Same-format pass-through is lossless: ParseRequest(EncodeRequest(
// ParseRequest(b))) equals ParseRequest(b), and an answer or a stream event
// that nothing changed keeps its upstream bytes (Response.Raw, Event.Raw).
//
// Parsers never panic on any input (they are fuzzed). Functions are safe
// for concurrent use; a StreamReader or StreamWriter is used by one
// goroutine. The package starts no goroutines.
package responses
