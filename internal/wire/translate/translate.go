package translate

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// Values of Policy.Unsupported. The default, "", refuses content the
// target cannot carry (Report.Lost: a document, an image or audio where it
// cannot go, thinking, a server tool, an unknown block) with the 400 of
// Reject, and drops any other feature (a sampling parameter such as top_k,
// an unknown member) as Drop does: content is never lost silently, and a
// parameter's loss is named in Report.Dropped.
const (
	// Drop removes every feature the target cannot express, content
	// included, and lists it in Report.Dropped.
	Drop = "drop"
	// Reject fails the attempt with a 400 that names every such feature.
	Reject = "reject"
)

// DefaultMaxTokens is the max_tokens sent to an Anthropic-format endpoint
// when an OpenAI-format client gave none (Anthropic requires it). It matches
// what the provider sent before this package existed.
const DefaultMaxTokens = 4096

// maxOpenAIStops is the most stop sequences the OpenAI API accepts.
const maxOpenAIStops = 4

// Policy says what Prepare does with a feature the target format cannot
// express. The zero value drops it.
type Policy struct {
	// Unsupported is "" (the default: content refused, other features
	// dropped), Drop or Reject.
	Unsupported string
	// Endpoint names the target endpoint in Reject errors (an endpoint ID
	// such as "sim-llama/us-east/sim-openai"); empty means unnamed.
	Endpoint string
}

// Validate reports an Unsupported value other than "", Drop and Reject.
func (p Policy) Validate() error {
	switch p.Unsupported {
	case "", Drop, Reject:
		return nil
	}
	return fmt.Errorf("translation policy %q: want %q or %q", p.Unsupported, Drop, Reject)
}

// Report says what Prepare changed. The zero Report (same-format request)
// restores nothing.
type Report struct {
	// Dropped lists, in the order found and without repeats, the features
	// and hints removed because the target cannot express them: the value
	// of the X-Mesh-Dropped header.
	Dropped []string
	// Lost lists the content among Dropped: what the model would not see
	// (blocks, thinking, server tools). Routing prefers an endpoint for
	// which it is empty.
	Lost []string

	client, upstream llm.Format
	// names maps a tool name sent upstream to the client's; ids likewise
	// for tool-use ids. Nil when nothing was renamed.
	names map[string]string
	ids   map[string]string
	// customs holds the upstream names of a Responses client's custom
	// (freeform) tools offered as JSON tools: their calls go back to the
	// client as custom tool calls.
	customs map[string]bool
}

// Translated reports whether Prepare translated across formats, that is
// whether RestoreResponse and RestoreEvent may change anything.
func (r Report) Translated() bool { return r.client != r.upstream }

// RestoreName returns the client's name for a tool name used upstream.
// Names Prepare did not map are returned unchanged.
func (r Report) RestoreName(name string) string {
	if orig, ok := r.names[name]; ok {
		return orig
	}
	return name
}

// RestoreID returns the client's tool-use id for an id used upstream.
// Ids Prepare did not map are returned unchanged.
func (r Report) RestoreID(id string) string {
	if orig, ok := r.ids[id]; ok {
		return orig
	}
	return id
}

