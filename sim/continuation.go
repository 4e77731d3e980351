package sim

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/keelmesh/keel/internal/llm"
)

// Continuation is how a model's OpenAI-format endpoints treat a request
// whose last message is an assistant message, the partial answer a client
// (or a gateway resuming a cut stream) sends back. Real OpenAI-compatible
// servers differ (PROTOCOLS.md §0.11), so each kind is a model option; the
// default, ContinueNone, is the strictest. Anthropic-format endpoints
// always continue such a message, as the Messages API does (prefill).
type Continuation string

// The continuation kinds, named as provider.Continuation names them.
const (
	// ContinueNone: a trailing assistant message is history, part of the
	// prompt like any other turn, and the answer is a new, complete one
	// (OpenAI Chat Completions). The default.
	ContinueNone Continuation = "none"
	// ContinuePrefill: a trailing assistant text message is continued
	// (llama.cpp's server, without thinking; the Anthropic Messages API).
	ContinuePrefill Continuation = "prefill"
	// ContinueFinalMessage: continued only when the body has
	// "continue_final_message": true and "add_generation_prompt": false
	// (vLLM, SGLang). continue_final_message true with add_generation_prompt
	// true or absent (vLLM's default is true), or with a last message that is
	// not an assistant message, is a 400; otherwise as ContinueNone.
	ContinueFinalMessage Continuation = "continue_final_message"
	// ContinuePrefix: continued only when the final assistant message has
	// "prefix": true (DeepSeek, Mistral); otherwise as ContinueNone.
	ContinuePrefix Continuation = "prefix"
)

// validate reports an unknown kind; "" is valid (ContinueNone).
func (c Continuation) validate() error {
	switch c {
	case "", ContinueNone, ContinuePrefill, ContinueFinalMessage, ContinuePrefix:
		return nil
	}
	return fmt.Errorf("unknown continuation %q (want none, prefill, continue_final_message or prefix)", string(c))
}

// kind returns c, with "" as ContinueNone.
func (c Continuation) kind() Continuation {
	if c == "" {
		return ContinueNone
	}
	return c
}

// continues reports whether an endpoint of spec (nil: an unknown model, the
// defaults) serving format f continues req's trailing assistant message as
// a prefill (see Answer). A non-nil error is the 400 the endpoint answers
// instead.
func continues(spec *ModelSpec, f llm.Format, req *llm.Request) (bool, *llm.APIError) {
	if f == llm.FormatGemini {
		// The Gemini API documents no continuation of a trailing model
		// turn: it is history, and the answer starts anew.
		return false, nil
	}
	if f != llm.FormatOpenAI {
		return true, nil
	}
	kind := ContinueNone
	if spec != nil {
		kind = spec.Continuation.kind()
	}
	n := len(req.Messages)
	lastAssistant := n > 0 && req.Messages[n-1].Role == llm.RoleAssistant
	switch kind {
	case ContinuePrefill:
		return true, nil
	case ContinuePrefix:
		if !lastAssistant {
			return false, nil
		}
		p, err := boolMember(req.Messages[n-1].Extra, "prefix")
		if err != nil {
			return false, badParam(fmt.Sprintf("messages[%d].prefix", n-1), err.Error())
		}
		return p.is(true), nil
	case ContinueFinalMessage:
		cfm, err := boolMember(req.Extra, "continue_final_message")
		if err != nil {
			return false, badParam("continue_final_message", err.Error())
		}
		agp, err := boolMember(req.Extra, "add_generation_prompt")
		if err != nil {
			return false, badParam("add_generation_prompt", err.Error())
		}
		if !cfm.is(true) {
			return false, nil
		}
		// vLLM's add_generation_prompt defaults to true: leaving it out is
		// setting both (its chat template refuses the pair).
		if !agp.is(false) {
			return false, badParam("continue_final_message", "Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
		}
		if !lastAssistant {
			return false, badParam("continue_final_message", "Cannot set `continue_final_message` to True when the last message is not from the assistant.")
		}
		return true, nil
	}
	return false, nil
}

// optBool is an optional JSON boolean: absent, true or false.
type optBool struct{ set, v bool }

func (b optBool) is(v bool) bool { return b.set && b.v == v }

// boolMember reads e[key] as an optional boolean (null counts as absent).
func boolMember(e llm.Extra, key string) (optBool, error) {
	raw, ok := e[key]
	if !ok || string(raw) == "null" {
		return optBool{}, nil
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		return optBool{}, fmt.Errorf("%s: %s is not a boolean", key, raw)
	}
	return optBool{true, v}, nil
}

func badParam(param, msg string) *llm.APIError {
	return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Param: param, Message: msg}
}
