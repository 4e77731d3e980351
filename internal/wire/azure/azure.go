// Package azure reads and writes Azure OpenAI's error answers. Azure
// OpenAI takes and answers OpenAI's request and answer bodies (the openai
// and responses codecs read them); its errors differ:
//
//   - the front's own errors carry a numeric code and a message only,
//     {"error":{"code":"429","message":"Requests to the ChatCompletions_Create
//     Operation under Azure OpenAI API version 2024-10-21 have exceeded …"}}
//     (401 for a bad api-key, 404 "Resource not found" for a call without
//     api-version, 429 for a rate limit: learn.microsoft.com/azure/ai-foundry/openai/quotas-limits,
//     learn.microsoft.com/azure/ai-foundry/openai/reference);
//   - a prompt its content filter refuses is a 400 with code content_filter
//     and the verdict of each filter category in
//     error.innererror.content_filter_result
//     (learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter).
//
// ParseError turns both into a canonical error; EncodeError and
// EncodeContentFilterError write them (the simulator serves them). The
// functions are pure and safe for concurrent use.
package azure

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// CodeContentFilter is the error code of a prompt Azure's content filter
// refused, and the finish reason of an answer it cut.
const CodeContentFilter = "content_filter"

// ContentFilterMessage is the message of Azure's 400 content_filter
// (learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter).
const ContentFilterMessage = "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry. To learn more about our content filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766"

// FilterResult is one content filter category's verdict: the harm
// categories (hate, sexual, violence, self_harm) give a severity (safe,
// low, medium, high), the detectors (jailbreak, protected_material_text,
// …) say whether they detected something.
type FilterResult struct {
	Category string
	Filtered bool
	Severity string
	Detected bool
}

// ParseError reads an Azure OpenAI error answer: OpenAI's shape as the
// openai codec reads it, less Azure's numeric echo of the status (its
// "status": 400 is no error type), and for a content filter refusal the
// categories that fired, named in the message so that a client of any
// format sees why ("… (content filter: hate severity high)").
func ParseError(status int, h http.Header, body []byte) *llm.APIError {
	e := openai.ParseError(status, h, body)
	if isDigits(e.RawType) {
		e.RawType = ""
	}
	if e.RequestID == "" && h != nil {
		e.RequestID = h.Get("apim-request-id")
	}
	results, inner := filterResults(body)
	if e.Code != CodeContentFilter && inner != "ResponsibleAIPolicyViolation" {
		return e
	}
	e.Code = CodeContentFilter
	if status == http.StatusBadRequest {
		e.Type = llm.ErrInvalidRequest
	}
	if fired := describe(results); fired != "" {
		e.Message += " (content filter: " + fired + ")"
	}
	return e
}

// filterResults reads error.innererror: its code and its
// content_filter_result, sorted by category.
func filterResults(body []byte) ([]FilterResult, string) {
	var doc struct {
		Error struct {
			InnerError struct {
				Code   string                     `json:"code"`
				Result map[string]json.RawMessage `json:"content_filter_result"`
			} `json:"innererror"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return nil, ""
	}
	in := doc.Error.InnerError
	var out []FilterResult
	for cat, raw := range in.Result {
		var v struct {
			Filtered bool   `json:"filtered"`
			Severity string `json:"severity"`
			Detected bool   `json:"detected"`
		}
		if json.Unmarshal(raw, &v) != nil {
			continue // a category of another shape (custom_blocklists: a list)
		}
		out = append(out, FilterResult{Category: cat, Filtered: v.Filtered, Severity: v.Severity, Detected: v.Detected})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Category < out[j].Category })
	return out, in.Code
}

// describe names the categories that filtered: "hate severity high,
// jailbreak detected".
func describe(results []FilterResult) string {
	var parts []string
	for _, r := range results {
		if !r.Filtered {
			continue
		}
		switch {
		case r.Severity != "":
			parts = append(parts, r.Category+" severity "+r.Severity)
		case r.Detected:
			parts = append(parts, r.Category+" detected")
		default:
			parts = append(parts, r.Category)
		}
	}
	return strings.Join(parts, ", ")
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// EncodeError writes an error of Azure OpenAI's front: {"error":{"code":
// "<status>","message":…}} for the statuses it answers itself (401, 404,
// 429), OpenAI's shape for the rest (a request the model's API refused).
func EncodeError(e *llm.APIError) []byte {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusNotFound, http.StatusTooManyRequests:
		code := e.Code
		if code == "" {
			code = strconv.Itoa(e.Status)
		}
		b := append([]byte(`{"error":{"code":`), jsonx.AppendString(nil, code)...)
		b = append(b, `,"message":`...)
		b = jsonx.AppendString(b, e.Message)
		return append(b, "}}"...)
	}
	return openai.EncodeError(e)
}

// EncodeContentFilterError writes Azure's 400 content_filter answer for a
// prompt, with the verdict of each category.
func EncodeContentFilterError(results []FilterResult) []byte {
	b := []byte(`{"error":{"message":`)
	b = jsonx.AppendString(b, ContentFilterMessage)
	b = append(b, `,"type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{`...)
	for i, r := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonx.AppendString(b, r.Category)
		b = append(b, `:{"filtered":`...)
		b = jsonx.AppendBool(b, r.Filtered)
		if r.Severity != "" {
			b = append(b, `,"severity":`...)
			b = jsonx.AppendString(b, r.Severity)
		} else {
			b = append(b, `,"detected":`...)
			b = jsonx.AppendBool(b, r.Detected)
		}
		b = append(b, '}')
	}
	return append(b, "}}}}"...)
}