// Prepare returns req made sendable to an endpoint of the target format, and
// what it changed. A request already in the target format (or a target of
// FormatUnknown) is returned as it is with a zero Report. req is never
// modified; the result shares the unchanged parts of it.
//
// Under Policy Reject, a feature the target cannot express makes Prepare
// return an *llm.APIError: status 400, invalid_request_error, MeshCode
// MESH_BAD_REQUEST, with a message naming every such feature and the
// endpoint. Hints (see the package doc) are dropped under either policy.
// An invalid Policy is an error too.
func Prepare(req *llm.Request, target llm.Format, p Policy) (*llm.Request, Report, error) {
	if err := p.Validate(); err != nil {
		return nil, Report{}, err
	}
	if req.Format == target || target == llm.FormatUnknown {
		if out, dropped := withoutForeignOpaque(req, target); dropped != nil {
			return out, Report{client: req.Format, upstream: req.Format, Dropped: dropped}, nil
		}
		return req, Report{client: req.Format, upstream: req.Format}, nil
	}
	t := &prep{target: target, client: req.Format, rep: Report{client: req.Format, upstream: target}}
	out := *req
	t.topLevel(&out)
	t.tools(&out)
	t.messages(&out)
	switch {
	case p.Unsupported == Reject && len(t.features) > 0:
		return nil, Report{}, rejectError(t.features, target, p.Endpoint)
	case p.Unsupported == "" && len(t.rep.Lost) > 0:
		return nil, Report{}, rejectError(t.rep.Lost, target, p.Endpoint)
	}
	return &out, t.rep, nil
}

// rejectError is the 400 for features the target cannot express.
func rejectError(features []string, target llm.Format, endpoint string) *llm.APIError {
	article := "an "
	if target == llm.FormatGemini {
		article = "a "
	}
	where := article + formatName(target) + "-format endpoint"
	if endpoint != "" {
		where = "the " + formatName(target) + "-format endpoint " + endpoint
	}
	verb, it := "is", "it"
	if len(features) > 1 {
		verb, it = "are", "them"
	}
	return &llm.APIError{
		Status:   400,
		Type:     llm.ErrInvalidRequest,
		MeshCode: llm.MeshBadRequest,
		Message: fmt.Sprintf("%s %s not supported by %s; set translation policy drop to drop %s",
			strings.Join(features, ", "), verb, where, it),
	}
}

func formatName(f llm.Format) string {
	switch f {
	case llm.FormatAnthropic:
		return "Anthropic"
	case llm.FormatOpenAI:
		return "OpenAI"
	case llm.FormatResponses:
		return "OpenAI Responses"
	case llm.FormatGemini:
		return "Gemini"
	}
	return "unknown"
}

// prep is one Prepare call's state.
type prep struct {
	target   llm.Format
	client   llm.Format
	rep      Report
	features []string // policy-controlled drops, for the Reject message
}

// unsupported records a feature the target cannot express; the caller
// drops it (Prepare fails afterwards under Reject).
func (t *prep) unsupported(name string) {
	if !slices.Contains(t.features, name) {
		t.features = append(t.features, name)
	}
	t.hint(name)
}

// lost records content the target cannot carry: the model would not see
// it (see Report.Lost); the caller drops it.
func (t *prep) lost(name string) {
	if !slices.Contains(t.rep.Lost, name) {
		t.rep.Lost = append(t.rep.Lost, name)
	}
	t.unsupported(name)
}

// hint records something dropped that does not change what the model is
// asked; it is listed but never rejected.
func (t *prep) hint(name string) {
	if !slices.Contains(t.rep.Dropped, name) {
		t.rep.Dropped = append(t.rep.Dropped, name)
	}
}

// Top-level members kept in Request.Extra that are hints: dropping them
// changes billing, storage or caching, not the answer.
var hintKeys = map[string]bool{
	"service_tier":           true,
	"store":                  true,
	"prompt_cache_key":       true,
	"prompt_cache_retention": true,
	"metadata":               true, // OpenAI metadata: tags for stored completions
	"safety_identifier":      true, // when user is also set (else it becomes the user id)
	"include":                true, // Responses: extra output members asked for (reasoning.encrypted_content …)
}

// familyKeys are top-level members both OpenAI APIs take with the same
// meaning: kept between Chat Completions and Responses.
var familyKeys = map[string]bool{
	"service_tier":           true,
	"metadata":               true,
	"prompt_cache_key":       true,
	"prompt_cache_retention": true,
	"safety_identifier":      true,
}

