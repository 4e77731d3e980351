package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"

	"github.com/keelmesh/keel/internal/llm"
)

// CodeContentFilter is the code of the error a blocked prompt becomes.
const CodeContentFilter = "content_filter"

// stopReasons maps finishReason (ai.google.dev/api/generate-content#FinishReason).
// STOP is also how a stop sequence ends an answer: Gemini does not say
// which. A blocked or unsafe answer is a refusal; an unlisted reason
// (LANGUAGE, OTHER, MALFORMED_FUNCTION_CALL …) ends the turn.
var stopReasons = map[string]llm.StopReason{
	"STOP":               llm.StopEndTurn,
	"MAX_TOKENS":         llm.StopMaxTokens,
	"SAFETY":             llm.StopRefusal,
	"RECITATION":         llm.StopRefusal,
	"BLOCKLIST":          llm.StopRefusal,
	"PROHIBITED_CONTENT": llm.StopRefusal,
	"SPII":               llm.StopRefusal,
	"IMAGE_SAFETY":       llm.StopRefusal,
}

// finishReasons is stopReasons' inverse for the writer.
var finishReasons = map[llm.StopReason]string{
	llm.StopEndTurn:   "STOP",
	llm.StopToolUse:   "STOP",
	llm.StopSequence:  "STOP",
	llm.StopMaxTokens: "MAX_TOKENS",
	llm.StopRefusal:   "SAFETY",
}

func stopReason(finish string, toolCalls bool) llm.StopReason {
	if toolCalls && (finish == "STOP" || finish == "") {
		return llm.StopToolUse
	}
	if s, ok := stopReasons[finish]; ok {
		return s
	}
	return llm.StopEndTurn
}

// callID is the id of a function call that has none: stable for an
// answer (its responseId) and the call's place in it.
func callID(responseID string, n int) string {
	h := fnv.New64a()
	h.Write([]byte(responseID))
	return "call_" + strconv.FormatUint(h.Sum64(), 36) + "_" + strconv.Itoa(n)
}

// usage maps usageMetadata: input excludes the cached part; output counts
// the thoughts too (Gemini bills them as output).
func (u *usageMetadata) usage() llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	return llm.Usage{
		InputTokens:     max(u.PromptTokenCount-u.CachedContentTokenCount, 0),
		CacheReadTokens: u.CachedContentTokenCount,
		OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
		ReasoningTokens: u.ThoughtsTokenCount,
	}
}

// blocked is the error of a prompt the Gemini API refused to answer
// (promptFeedback.blockReason: SAFETY, BLOCKLIST, PROHIBITED_CONTENT,
// IMAGE_SAFETY, OTHER): a 400 with code content_filter, not an outage.
func blocked(reason string) *llm.APIError {
	return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Code: CodeContentFilter,
		Message: fmt.Sprintf("the prompt was blocked by Gemini's safety filters (promptFeedback.blockReason %s)", reason)}
}

// ParseResponse reads a GenerateContentResponse: the first candidate's
// parts and finish reason, the usage. A blocked prompt is returned as an
// *llm.APIError.
func ParseResponse(body []byte) (*llm.Response, error) {
	var in response
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	if in.Error != nil {
		return nil, in.Error.apiError(http.StatusInternalServerError)
	}
	if len(in.Candidates) == 0 {
		if pf := in.PromptFeedback; pf != nil && pf.BlockReason != "" {
			return nil, blocked(pf.BlockReason)
		}
		return nil, errors.New("no candidates in the answer")
	}
	c := in.Candidates[0]
	r := &llm.Response{ID: in.ResponseID, Model: in.ModelVersion, Usage: in.UsageMetadata.usage()}
	calls := 0
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			b, ok := answerBlock(p, in.ResponseID, &calls)
			if ok {
				r.Content = append(r.Content, b)
			}
		}
	}
	r.StopReason = stopReason(c.FinishReason, calls > 0)
	return r, nil
}

// answerBlock maps a part of an answer; empty text parts are skipped.
func answerBlock(p part, responseID string, calls *int) (llm.Block, bool) {
	switch {
	case p.FunctionCall != nil:
		fc := p.FunctionCall
		id := fc.ID
		if id == "" {
			id = callID(responseID, *calls)
		}
		*calls++
		args := fc.Args
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		return llm.Block{Type: llm.BlockToolUse, ID: id, Name: fc.Name, Input: args}, true
	case p.Text != nil && p.Thought:
		return llm.Block{Type: llm.BlockThinking, Thinking: *p.Text}, *p.Text != ""
	case p.Text != nil:
		return llm.Block{Type: llm.BlockText, Text: *p.Text}, *p.Text != ""
	case p.InlineData != nil:
		return llm.Block{Type: llm.BlockImage, Image: &llm.ImageSource{Kind: "base64", MediaType: p.InlineData.MimeType, Data: p.InlineData.Data}}, true
	}
	return llm.Block{}, false
}

// EncodeResponse writes r as a GenerateContentResponse (what the
// simulator answers).
func EncodeResponse(r *llm.Response) ([]byte, error) {
	out := response{ModelVersion: r.Model, ResponseID: r.ID, UsageMetadata: metadata(r.Usage)}
	c := candidate{Content: &content{Role: roleModel, Parts: encodeAnswer(r.Content)}, FinishReason: finishReason(r.StopReason)}
	out.Candidates = []candidate{c}
	return json.Marshal(&out)
}

func finishReason(s llm.StopReason) string {
	if f, ok := finishReasons[s]; ok {
		return f
	}
	return "STOP"
}

func metadata(u llm.Usage) *usageMetadata {
	return &usageMetadata{
		PromptTokenCount:        u.PromptTokens(),
		CachedContentTokenCount: u.CacheReadTokens,
		CandidatesTokenCount:    u.OutputTokens - u.ReasoningTokens,
		ThoughtsTokenCount:      u.ReasoningTokens,
		TotalTokenCount:         u.PromptTokens() + u.OutputTokens,
	}
}

// encodeAnswer maps an answer's blocks to parts (function calls without
// ids, as Gemini 2 models answer).
func encodeAnswer(blocks []llm.Block) []part {
	parts := make([]part, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case llm.BlockText:
			parts = append(parts, part{Text: str(b.Text)})
		case llm.BlockThinking:
			parts = append(parts, part{Text: str(b.Thinking), Thought: true})
		case llm.BlockToolUse:
			parts = append(parts, part{FunctionCall: &functionCall{Name: b.Name, Args: b.Input}})
		}
	}
	return parts
}
