// Package gemini reads and writes Google's Gemini API
// (ai.google.dev/api/generate-content): the GenerateContentRequest of
// models/{model}:generateContent and :streamGenerateContent, its
// GenerateContentResponse, the server-sent events of
// :streamGenerateContent?alt=sse (each event's data one
// GenerateContentResponse, no terminator), and Google's error shape
// {"error":{"code":429,"message":…,"status":"RESOURCE_EXHAUSTED"}}
// (cloud.google.com/apis/design/errors). Gemini on Vertex AI takes and
// answers the same bodies.
//
// Mapping to the canonical model (internal/llm): contents with roles user
// and model are messages; parts are blocks — text, thought text (a
// thinking block), inlineData (a base64 image), fileData (an image by
// URL), functionCall (tool_use), functionResponse (tool_result); the
// system prompt and system/developer messages are systemInstruction;
// tools are functionDeclarations with parametersJsonSchema and
// tool_choice is toolConfig.functionCallingConfig; max_tokens,
// temperature, top_p, top_k and stop sequences are generationConfig, as
// are a JSON answer (responseMimeType, responseJsonSchema) and a
// thinking budget (thinkingConfig). usageMetadata's promptTokenCount,
// cachedContentTokenCount, candidatesTokenCount and thoughtsTokenCount
// become usage; finishReason the stop reason; a prompt blocked by
// promptFeedback.blockReason an error with code content_filter.
//
// Gemini names no function call ids before Gemini 3; a call without one
// gets an id derived from the answer's responseId and the part's index,
// and a function response is matched to its call by the name of the
// tool_use block with its id. The functions are pure and safe for
// concurrent use; a StreamReader or StreamWriter is used by one goroutine.
package gemini