func (t *prep) topLevel(r *llm.Request) {
	var extra llm.Extra
	if len(r.Extra) > 0 {
		keys := make([]string, 0, len(r.Extra))
		for k := range r.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := r.Extra[k]
			switch {
			case k == "mesh_behavior":
			case k == "safety_identifier" && t.target == llm.FormatAnthropic && r.UserID == "":
				// PROTOCOLS §5.1: user_id ⇄ user / safety_identifier.
				var s string
				if json.Unmarshal(v, &s) == nil && s != "" {
					r.UserID = s
				} else {
					t.hint(k)
				}
			case (k == "output_config" || k == "output_format") && (t.target.Family() == llm.FormatOpenAI || t.target == llm.FormatGemini):
				t.outputConfig(r, k, v)
			case t.target == llm.FormatGemini && (k == "thinking" || k == "reasoning_effort"):
				// Anthropic's thinking budget and OpenAI's reasoning
				// effort: the Gemini encoder makes them thinkingConfig.
				jsonx.SetMember(&extra, k, v)
			case familyKeys[k] && t.client.Family() == t.target.Family():
				jsonx.SetMember(&extra, k, v)
			case k == "store" && t.client == llm.FormatOpenAI && t.target == llm.FormatResponses:
				jsonx.SetMember(&extra, k, v)
			case t.client == llm.FormatOpenAI && t.target == llm.FormatResponses && (k == "reasoning_effort" || k == "verbosity"):
				// Chat's reasoning_effort and verbosity are Responses'
				// reasoning.effort and text.verbosity.
				outer := map[string]string{"reasoning_effort": "reasoning", "verbosity": "text"}[k]
				inner := map[string]string{"reasoning_effort": "effort", "verbosity": "verbosity"}[k]
				jsonx.SetMember(&extra, outer, append(append(append([]byte(`{"`), inner...), `":`...), append(v, '}')...))
			case t.client == llm.FormatResponses && t.target == llm.FormatOpenAI && (k == "reasoning" || k == "text"):
				t.nested(&extra, k, v, map[string]string{"effort": "reasoning_effort", "verbosity": "verbosity"})
			case hintKeys[k]:
				t.hint(k)
			default:
				t.unsupported(k)
			}
		}
	}
	if t.client == llm.FormatOpenAI && t.target == llm.FormatResponses && extra["store"] == nil {
		// Chat Completions stores nothing unless asked; the Responses API
		// stores every answer unless told not to.
		jsonx.SetMember(&extra, "store", []byte("false"))
	}
	r.Extra = extra

	switch t.target {
	case llm.FormatOpenAI, llm.FormatResponses:
		if t.target == llm.FormatResponses {
			if len(r.StopSequences) > 0 {
				t.unsupported("stop_sequences")
				r.StopSequences, r.StopIsString = nil, false
			}
			if r.HasMaxTokens && r.MaxTokens < responsesMinMaxTokens {
				// the Responses API's floor: the answer may run longer
				t.unsupported("max_tokens<16")
				r.MaxTokens = responsesMinMaxTokens
			}
			r.MaxTokensLegacy, r.IncludeUsage, r.N = false, false, 0
		}
		if r.TopK != nil {
			t.unsupported("top_k")
			r.TopK = nil
		}
		if len(r.MetadataExtra) > 0 {
			for _, k := range sortedKeys(r.MetadataExtra) {
				t.unsupported("metadata." + k)
			}
			r.MetadataExtra = nil
		}
		if len(r.StreamOptionsExtra) > 0 && t.target == llm.FormatResponses {
			for _, k := range sortedKeys(r.StreamOptionsExtra) {
				t.hint("stream_options." + k)
			}
			r.StreamOptionsExtra = nil
		}
		if len(r.StopSequences) > maxOpenAIStops {
			t.unsupported("stop_sequences[4:]")
			r.StopSequences = r.StopSequences[:maxOpenAIStops:maxOpenAIStops]
		}
		if len(r.System) > 0 {
			r.System = slices.Clone(r.System)
			for i := range r.System {
				t.blockExtra(&r.System[i])
			}
		}
		if tc := r.ToolChoice; tc != nil {
			c := *tc
			if c.DisableParallel != nil {
				if *c.DisableParallel && r.ParallelToolCalls == nil {
					f := false
					r.ParallelToolCalls = &f
				}
				c.DisableParallel = nil
			}
			r.ToolChoice = &c
		}
	case llm.FormatGemini:
		t.gemini(r)
	case llm.FormatAnthropic:
		if r.N > 1 {
			t.unsupported("n")
		}
		r.N = 0 // n=1 is Anthropic's only behaviour: nothing changes
		if rf := r.ResponseFormat; rf != nil {
			r.ResponseFormat = nil
			switch rf.Type {
			case "text":
				// the default: nothing changes
			case "json_schema":
				if rf.Schema == nil {
					t.unsupported("response_format:json_schema")
					break
				}
				if rf.Description != "" {
					t.unsupported("response_format.description")
				}
				for _, k := range sortedKeys(rf.Extra) {
					t.unsupported("response_format." + k)
				}
				// Anthropic structured outputs: the answer stays a text
				// block, as the OpenAI client expects; always strict, and
				// only on the schema subset it takes (AnthropicSchema).
				closed, err := AnthropicSchema(rf.Schema)
				if err != nil {
					t.unsupported("response_format:json_schema")
					break
				}
				oc := append([]byte(`{"format":{"type":"json_schema","schema":`), closed...)
				oc = append(oc, "}}"...)
				r.Extra = llm.Extra{"output_config": oc}
			default:
				t.unsupported("response_format:" + rf.Type)
			}
		}
		if r.ParallelToolCalls != nil {
			if !*r.ParallelToolCalls && len(r.Tools) > 0 {
				var c llm.ToolChoice
				if r.ToolChoice != nil {
					c = *r.ToolChoice
				} else {
					c.Type = llm.ToolChoiceAuto
				}
				if c.Type != llm.ToolChoiceNone && c.Raw == nil {
					d := true
					c.DisableParallel = &d
				}
				r.ToolChoice = &c
			}
			r.ParallelToolCalls = nil
		}
		if len(r.StreamOptionsExtra) > 0 {
			for _, k := range sortedKeys(r.StreamOptionsExtra) {
				t.hint("stream_options." + k)
			}
			r.StreamOptionsExtra = nil
		}
		if r.Temperature != nil && *r.Temperature > 1 {
			// OpenAI's range is 0–2, Anthropic's 0–1: dropping clamps.
			t.unsupported("temperature>1")
			one := 1.0
			r.Temperature = &one
		}
		if !r.HasMaxTokens {
			r.MaxTokens, r.HasMaxTokens = DefaultMaxTokens, true
		}
		r.MaxTokensLegacy = false
	}
}

