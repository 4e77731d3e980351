// Package llm is Keel's canonical model of an LLM call: one request type, one
// response type and one stream-event type that every wire format converts to
// and from at the edges. The engine works only on these types.
//
// The model follows the Anthropic Messages shape because it is the richer of
// the two (explicit content blocks and block-structured stream events); the
// OpenAI codec maps onto it. Fields a codec does not understand are kept as
// raw JSON in Extra maps so a same-format pass-through loses nothing.
//
// Values of these types are plain data: not safe for concurrent mutation, safe
// for concurrent reads. The package imports only the standard library.
package llm

import (
	"encoding/json"
	"strings"
	"time"
)

// Format names a wire format.
type Format uint8

const (
	FormatUnknown Format = iota
	FormatAnthropic
	FormatOpenAI
	// FormatResponses is the OpenAI Responses API (POST /v1/responses).
	FormatResponses
	// FormatGemini is Google's Gemini API (generateContent), an upstream
	// format only: Keel does not serve it to clients.
	FormatGemini
)

// String returns "anthropic", "openai", "responses", "gemini" or
// "unknown".
func (f Format) String() string {
	switch f {
	case FormatAnthropic:
		return "anthropic"
	case FormatOpenAI:
		return "openai"
	case FormatResponses:
		return "responses"
	case FormatGemini:
		return "gemini"
	}
	return "unknown"
}

// Family is the provider family whose opaque state (thinking signatures,
// encrypted reasoning) a format's endpoints accept: FormatOpenAI for both
// OpenAI APIs, the format itself otherwise.
func (f Format) Family() Format {
	if f == FormatResponses {
		return FormatOpenAI
	}
	return f
}

// ParseFormat maps "anthropic" / "openai" / "responses" / "gemini" to a Format;
// anything else is FormatUnknown.
func ParseFormat(s string) Format {
	switch strings.ToLower(s) {
	case "anthropic":
		return FormatAnthropic
	case "openai":
		return FormatOpenAI
	case "responses":
		return FormatResponses
	case "gemini":
		return FormatGemini
	}
	return FormatUnknown
}

// Extra holds JSON object members a codec did not map to a typed field,
// keyed by member name, values verbatim. Codecs write them back sorted by key
// after the known members.
type Extra map[string]json.RawMessage

// Role is a message author.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"    // OpenAI system message, or a mid-conversation system turn
	RoleDeveloper Role = "developer" // OpenAI developer message
)

// BlockType is the type of a content block.
type BlockType string

const (
	BlockText             BlockType = "text"
	BlockImage            BlockType = "image"
	BlockToolUse          BlockType = "tool_use"
	BlockToolResult       BlockType = "tool_result"
	BlockThinking         BlockType = "thinking"
	BlockRedactedThinking BlockType = "redacted_thinking"
	// BlockReasoning is an OpenAI Responses reasoning item: Thinking holds
	// its summary text, Data its encrypted_content (opaque, valid only at
	// a Responses endpoint), Raw the item verbatim when it came from a wire.
	BlockReasoning BlockType = "reasoning"
)

// Request is one call as the client asked for it.
type Request struct {
	// Format is the wire format the request was parsed from.
	Format Format
	Model  string

	// System holds the Anthropic top-level system prompt as text blocks.
	// OpenAI system/developer messages stay in Messages with their role.
	System []Block
	// SystemIsString records that System arrived as a plain string.
	SystemIsString bool

	Messages []Message

	// MaxTokens is Anthropic max_tokens or OpenAI max_completion_tokens;
	// 0 with HasMaxTokens false means absent.
	MaxTokens    int
	HasMaxTokens bool
	// MaxTokensLegacy marks that an OpenAI client sent the deprecated max_tokens.
	MaxTokensLegacy bool

	Temperature *float64
	TopP        *float64
	TopK        *int

	StopSequences []string
	// StopIsString records that OpenAI stop arrived as a single string.
	StopIsString bool

	Stream bool
	// IncludeUsage is OpenAI stream_options.include_usage.
	IncludeUsage bool
	// StreamOptionsExtra keeps unknown stream_options members.
	StreamOptionsExtra Extra

	Tools      []Tool
	ToolChoice *ToolChoice
	// ParallelToolCalls is OpenAI parallel_tool_calls when present.
	ParallelToolCalls *bool

	// UserID is Anthropic metadata.user_id or OpenAI user.
	UserID string
	// MetadataExtra keeps unknown Anthropic metadata members.
	MetadataExtra Extra

	// ResponseFormat is OpenAI response_format when present.
	ResponseFormat *ResponseFormat
	// N is OpenAI n when present (Keel serves only n=1).
	N int

	// MeshBehavior is the raw mesh_behavior object, removed from what is sent upstream.
	MeshBehavior json.RawMessage

	// ContinueFinalMessage asks an OpenAI-format server that supports it
	// (vLLM, SGLang) to continue the final assistant message: written as
	// "continue_final_message": true, "add_generation_prompt": false. Set
	// by the engine for a stream's continuation; codecs do not parse it.
	ContinueFinalMessage bool
	// Extra keeps unknown top-level members.
	Extra Extra
}

