package translate

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// responsesMinMaxTokens is the smallest max_output_tokens the Responses
// API accepts (docs/RESPONSES.md §1).
const responsesMinMaxTokens = 16

// withoutForeignOpaque returns a same-format request to a Responses
// endpoint without the Anthropic thinking a Responses client carries from
// an earlier turn served by Anthropic (wire/responses keeps it in
// reasoning items): OpenAI would reject its signature. dropped is nil when
// there was none and req is to be sent as it is.
func withoutForeignOpaque(req *llm.Request, target llm.Format) (*llm.Request, []string) {
	if target != llm.FormatResponses {
		return req, nil
	}
	isForeign := func(b llm.Block) bool { return b.Type == llm.BlockThinking || b.Type == llm.BlockRedactedThinking }
	found := false
	for i := range req.Messages {
		if slices.ContainsFunc(req.Messages[i].Content, isForeign) {
			found = true
			break
		}
	}
	if !found {
		return req, nil
	}
	out := *req
	out.Messages = make([]llm.Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		if slices.ContainsFunc(m.Content, isForeign) {
			m.Content = slices.DeleteFunc(slices.Clone(m.Content), isForeign)
			if len(m.Content) == 0 {
				continue
			}
		}
		out.Messages = append(out.Messages, m)
	}
	return &out, []string{"thinking"}
}

// nested maps the members of a Responses object parameter (reasoning,
// text) onto Chat Completions top-level parameters by names; the others
// are dropped: hints for reasoning (summaries), unsupported otherwise.
func (t *prep) nested(extra *llm.Extra, key string, v json.RawMessage, names map[string]string) {
	if len(v) == 0 || v[0] != '{' {
		t.unsupported(key)
		return
	}
	_ = jsonx.EachMember(v, func(kb, mv []byte) error {
		k, _ := jsonx.Unquote(kb)
		switch to, ok := names[k]; {
		case jsonx.IsNull(mv):
		case ok && mv[0] == '"':
			jsonx.SetMember(extra, to, mv)
		case key == "reasoning":
			t.hint(key + "." + k)
		default:
			t.unsupported(key + "." + k)
		}
		return nil
	})
}

// webSearch maps a web search tool onto the target's own: OpenAI
// Responses' web_search (and its dated and preview forms) is Anthropic's
// web_search_20250305 server tool, and back (docs/RESPONSES.md §5). Its
// options (locations, domains, limits) are not carried: listed as hints.
// A web_search with external_web_access false (Codex sends it so: cached
// results only, no live fetch) is not mapped: Anthropic's tool searches the
// live web, a different behaviour billed per search; it is dropped and
// named like any tool the endpoint cannot run.
func (t *prep) webSearch(tl llm.Tool) (llm.Tool, bool) {
	client, target := t.client, t.target
	if _, ok := webSearchTarget(tl, client, target); ok {
		_ = jsonx.EachMember(tl.Raw, func(kb, _ []byte) error {
			if k, _ := jsonx.Unquote(kb); k != "type" && k != "name" {
				t.hint("web_search." + k)
			}
			return nil
		})
	}
	return webSearchTarget(tl, client, target)
}

func webSearchTarget(tl llm.Tool, client, target llm.Format) (llm.Tool, bool) {
	switch {
	case client == llm.FormatResponses && target == llm.FormatAnthropic && strings.HasPrefix(tl.Type, "web_search") && !noLiveAccess(tl.Raw):
		return llm.Tool{Type: "web_search_20250305", Name: "web_search", Raw: json.RawMessage(`{"type":"web_search_20250305","name":"web_search"}`)}, true
	case client == llm.FormatAnthropic && target == llm.FormatResponses && strings.HasPrefix(tl.Type, "web_search_"):
		return llm.Tool{Type: "web_search", Name: "web_search", Raw: json.RawMessage(`{"type":"web_search"}`)}, true
	}
	return tl, false
}

// noLiveAccess reports whether a Responses web_search tool says
// "external_web_access": false.
func noLiveAccess(raw json.RawMessage) bool {
	off := false
	_ = jsonx.EachMember(raw, func(kb, v []byte) error {
		if k, _ := jsonx.Unquote(kb); k == "external_web_access" && string(v) == "false" {
			off = true
		}
		return nil
	})
	return off
}

// customInputSchema is the input schema a Responses client's custom
// (freeform, text-input) tool is offered with to an endpoint whose tools
// take JSON: one string, the text.
const customInputSchema = `{"type":"object","properties":{"input":{"type":"string","description":"The tool's input, as free text."}},"required":["input"],"additionalProperties":false}`

// customCallMarker is the Raw that marks a tool call as a custom tool's
// for the Responses codec (wire/responses.CustomCallMarker).
const customCallMarker = `{"type":"custom_tool_call"}`

// customTool offers a Responses client's custom tool (Codex's apply_patch)
// to an endpoint of another format as a JSON tool of one string, and
// remembers it so its calls go back as custom tool calls. A grammar the
// tool's input must follow cannot be enforced there: listed as a hint,
// and given to the model in the description.
func (t *prep) customTool(tl llm.Tool) (llm.Tool, bool) {
	if t.client != llm.FormatResponses || t.target == llm.FormatResponses || tl.Type != "custom" || tl.Name == "" {
		return tl, false
	}
	var raw struct {
		Description string `json:"description"`
		Format      *struct {
			Type       string `json:"type"`
			Syntax     string `json:"syntax"`
			Definition string `json:"definition"`
		} `json:"format"`
	}
	if json.Unmarshal(tl.Raw, &raw) != nil {
		return tl, false
	}
	desc := raw.Description
	if f := raw.Format; f != nil && f.Type == "grammar" {
		t.hint("custom.format:grammar")
		desc += "\n\nThe input must follow this " + f.Syntax + " grammar:\n" + f.Definition
	}
	name := t.mapName(tl.Name)
	if t.rep.customs == nil {
		t.rep.customs = make(map[string]bool)
	}
	t.rep.customs[name] = true
	return llm.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(customInputSchema)}, true
}

// jsonType is the type member of a raw JSON object, "" when it has none.
func jsonType(raw []byte) string {
	typ := ""
	_ = jsonx.EachMember(raw, func(k, v []byte) error {
		if string(k) == `"type"` {
			typ, _ = jsonx.Unquote(v)
		}
		return nil
	})
	return typ
}

// webSearchCall is the Responses web_search_call output item for an
// Anthropic web search the server ran (a server_tool_use block named
// web_search), for a Responses client; nil for any other block or client.
// The search's results (web_search_tool_result) have no place in the
// item: their text reached the answer through the model.
func webSearchCall(b *llm.Block, client llm.Format) json.RawMessage {
	if client != llm.FormatResponses || b.Type != "server_tool_use" || b.Raw == nil {
		return nil
	}
	var use struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Input struct {
			Query string `json:"query"`
		} `json:"input"`
	}
	if json.Unmarshal(b.Raw, &use) != nil || use.Name != "web_search" {
		return nil
	}
	item := append([]byte(`{"id":`), jsonx.AppendString(nil, "ws_"+strings.TrimPrefix(use.ID, "srvtoolu_"))...)
	item = append(item, `,"type":"web_search_call","status":"completed","action":{"type":"search","query":`...)
	item = jsonx.AppendString(item, use.Input.Query)
	return append(item, "}}"...)
}