// outputConfig maps Anthropic output_config.format / output_format of type
// json_schema to an OpenAI json_schema response_format named "output";
// strict when the schema meets OpenAI's strict rules.
func (t *prep) outputConfig(r *llm.Request, key string, v json.RawMessage) {
	var format json.RawMessage
	if key == "output_format" {
		format = v
	} else {
		var oc map[string]json.RawMessage
		if json.Unmarshal(v, &oc) != nil {
			t.unsupported(key)
			return
		}
		for _, k := range sortedKeys(oc) {
			if k != "format" {
				t.unsupported(key + "." + k)
			}
		}
		format = oc["format"]
		if format == nil {
			return
		}
	}
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(format, &f) != nil || f.Type != "json_schema" || len(f.Schema) == 0 {
		t.unsupported(key + ".format")
		return
	}
	rf := &llm.ResponseFormat{Type: "json_schema", Name: "output", Schema: f.Schema}
	if strictCompatible(f.Schema) {
		s := true
		rf.Strict = &s
	}
	r.ResponseFormat = rf
}

// strictCompatible reports whether every object in the schema forbids
// additional properties and requires all of its properties, as OpenAI's
// strict mode demands (Anthropic's structured outputs are always enforced,
// so strict is the faithful translation when the schema allows it).
func strictCompatible(schema json.RawMessage) bool {
	var v any
	if json.Unmarshal(schema, &v) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			if props, ok := x["properties"].(map[string]any); ok || x["type"] == "object" {
				if ap, ok := x["additionalProperties"].(bool); !ok || ap {
					return false
				}
				req, _ := x["required"].([]any)
				if len(req) != len(props) {
					return false
				}
			}
			for _, e := range x {
				if !walk(e) {
					return false
				}
			}
		case []any:
			for _, e := range x {
				if !walk(e) {
					return false
				}
			}
		}
		return true
	}
	return walk(v)
}