// SystemText joins the top-level system blocks and every system/developer
// message, separated by blank lines.
func (r *Request) SystemText() string {
	var parts []string
	for _, b := range r.System {
		if b.Type == BlockText && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	for _, m := range r.Messages {
		if m.Role == RoleSystem || m.Role == RoleDeveloper {
			if t := m.Text(); t != "" {
				parts = append(parts, t)
			}
		}
	}
	return strings.Join(parts, "\n\n")
}

// PromptText is the text a prompt reader (the domain and complexity
// classifiers, structured-output repair) reads: the system prompt and the
// last user turn with text, joined by a blank line.
func (r *Request) PromptText() string {
	sys := r.SystemText()
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == RoleUser {
			if t := r.Messages[i].Text(); t != "" {
				if sys == "" {
					return t
				}
				return sys + "\n\n" + t
			}
		}
	}
	return sys
}

// Message is one turn.
type Message struct {
	Role    Role
	Content []Block
	// ContentIsString records that content arrived as a plain string
	// (one text block); ContentIsNull that OpenAI content was null.
	ContentIsString bool
	ContentIsNull   bool
	// Name is the OpenAI message name.
	Name string
	// Prefix marks a final assistant message an OpenAI-format server that
	// supports it (DeepSeek, Mistral) continues: written as "prefix": true.
	// Set by the engine for a stream's continuation; codecs do not parse it.
	Prefix bool
	Extra  Extra
}

// Text concatenates the message's text blocks.
func (m *Message) Text() string {
	return BlocksText(m.Content)
}