func (t *prep) tools(r *llm.Request) {
	if r.Tools == nil && r.ToolChoice == nil {
		return
	}
	hadTools := len(r.Tools) > 0
	tools := make([]llm.Tool, 0, len(r.Tools))
	for _, tl := range r.Tools {
		if tl.Raw != nil {
			if st, ok := t.webSearch(tl); ok {
				tools = append(tools, st)
				continue
			}
			if ct, ok := t.customTool(tl); ok {
				tools = append(tools, ct)
				continue
			}
			// An Anthropic server tool in a Messages request is asked for
			// deliberately: content the answer would lack, refused by default
			// (issue 25). A Responses tool the target cannot run (web_search,
			// custom, namespace …) is sent by Codex and the AI SDK on every
			// turn whether the task needs it or not: dropped and named
			// (X-Mesh-Dropped), refused only under reject (issue 24).
			if (t.target == llm.FormatOpenAI || t.target == llm.FormatGemini) && t.client == llm.FormatAnthropic {
				t.lost("server_tool:" + tl.Type)
			} else {
				t.unsupported("tool:" + tl.Type)
			}
			continue
		}
		for _, k := range sortedKeys(tl.Extra) {
			if isHintMember(k) {
				t.hint(k)
			} else {
				t.unsupported("tool." + k)
			}
		}
		tl.Extra = nil
		tl.Name = t.mapName(tl.Name)
		tools = append(tools, tl)
	}
	if len(tools) == 0 {
		tools = nil
	}
	if r.Tools != nil {
		r.Tools = tools
	}
	if tc := r.ToolChoice; tc != nil {
		c := *tc
		switch {
		case c.Raw != nil:
			t.unsupported("tool_choice")
			r.ToolChoice = nil
			return
		case hadTools && len(r.Tools) == 0 && c.Type != llm.ToolChoiceNone:
			// no tool left (all dropped): a choice among none cannot be sent
			r.ToolChoice = nil
			return
		}
		for _, k := range sortedKeys(c.Extra) {
			t.unsupported("tool_choice." + k)
		}
		c.Extra = nil
		if c.Type == llm.ToolChoiceTool {
			c.Name = t.mapName(c.Name)
		}
		r.ToolChoice = &c
	}
}

// isHintMember reports block or tool members that only steer caching or
// carry provenance, not what the model is asked.
func isHintMember(k string) bool { return k == "cache_control" || k == "citations" }

func (t *prep) messages(r *llm.Request) {
	msgs := make([]llm.Message, 0, len(r.Messages))
	onlySystem := true
	for i := range r.Messages {
		m := r.Messages[i]
		if m.Role != llm.RoleSystem && m.Role != llm.RoleDeveloper {
			onlySystem = false
		}
		had := len(m.Content) > 0
		t.message(&m)
		if len(m.Content) == 0 && (had || m.Role == llm.RoleAssistant && t.target == llm.FormatAnthropic) {
			// Everything in it was dropped, or an OpenAI assistant turn with
			// null content and no tool calls: it says nothing, and Anthropic
			// rejects empty content.
			continue
		}
		if n := len(msgs); t.client == llm.FormatResponses && n > 0 && m.Role == llm.RoleAssistant && msgs[n-1].Role == llm.RoleAssistant {
			// Responses items are one message each: an answer's text,
			// reasoning and calls are one assistant turn elsewhere.
			prev := &msgs[n-1]
			prev.Content = append(slices.Clip(prev.Content), m.Content...)
			prev.ContentIsString = false
			continue
		}
		if n := len(msgs); t.target == llm.FormatAnthropic && n > 0 && m.Role == llm.RoleUser &&
			msgs[n-1].Role == llm.RoleUser && onlyToolResults(msgs[n-1].Content) {
			// OpenAI tool messages then a user message: one Anthropic turn,
			// tool results first as the API requires.
			prev := &msgs[n-1]
			prev.Content = append(slices.Clip(prev.Content), m.Content...)
			prev.ContentIsString = false
			continue
		}
		msgs = append(msgs, m)
	}
	if onlySystem && len(msgs) > 0 && len(r.System) == 0 {
		// PROTOCOLS §5.1: a transcript of only system messages must become
		// a user message (Anthropic requires one; OpenAI models answer it).
		var parts []string
		for i := range msgs {
			if s := msgs[i].Text(); s != "" {
				parts = append(parts, s)
			}
		}
		msgs = []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: strings.Join(parts, "\n\n")}}, ContentIsString: true}}
	}
	r.Messages = msgs
}

func onlyToolResults(bs []llm.Block) bool {
	for i := range bs {
		if bs[i].Type != llm.BlockToolResult {
			return false
		}
	}
	return len(bs) > 0
}

func (t *prep) message(m *llm.Message) {
	if len(m.Extra) > 0 {
		for _, k := range sortedKeys(m.Extra) {
			switch {
			case string(m.Extra[k]) == "null": // an explicit null says nothing
			case t.client == llm.FormatResponses && (k == "id" || k == "status"):
				// a Responses item's own id and status: OpenAI's
				// bookkeeping, meaningless to any other endpoint
			case t.client == llm.FormatResponses && k == "phase":
				t.hint("message.phase")
			default:
				t.unsupported("message." + k)
			}
		}
		m.Extra = nil
	}
	if m.Name != "" && (t.target == llm.FormatAnthropic || t.target == llm.FormatGemini) {
		t.hint("message.name")
		m.Name = ""
	}
	if m.Content == nil {
		return
	}
	content := make([]llm.Block, 0, len(m.Content))
	for _, b := range m.Content {
		if t.block(&b, m.Role, false) {
			content = append(content, b)
		}
	}
	if t.target == llm.FormatAnthropic && len(content) > 1 {
		// The Anthropic API rejects empty text blocks; next to other blocks
		// they say nothing (OpenAI assistant content "" beside tool calls).
		content = slices.DeleteFunc(content, func(b llm.Block) bool {
			return b.Type == llm.BlockText && b.Raw == nil && b.Text == ""
		})
	}
	if len(content) != len(m.Content) {
		m.ContentIsString = m.ContentIsString && len(content) == 1 && content[0].Type == llm.BlockText
	}
	m.Content = content
}