// BlocksText concatenates the text of text blocks.
func BlocksText(bs []Block) string {
	if len(bs) == 1 && bs[0].Type == BlockText {
		return bs[0].Text
	}
	var sb strings.Builder
	for _, b := range bs {
		if b.Type == BlockText {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

// Block is one content block.
type Block struct {
	Type BlockType

	// Text is set for text blocks.
	Text string

	// ID, Name and Input are set for tool_use blocks; Input is a JSON object.
	ID    string
	Name  string
	Input json.RawMessage

	// ToolUseID, Content and IsError are set for tool_result blocks.
	ToolUseID       string
	Content         []Block
	ContentIsString bool
	IsError         bool

	// Image is set for image blocks.
	Image *ImageSource

	// Thinking and Signature are set for thinking blocks; Data for redacted_thinking.
	Thinking  string
	Signature string
	Data      string

	// Raw holds a block of a type this model does not know, verbatim.
	// When Raw is set the other fields are informational only.
	Raw json.RawMessage

	// Extra keeps unknown members of a known block type (cache_control, citations …).
	Extra Extra
}

// ImageSource is an image given inline (base64) or by URL.
type ImageSource struct {
	// Kind is "base64" or "url".
	Kind      string
	MediaType string
	Data      string
	URL       string
	// Detail is the OpenAI image_url detail when present.
	Detail string
}

// Tool is a tool the model may call.
type Tool struct {
	// Type is empty for a plain client (function) tool; otherwise the
	// provider-specific tool type (web_search_20260318, custom …), and Raw holds it.
	Type        string
	Name        string
	Description string
	InputSchema json.RawMessage
	Strict      *bool
	Raw         json.RawMessage
	Extra       Extra
}

// ToolChoiceType says how the model may use tools.
type ToolChoiceType string

const (
	ToolChoiceAuto ToolChoiceType = "auto"
	ToolChoiceAny  ToolChoiceType = "any" // OpenAI "required"
	ToolChoiceTool ToolChoiceType = "tool"
	ToolChoiceNone ToolChoiceType = "none"
)

// ToolChoice constrains tool use.
type ToolChoice struct {
	Type ToolChoiceType
	// Name is the forced tool for ToolChoiceTool.
	Name string
	// DisableParallel is Anthropic disable_parallel_tool_use.
	DisableParallel *bool
	// Raw keeps a tool_choice form this model does not know (OpenAI allowed_tools, custom).
	Raw   json.RawMessage
	Extra Extra
}

// ResponseFormat is OpenAI response_format.
type ResponseFormat struct {
	// Type is "text", "json_object" or "json_schema".
	Type        string
	Name        string
	Description string
	Schema      json.RawMessage
	Strict      *bool
	Extra       Extra
}

// StopReason is why generation stopped, in Anthropic's vocabulary.
type StopReason string

const (
	StopEndTurn      StopReason = "end_turn"
	StopMaxTokens    StopReason = "max_tokens"
	StopSequence     StopReason = "stop_sequence"
	StopToolUse      StopReason = "tool_use"
	StopRefusal      StopReason = "refusal"
	StopPauseTurn    StopReason = "pause_turn"
	StopContextLimit StopReason = "model_context_window_exceeded"
)

// Usage counts tokens. InputTokens excludes cache reads and writes
// (Anthropic's meaning); OpenAI prompt_tokens = Input + CacheRead + CacheWrite.
type Usage struct {
	InputTokens     int
	OutputTokens    int
	CacheReadTokens int
	// CacheWriteTokens is Anthropic cache_creation_input_tokens / OpenAI cache_write_tokens.
	CacheWriteTokens int
	// CacheWrite5mTokens and CacheWrite1hTokens split CacheWriteTokens by
	// the time to live of the cache entries written (Anthropic
	// usage.cache_creation.ephemeral_5m_input_tokens and
	// ephemeral_1h_input_tokens; a 1-hour write costs more). Both are 0
	// when the upstream gave no split: its writes are 5-minute ones, the
	// default TTL. The object's other members stay in
	// Extra["cache_creation"] ({} when it had none, so that an object of
	// zeros is written back too).
	// (omitempty keeps the canonical dumps of usages without a split as
	// they were.)
	CacheWrite5mTokens int `json:",omitempty"`
	CacheWrite1hTokens int `json:",omitempty"`
	// ReasoningTokens is the part of OutputTokens spent on reasoning
	// (OpenAI completion_tokens_details.reasoning_tokens, Responses
	// output_tokens_details.reasoning_tokens, Anthropic
	// output_tokens_details.thinking_tokens): counted in OutputTokens, as
	// every provider bills it as output.
	ReasoningTokens int
	Extra           Extra
}

// CacheWrite1h is the part of CacheWriteTokens written with the 1-hour
// TTL, at most CacheWriteTokens; the rest are 5-minute writes.
func (u Usage) CacheWrite1h() int {
	return min(max(u.CacheWrite1hTokens, 0), max(u.CacheWriteTokens, 0))
}

// PromptTokens is the total prompt size, cached tokens included.
func (u Usage) PromptTokens() int {
	return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// Response is a complete answer.
type Response struct {
	ID    string
	Model string
	// Role is always assistant; kept for symmetry with the wire.
	Content      []Block
	StopReason   StopReason
	StopSequence string
	Usage        Usage
	// Created is the OpenAI created timestamp (unix seconds); 0 when absent.
	Created           int64
	SystemFingerprint string
	// Refusal is OpenAI message.refusal when present.
	Refusal string
	Extra   Extra
	// ChoiceExtra and MessageExtra keep unknown members of the OpenAI
	// choices[0] object and of its message (annotations, audio …).
	ChoiceExtra  Extra
	MessageExtra Extra
	// Raw is the upstream's answer body as received, in RawFormat, kept
	// while nothing in the answer has changed: a client of RawFormat gets
	// these bytes, not a re-encoding (which would add members the upstream
	// never sent). Whatever changes the answer (a repair, a folded tool
	// call, a translation) must clear it (Touch).
	Raw       []byte `json:"-"`
	RawFormat Format `json:"-"`
}

// Touch records that the answer no longer matches its upstream bytes.
func (r *Response) Touch() { r.Raw, r.RawFormat = nil, FormatUnknown }

// Text concatenates the text blocks of the answer.
func (r *Response) Text() string { return BlocksText(r.Content) }

// EventType is the kind of a stream event.
type EventType uint8

const (
	EventMessageStart EventType = iota + 1
	EventBlockStart
	EventBlockDelta
	EventBlockStop
	EventMessageDelta
	EventMessageStop
	EventPing
	EventError
)

var eventNames = [...]string{
	EventMessageStart: "message_start",
	EventBlockStart:   "content_block_start",
	EventBlockDelta:   "content_block_delta",
	EventBlockStop:    "content_block_stop",
	EventMessageDelta: "message_delta",
	EventMessageStop:  "message_stop",
	EventPing:         "ping",
	EventError:        "error",
}

// String returns the Anthropic event name.
func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return "unknown"
}

// DeltaType is the kind of a block delta.
type DeltaType string

const (
	DeltaText      DeltaType = "text_delta"
	DeltaInputJSON DeltaType = "input_json_delta"
	DeltaThinking  DeltaType = "thinking_delta"
	DeltaSignature DeltaType = "signature_delta"
)

// Event is one stream event. Block indexes start at 0 and grow by one.
type Event struct {
	Type  EventType
	Index int

	// Message is set on EventMessageStart: id, model and initial usage, no content.
	Message *Response
	// Block is set on EventBlockStart: the block with empty text / input.
	Block *Block
	// DeltaType and Delta are set on EventBlockDelta: the text, the partial
	// JSON, the thinking text or the signature.
	DeltaType DeltaType
	Delta     string

	// StopReason, StopSequence and Usage are set on EventMessageDelta;
	// Usage is cumulative (overwrite, don't add).
	StopReason   StopReason
	StopSequence string
	Usage        *Usage

	// Err is set on EventError.
	Err *APIError

	// Raw is the event's payload exactly as the upstream sent it, when the
	// event was decoded from a wire; encoders of the same format may write it
	// verbatim. Nil for synthesised events.
	Raw []byte
	// RawFormat is the format Raw is in.
	RawFormat Format
	// RawSeq and RawLast group the events decoded from one upstream payload
	// (an OpenAI chunk may hold a message start, a block start and a delta):
	// each carries the same Raw, RawSeq counts them from 1 and RawLast marks
	// the last. A same-format writer holds a group's encoding and writes Raw
	// once, in its place, when every event of the group reaches it in order
	// with Raw still set. RawSeq 0 is an event that stands alone.
	RawSeq  uint16
	RawLast bool
}

// Detach returns a copy of ev without its upstream bytes, for a change to
// one of its fields: a writer then encodes it from its fields.
func (ev *Event) Detach() *Event {
	cp := *ev
	cp.Raw, cp.RawFormat, cp.RawSeq, cp.RawLast = nil, FormatUnknown, 0, false
	return &cp
}

// ErrorType is the canonical error category, in Anthropic's vocabulary.
type ErrorType string

const (
	ErrInvalidRequest ErrorType = "invalid_request_error"
	ErrAuthentication ErrorType = "authentication_error"
	ErrBilling        ErrorType = "billing_error"
	ErrPermission     ErrorType = "permission_error"
	ErrNotFound       ErrorType = "not_found_error"
	ErrConflict       ErrorType = "conflict_error"
	ErrTooLarge       ErrorType = "request_too_large"
	ErrRateLimit      ErrorType = "rate_limit_error"
	ErrAPI            ErrorType = "api_error"
	ErrTimeout        ErrorType = "timeout_error"
	ErrOverloaded     ErrorType = "overloaded_error"
)

// Mesh error codes added to error bodies that Keel itself produces.
const (
	MeshTimeout                = "MESH_TIMEOUT"
	MeshFallbackExhausted      = "MESH_FALLBACK_EXHAUSTED"
	MeshCircuitOpen            = "MESH_CIRCUIT_OPEN"
	MeshNormalizationFailed    = "MESH_NORMALIZATION_FAILED"
	MeshSchemaViolation        = "MESH_SCHEMA_VIOLATION"
	MeshBudgetExhausted        = "MESH_BUDGET_EXHAUSTED"
	MeshBadRequest             = "MESH_BAD_REQUEST"
	MeshUpstreamProtocolFailed = "MESH_UPSTREAM_PROTOCOL"
	// MeshOverloaded: Keel itself is at a limit (request-body bytes being
	// read at once); retry shortly.
	MeshOverloaded = "MESH_OVERLOADED"
	// MeshKeyInvalid: server.require_keys is set and the call sent no
	// virtual key, or one Keel does not know or has revoked (401).
	MeshKeyInvalid = "MESH_KEY_INVALID"
	// MeshKeyModelForbidden: the virtual key may not call the model (403).
	MeshKeyModelForbidden = "MESH_KEY_MODEL_FORBIDDEN"
	// MeshKeyRateLimited: the key's requests or tokens per minute are
	// spent until the minute's end, given in retry-after (429).
	MeshKeyRateLimited = "MESH_KEY_RATE_LIMITED"
	// MeshKeyBudgetExceeded: the key's daily or monthly budget in USD is
	// spent until the window's end (UTC), given in retry-after (429).
	MeshKeyBudgetExceeded = "MESH_KEY_BUDGET_EXCEEDED"
	// MeshPIIBlocked: the request holds personal data of the kinds the
	// message names (never the values) and its route's pii action is
	// block (400).
	MeshPIIBlocked = "MESH_PII_BLOCKED"
	// MeshPIIUnavailable: personal-data detection failed or ran out of its
	// time budget, so the request was not sent upstream (503; pii.fail_open
	// sends it unscanned instead).
	MeshPIIUnavailable = "MESH_PII_UNAVAILABLE"
)

// APIError is an error answer, from an upstream or produced by Keel.
type APIError struct {
	// Status is the HTTP status (200 for an error event inside a stream).
	Status  int
	Type    ErrorType
	Message string
	// Code is the OpenAI error.code or Anthropic error.details.error_code.
	Code string
	// Param is the OpenAI error.param.
	Param string
	// MeshCode is one of the Mesh* codes when Keel produced or decided the error.
	MeshCode string
	// RequestID is the upstream request id when known.
	RequestID string
	// RetryAfter is the upstream's retry-after, 0 when absent.
	RetryAfter time.Duration
	// RawType keeps an upstream error type string outside the ErrorType set.
	RawType string
	// MeshHeaders are X-Mesh-* headers Keel sends with the error answer
	// (X-Mesh-Schema on a schema violation).
	MeshHeaders map[string]string `json:"-"`
}

// Error implements error.
func (e *APIError) Error() string {
	var sb strings.Builder
	sb.WriteString(string(e.Type))
	if e.Status != 0 {
		sb.WriteString(" (")
		sb.WriteString(itoa(e.Status))
		sb.WriteString(")")
	}
	if e.MeshCode != "" {
		sb.WriteString(" ")
		sb.WriteString(e.MeshCode)
	}
	if e.Message != "" {
		sb.WriteString(": ")
		sb.WriteString(e.Message)
	}
	return sb.String()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// StatusErrorType maps an HTTP status to the canonical error type.
func StatusErrorType(status int) ErrorType {
	switch status {
	case 400, 422:
		return ErrInvalidRequest
	case 401:
		return ErrAuthentication
	case 402:
		return ErrBilling
	case 403:
		return ErrPermission
	case 404:
		return ErrNotFound
	case 409:
		return ErrConflict
	case 413:
		return ErrTooLarge
	case 429:
		return ErrRateLimit
	case 504:
		return ErrTimeout
	case 529, 503:
		return ErrOverloaded
	}
	if status >= 500 {
		return ErrAPI
	}
	return ErrInvalidRequest
}

// TypeStatus maps a canonical error type to its usual HTTP status.
func TypeStatus(t ErrorType) int {
	switch t {
	case ErrInvalidRequest:
		return 400
	case ErrAuthentication:
		return 401
	case ErrBilling:
		return 402
	case ErrPermission:
		return 403
	case ErrNotFound:
		return 404
	case ErrConflict:
		return 409
	case ErrTooLarge:
		return 413
	case ErrRateLimit:
		return 429
	case ErrTimeout:
		return 504
	case ErrOverloaded:
		return 529
	}
	return 500
}