// block prepares one block in place and reports whether to keep it.
// inResult is set for the content of a tool_result.
func (t *prep) block(b *llm.Block, role llm.Role, inResult bool) bool {
	if b.Type == llm.BlockReasoning {
		// OpenAI's encrypted reasoning is valid at a Responses endpoint
		// only (same-format calls never get here): left out, and said.
		if b.Data != "" {
			t.hint("reasoning.encrypted_content")
		} else {
			t.hint("reasoning")
		}
		return false
	}
	if b.Raw != nil && t.client == llm.FormatResponses {
		switch jsonType(b.Raw) {
		case "custom_tool_call":
			// its text input is already the {"input": text} a JSON tool takes
			b.Raw = nil
			b.Name = t.mapName(b.Name)
			b.ID = t.mapID(b.ID)
			return true
		case "custom_tool_call_output":
			b.Raw = nil
			b.ToolUseID = t.mapID(b.ToolUseID)
			return true
		}
	}
	if b.Raw != nil {
		switch {
		case b.Type == llm.BlockToolUse:
			// An OpenAI tool call whose arguments are not a JSON object, or
			// not a function call: only its id, name and "{}" can be sent.
			t.unsupported("tool_call_arguments")
			b.Raw, b.Extra = nil, nil
			if len(b.Input) == 0 {
				b.Input = json.RawMessage("{}")
			}
			b.Name = t.mapName(b.Name)
			b.ID = t.mapID(b.ID)
			return true
		case b.Type == "":
			t.lost("unknown_block")
		default:
			t.lost(string(b.Type) + "_block")
		}
		return false
	}
	switch b.Type {
	case llm.BlockText:
		t.blockExtra(b)
	case llm.BlockImage:
		if inResult && (t.target == llm.FormatOpenAI || t.target == llm.FormatGemini) {
			// OpenAI tool messages carry text parts only; Gemini's
			// functionResponse is a JSON object.
			t.lost("tool_result_image")
			return false
		}
		if b.Image == nil {
			t.lost("image_block")
			return false
		}
		if b.Image.Kind == "url" && t.target == llm.FormatGemini {
			// The Gemini API reads fileData only from its Files API and
			// a few hosts, not any URL: the image would not be seen.
			t.lost("image_url")
			return false
		}
		if b.Image.Detail != "" && t.target == llm.FormatGemini {
			t.hint("image_detail")
			img := *b.Image
			img.Detail = ""
			b.Image = &img
		}
		if b.Image.Detail != "" && t.target == llm.FormatAnthropic {
			t.hint("image_detail")
			img := *b.Image
			img.Detail = ""
			b.Image = &img
		}
		t.blockExtra(b)
	case llm.BlockToolUse:
		t.blockExtra(b)
		b.Name = t.mapName(b.Name)
		b.ID = t.mapID(b.ID)
	case llm.BlockToolResult:
		t.blockExtra(b)
		b.ToolUseID = t.mapID(b.ToolUseID)
		if b.IsError && t.target.Family() == llm.FormatOpenAI {
			// OpenAI has no error flag; the result's text still says what
			// failed, so this is listed but never rejected.
			t.hint("tool_result.is_error")
			b.IsError = false
		}
		if b.Content != nil {
			content := make([]llm.Block, 0, len(b.Content))
			for _, c := range b.Content {
				if t.block(&c, role, true) {
					content = append(content, c)
				}
			}
			if len(content) != len(b.Content) {
				b.ContentIsString = b.ContentIsString && len(content) == 1 && content[0].Type == llm.BlockText
			}
			b.Content = content
		}
	case llm.BlockThinking, llm.BlockRedactedThinking:
		if t.target.Family() == llm.FormatOpenAI || t.target == llm.FormatGemini || (b.Type == llm.BlockThinking && b.Signature == "") {
			// OpenAI has no reasoning input; Anthropic rejects unsigned thinking.
			// A past turn's thinking is opaque state of the family that made it
			// (issue 24): left out and named, never a refusal — Anthropic itself
			// drops earlier turns' thinking from the context.
			t.hint("thinking")
			return false
		}
		t.blockExtra(b)
	default:
		t.lost(string(b.Type) + "_block")
		return false
	}
	return true
}

// blockExtra removes a block's unknown members (cache_control, citations,
// or members only the source format knows), recording each.
func (t *prep) blockExtra(b *llm.Block) {
	if len(b.Extra) == 0 {
		return
	}
	for _, k := range sortedKeys(b.Extra) {
		if isHintMember(k) {
			t.hint(k)
		} else {
			t.unsupported(string(b.Type) + "." + k)
		}
	}
	b.Extra = nil
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
