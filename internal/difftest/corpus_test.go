package difftest

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
)

// dcase is one request of the corpus.
type dcase struct {
	name string
	// format is the client's API: Anthropic Messages, OpenAI Chat
	// Completions or the OpenAI Responses API.
	format llm.Format
	model  string
	stream bool
	body   map[string]any
	// wantKeys are the keys a JSON answer must have (the corpus's truth
	// for a system prompt that asks for them); wantJSON that the client
	// expects a parseable JSON answer (a JSON mode).
	wantKeys []string
	wantJSON bool
	// schema is the JSON Schema the client gave, if any.
	schema string
}

func (c *dcase) path() string { return wire.For(c.format).Path() }

// Building blocks. Written as people write them: the user turns of a
// support desk, a coding assistant, a travel agent, an extraction
// pipeline; in English and Chinese.
var (
	userTexts = []string{
		"Can you explain the difference between a mutex and a semaphore?",
		"My order #48213 hasn't arrived yet, it's been two weeks. What should I do?",
		"Write a short thank-you note to my team for shipping the release on time.",
		"What are three things to see in Lisbon if I only have one day?",
		"Summarise the main arguments for and against remote work in a few sentences.",
		"How do I reverse a linked list in Go? Keep it short.",
		"Is it safe to take ibuprofen with coffee?",
		"Translate 'the meeting has been moved to Thursday' into Spanish.",
		"请帮我写一段产品发布会的开场白，大约一百字。",
		"我的快递显示已签收，但我没有收到，应该怎么处理？",
		"用简单的话解释一下什么是区块链。",
		"推荐三本适合初学者的机器学习书籍。",
		"总结一下这段话的要点：公司第三季度营收同比增长12%，主要来自海外市场。",
		"What's a good name for a coffee shop near a university?",
		"Give me a regex that matches ISO 8601 dates.",
		"Draft a polite reminder about an unpaid invoice.",
	}
	extractionTexts = []string{
		"name: Ada Lovelace\nemail_domain: example.org\ncity: London",
		"invoice_number: INV-2026-0042\ntotal: 1250.50\ndue_date: 2026-12-31",
		"risk_level: high\nmitigation_steps: patch the gateways\nconfidence_score: 0.8",
		"title: The Sea Around Us\nyear: 1951\nauthor: Rachel Carson",
		"question: What is the capital of Portugal?\nanswer: Lisbon",
		"product: desk lamp\nprice: 39.99\nin_stock: true",
	}
	neutralSystems = []string{
		"You are a helpful assistant. Answer briefly.",
		"You are a friendly support agent for an online bookshop.",
		"You are a senior Go engineer. Prefer the standard library.",
		"你是一个乐于助人的中文助手，回答要简洁。",
		"你是电商平台的客服，语气礼貌。",
	}
	piiTexts = []string{
		"Please update my email to jane.doe@example.com and call me at +1 415 555 0134.",
		"我的手机号是13812345678，邮箱是 li.lei@example.cn，请帮我改地址。",
		"Card 4111 1111 1111 1111 was charged twice, can you refund one?",
	}
	weatherTool = map[string]any{"name": "get_weather", "description": "Current weather for a city",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string", "enum": []any{"celsius", "fahrenheit"}}}, "required": []any{"city"}}}
	searchTool = map[string]any{"name": "search_docs", "description": "Search the product documentation",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}, "limit": map[string]any{"type": "integer"}}, "required": []any{"query"}}}
	bookSchema = `{"type":"object","properties":{"title":{"type":"string"},"year":{"type":"integer"},"author":{"type":"string"}},"required":["title","year","author"],"additionalProperties":false}`
	riskSchema = `{"type":"object","properties":{"risk_level":{"type":"string","enum":["low","medium","high"]},"mitigation_steps":{"type":"string"},"confidence_score":{"type":"number"}},"required":["risk_level","mitigation_steps","confidence_score"],"additionalProperties":false}`
	// A one-page PDF and a 1×1 PNG, as clients attach them.
	pdfData = base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"))
	pngData = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

// Models as the corpus names them: the fleet's three tiers (served in both
// formats), sim-claude (Anthropic format only) and sim-llama (OpenAI
// format only).
var (
	bothFormats = []string{"sim-sonnet", "sim-opus", "sim-haiku"}
	allModels   = []string{"sim-sonnet", "sim-opus", "sim-haiku", "sim-claude", "sim-llama"}
)

// phrasing is one case of the structured package's phrasing corpus.
type phrasing struct {
	prompt string
	keys   []string
}

// readPhrasings reads internal/structured/testdata phrasing files (written
// for issue 25, not tuned to this harness).
func readPhrasings(t *testing.T, path string) []phrasing {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []phrasing
	var cur *phrasing
	var body []string
	flush := func() {
		if cur != nil {
			cur.prompt = strings.TrimSpace(strings.Join(body, "\n"))
			out = append(out, *cur)
		}
		body = nil
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "=== "):
			flush()
			cur = &phrasing{}
		case cur == nil:
		case len(body) == 0 && strings.HasPrefix(line, "required: "):
			for k := range strings.SplitSeq(strings.TrimPrefix(line, "required: "), ",") {
				cur.keys = append(cur.keys, strings.TrimSpace(k))
			}
		case len(body) == 0 && strings.HasPrefix(line, "types: "):
		default:
			body = append(body, line)
		}
	}
	flush()
	return out
}

// builder assembles a request in any of the three formats from the same
// parts.
type builder struct {
	openai bool
	// responses (with openai) builds a Responses API request.
	responses bool
	model     string
	stream    bool
	system    string
	cacheSys  bool
	turns     []map[string]any // Anthropic-shaped messages; converted for OpenAI
	extra     map[string]any
	maxTok    int
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func user(blocks ...map[string]any) map[string]any {
	bs := make([]any, len(blocks))
	for i, b := range blocks {
		bs[i] = b
	}
	return map[string]any{"role": "user", "content": bs}
}

func (b *builder) build() map[string]any {
	body := map[string]any{"model": b.model}
	maxTok := b.maxTok
	if maxTok == 0 {
		maxTok = 512
	}
	if b.stream {
		body["stream"] = true
	}
	if b.responses {
		body["max_output_tokens"] = maxTok
		if b.system != "" {
			body["instructions"] = b.system
		}
		var items []any
		for _, m := range b.turns {
			items = append(items, responsesItems(m)...)
		}
		body["input"] = items
	} else if !b.openai {
		body["max_tokens"] = maxTok
		if b.system != "" {
			if b.cacheSys {
				body["system"] = []any{map[string]any{"type": "text", "text": b.system, "cache_control": map[string]any{"type": "ephemeral"}}}
			} else {
				body["system"] = b.system
			}
		}
		msgs := make([]any, len(b.turns))
		for i, m := range b.turns {
			msgs[i] = m
		}
		body["messages"] = msgs
	} else {
		body["max_completion_tokens"] = maxTok
		if b.stream {
			body["stream_options"] = map[string]any{"include_usage": true}
		}
		var msgs []any
		if b.system != "" {
			msgs = append(msgs, map[string]any{"role": "system", "content": b.system})
		}
		for _, m := range b.turns {
			msgs = append(msgs, openaiMessages(m)...)
		}
		body["messages"] = msgs
	}
	for k, v := range b.extra {
		body[k] = v
	}
	return body
}

// openaiMessages converts one Anthropic-shaped message to OpenAI messages:
// text and images as content parts, tool calls as tool_calls, tool results
// as tool messages.
func openaiMessages(m map[string]any) []any {
	role := m["role"].(string)
	blocks, _ := m["content"].([]any)
	var parts []any
	var calls []any
	var out []any
	for _, bb := range blocks {
		b := bb.(map[string]any)
		switch b["type"] {
		case "text":
			parts = append(parts, map[string]any{"type": "text", "text": b["text"]})
		case "image":
			src := b["source"].(map[string]any)
			parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:" + src["media_type"].(string) + ";base64," + src["data"].(string)}})
		case "tool_use":
			in, _ := json.Marshal(b["input"])
			calls = append(calls, map[string]any{"id": b["id"], "type": "function", "function": map[string]any{"name": b["name"], "arguments": string(in)}})
		case "tool_result":
			out = append(out, map[string]any{"role": "tool", "tool_call_id": b["tool_use_id"], "content": b["content"]})
		}
	}
	if role == "assistant" {
		msg := map[string]any{"role": "assistant"}
		if len(parts) > 0 {
			msg["content"] = parts[0].(map[string]any)["text"]
		} else {
			msg["content"] = nil
		}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		return []any{msg}
	}
	if len(parts) == 1 && parts[0].(map[string]any)["type"] == "text" {
		out = append(out, map[string]any{"role": role, "content": parts[0].(map[string]any)["text"]})
	} else if len(parts) > 0 {
		out = append(out, map[string]any{"role": role, "content": parts})
	}
	return out
}

// responsesItems converts one Anthropic-shaped message to Responses API
// input items: a message (text and images as input parts), function calls
// and function call outputs.
func responsesItems(m map[string]any) []any {
	role := m["role"].(string)
	blocks, _ := m["content"].([]any)
	var parts []any
	var out []any
	var texts []string
	for _, bb := range blocks {
		b := bb.(map[string]any)
		switch b["type"] {
		case "text":
			texts = append(texts, b["text"].(string))
			parts = append(parts, map[string]any{"type": "input_text", "text": b["text"]})
		case "image":
			src := b["source"].(map[string]any)
			parts = append(parts, map[string]any{"type": "input_image", "image_url": "data:" + src["media_type"].(string) + ";base64," + src["data"].(string)})
		case "tool_use":
			in, _ := json.Marshal(b["input"])
			out = append(out, map[string]any{"type": "function_call", "call_id": b["id"], "name": b["name"], "arguments": string(in)})
		case "tool_result":
			out = append(out, map[string]any{"type": "function_call_output", "call_id": b["tool_use_id"], "output": b["content"]})
		}
	}
	switch {
	case role == "assistant" && len(texts) > 0:
		out = append([]any{map[string]any{"role": "assistant", "content": strings.Join(texts, "")}}, out...)
	case role != "assistant" && len(parts) == len(texts) && len(texts) == 1:
		out = append(out, map[string]any{"role": role, "content": texts[0]})
	case role != "assistant" && len(parts) > 0:
		out = append(out, map[string]any{"role": role, "content": parts})
	}
	return out
}

func responsesTools(tools ...map[string]any) []any {
	out := make([]any, len(tools))
	for i, t := range tools {
		out[i] = map[string]any{"type": "function", "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
	}
	return out
}

func openaiTools(tools ...map[string]any) []any {
	out := make([]any, len(tools))
	for i, t := range tools {
		out[i] = map[string]any{"type": "function", "function": map[string]any{"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
	}
	return out
}

func anthropicTools(tools ...map[string]any) []any {
	out := make([]any, len(tools))
	for i, t := range tools {
		out[i] = t
	}
	return out
}

// longText is a long input of about n paragraphs: a meeting transcript or
// a report, in English or Chinese.
func longText(r *rand.Rand, n int, zh bool) string {
	en := []string{
		"The quarterly review covered revenue, hiring and the roadmap for the next two releases.",
		"Maria noted that the support backlog fell by a third after the new triage rules went live.",
		"The infrastructure team reported two incidents, both resolved within the agreed response time.",
		"Marketing asked for earlier access to release notes so that announcements can be localised.",
		"Finance flagged that cloud spend grew faster than usage, mostly from idle staging clusters.",
		"The design group presented three options for the onboarding flow and recommended the second.",
	}
	cn := []string{
		"本季度回顾涵盖了营收、招聘以及接下来两个版本的路线图。",
		"客服团队表示，新的分诊规则上线后，积压工单减少了三分之一。",
		"基础设施团队报告了两起事故，均在约定时间内解决。",
		"市场部希望更早拿到发布说明，以便做本地化宣传。",
		"财务指出云成本增长快于使用量，主要来自闲置的测试集群。",
	}
	src := en
	if zh {
		src = cn
	}
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "## Section %d\n\n", i+1)
		for range 4 {
			sb.WriteString(src[r.IntN(len(src))])
			sb.WriteString(" ")
		}
		sb.WriteString("\n\n")
	}
	return sb.String()
}

// buildCorpus generates the corpus deterministically.
func buildCorpus(t *testing.T) []dcase {
	r := rand.New(rand.NewPCG(25, 2026))
	var cs []dcase
	n := 0
	pick := func(list []string) string { return list[r.IntN(len(list))] }
	add := func(kind string, b *builder, c dcase) {
		n++
		c.format = llm.FormatAnthropic
		switch {
		case b.responses:
			c.format = llm.FormatResponses
		case b.openai:
			c.format = llm.FormatOpenAI
		}
		c.name = fmt.Sprintf("%03d/%s/%s/%s/stream=%v", n, kind, c.format, b.model, b.stream)
		c.model, c.stream = b.model, b.stream
		c.body = b.build()
		cs = append(cs, c)
	}
	fmtStream := func(i int) (bool, bool) { return i%2 == 1, (i/2)%2 == 1 }
	// fmt3 rotates the three APIs: openai is true for both OpenAI ones,
	// rs for the Responses API.
	fmt3 := func(i int) (oa, rs, st bool) { return i%3 != 0, i%3 == 2, (i/3)%2 == 1 }

	// Plain chat, with and without a neutral system prompt; some sampled.
	for i := range 72 {
		oa, rs, st := fmt3(i)
		b := &builder{openai: oa, responses: rs, stream: st, model: allModels[i%len(allModels)], turns: []map[string]any{user(text(userTexts[i%len(userTexts)]))}}
		if i%3 != 0 {
			b.system = pick(neutralSystems)
		}
		switch i % 5 {
		case 1:
			b.extra = map[string]any{"temperature": 0}
		case 2:
			b.extra = map[string]any{"temperature": 0.7}
		case 3:
			b.extra = map[string]any{"top_p": 0.9}
		}
		if i%7 == 0 && !rs {
			b.extra = map[string]any{"stop_sequences": []any{"\n\n"}}
			if oa {
				b.extra = map[string]any{"stop": []any{"\n\n"}}
			}
		}
		add("plain", b, dcase{})
	}
	// System prompts that mention JSON, fields, formats or lists without
	// asking for a JSON answer.
	for i, p := range readPhrasings(t, "../structured/testdata/implied_negative_fresh.txt") {
		oa, rs, st := fmt3(i)
		b := &builder{openai: oa, responses: rs, stream: st, model: bothFormats[i%3], system: p.prompt, turns: []map[string]any{user(text(userTexts[i%len(userTexts)]))}}
		add("mentions-json", b, dcase{})
	}
	for i, p := range readPhrasings(t, "../structured/testdata/implied_negative.txt") {
		if i%3 != 0 {
			continue
		}
		oa, st := fmtStream(i / 3)
		b := &builder{openai: oa, stream: st, model: bothFormats[i%3], system: p.prompt, turns: []map[string]any{user(text(userTexts[i%len(userTexts)]))}}
		add("mentions-json", b, dcase{})
	}
	// System prompts that ask for JSON with keys (the truth: the keys).
	for i, p := range readPhrasings(t, "../structured/testdata/implied_positive_fresh.txt") {
		oa, rs, st := fmt3(i)
		msg := userTexts[i%len(userTexts)]
		if i%4 == 0 {
			msg = extractionTexts[i%len(extractionTexts)]
		}
		b := &builder{openai: oa, responses: rs, stream: st, model: bothFormats[i%3], system: p.prompt, turns: []map[string]any{user(text(msg))}}
		add("asks-json", b, dcase{wantKeys: p.keys})
	}
	// Tools: offered, forced, and a tool result round trip.
	for i := range 54 {
		oa, rs, st := fmt3(i)
		model := allModels[i%len(allModels)]
		tools := []map[string]any{weatherTool, searchTool}
		b := &builder{openai: oa, responses: rs, stream: st, model: model, system: pick(neutralSystems)}
		q := []string{"What's the weather in Lisbon right now? Use get_weather.", "search_docs for how to rotate an API key, then tell me.", "Is it raining in 杭州? 请用 get_weather 查询。", "Tell me a joke."}[i%4]
		b.turns = []map[string]any{user(text(q))}
		if rs {
			b.extra = map[string]any{"tools": responsesTools(tools...)}
		} else if oa {
			b.extra = map[string]any{"tools": openaiTools(tools...)}
		} else {
			b.extra = map[string]any{"tools": anthropicTools(tools...)}
		}
		switch i % 6 {
		case 1:
			if rs {
				b.extra["tool_choice"] = map[string]any{"type": "function", "name": "get_weather"}
			} else if oa {
				b.extra["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}
			} else {
				b.extra["tool_choice"] = map[string]any{"type": "tool", "name": "get_weather"}
			}
		case 2:
			if oa {
				b.extra["tool_choice"] = "required"
			} else {
				b.extra["tool_choice"] = map[string]any{"type": "any"}
			}
		case 3, 4:
			id := fmt.Sprintf("toolu_01A%dBcD", i)
			b.turns = append(b.turns,
				map[string]any{"role": "assistant", "content": []any{text("Let me check."), map[string]any{"type": "tool_use", "id": id, "name": "get_weather", "input": map[string]any{"city": "Lisbon"}}}},
				user(map[string]any{"type": "tool_result", "tool_use_id": id, "content": "18°C, light wind, clear sky"}))
		}
		add("tools", b, dcase{})
	}
	// JSON modes of the client libraries.
	for i := range 120 {
		_, st := fmtStream(i)
		model := allModels[i%len(allModels)]
		msg := extractionTexts[i%len(extractionTexts)]
		switch i % 6 {
		case 0: // LangChain withStructuredOutput(method: "jsonMode"): json_object, the prompt mentions JSON
			b := &builder{openai: true, stream: st, model: model, system: "Answer the user's question. Respond in JSON.", turns: []map[string]any{user(text(msg))},
				extra: map[string]any{"response_format": map[string]any{"type": "json_object"}}}
			add("langchain-jsonmode", b, dcase{wantJSON: true})
		case 1: // instructor Mode.JSON_SCHEMA: json_object with the schema beside it
			var sc any
			json.Unmarshal([]byte(bookSchema), &sc)
			b := &builder{openai: true, stream: st, model: model, system: "Extract the book as JSON.", turns: []map[string]any{user(text(extractionTexts[3]))},
				extra: map[string]any{"response_format": map[string]any{"type": "json_object", "schema": sc}}}
			add("instructor-json-schema", b, dcase{wantJSON: true, schema: bookSchema})
		case 2: // pydantic-ai PromptedOutput: the schema in the instructions, no response_format
			b := &builder{openai: i%4 == 2, stream: st, model: bothFormats[i%3], turns: []map[string]any{user(text(msg))},
				system: "Always respond with a JSON object that's compatible with this schema:\n\n" + riskSchema + "\n\nDon't include any text or Markdown fencing before or after."}
			add("pydantic-prompted", b, dcase{wantKeys: []string{"risk_level", "mitigation_steps", "confidence_score"}, schema: riskSchema})
		case 3: // OpenAI structured outputs, strict
			var sc any
			json.Unmarshal([]byte(riskSchema), &sc)
			b := &builder{openai: true, stream: st, model: model, turns: []map[string]any{user(text(extractionTexts[2]))},
				extra: map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "risk", "strict": true, "schema": sc}}}}
			add("openai-json-schema-strict", b, dcase{wantJSON: true, schema: riskSchema})
		case 4: // Anthropic structured outputs
			var sc any
			json.Unmarshal([]byte(bookSchema), &sc)
			b := &builder{stream: st, model: []string{"sim-sonnet", "sim-opus", "sim-claude"}[i%3], turns: []map[string]any{user(text(extractionTexts[3]))},
				extra: map[string]any{"output_config": map[string]any{"format": map[string]any{"type": "json_schema", "schema": sc}}}}
			add("anthropic-output-config", b, dcase{wantJSON: true, schema: bookSchema})
		case 5: // Anthropic forced tool (instructor's ANTHROPIC_TOOLS)
			var sc map[string]any
			json.Unmarshal([]byte(riskSchema), &sc)
			b := &builder{stream: st, model: []string{"sim-sonnet", "sim-haiku", "sim-claude"}[i%3], turns: []map[string]any{user(text(extractionTexts[2]))},
				extra: map[string]any{"tools": []any{map[string]any{"name": "Risk", "description": "Correctly extracted `Risk` with all the required parameters", "input_schema": sc}}, "tool_choice": map[string]any{"type": "tool", "name": "Risk"}}}
			add("anthropic-forced-tool", b, dcase{})
		}
	}
	// The Responses API's JSON modes: text.format json_object (LangChain's
	// jsonMode over useResponsesApi) and json_schema strict.
	for i := range 24 {
		_, st := fmtStream(i)
		model := allModels[i%len(allModels)]
		b := &builder{openai: true, responses: true, stream: st, model: model, turns: []map[string]any{user(text(extractionTexts[i%len(extractionTexts)]))}}
		if i%2 == 0 {
			b.system = "Answer the user's question. Respond in JSON."
			b.extra = map[string]any{"text": map[string]any{"format": map[string]any{"type": "json_object"}}}
			add("responses-json-object", b, dcase{wantJSON: true})
			continue
		}
		var sc any
		json.Unmarshal([]byte(riskSchema), &sc)
		b.turns = []map[string]any{user(text(extractionTexts[2]))}
		b.extra = map[string]any{"text": map[string]any{"format": map[string]any{"type": "json_schema", "name": "risk", "strict": true, "schema": sc}}}
		add("responses-json-schema", b, dcase{wantJSON: true, schema: riskSchema})
	}
	// Documents and images.
	for i := range 30 {
		oa, st := fmtStream(i)
		model := allModels[i%len(allModels)]
		img := map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": pngData}}
		b := &builder{openai: oa, responses: oa && i%4 == 1, stream: st, model: model, system: pick(neutralSystems)}
		if oa || i%3 == 0 {
			b.turns = []map[string]any{user(img, text([]string{"What is in this picture?", "这张图片里有什么？"}[i%2]))}
			add("image", b, dcase{})
			continue
		}
		doc := map[string]any{"type": "document", "source": map[string]any{"type": "base64", "media_type": "application/pdf", "data": pdfData}}
		b.turns = []map[string]any{user(doc, text("Summarise this contract in three bullet points."))}
		add("document", b, dcase{})
	}
	// Thinking and cache_control (Anthropic).
	for i := range 30 {
		_, st := fmtStream(i)
		b := &builder{stream: st, model: []string{"sim-sonnet", "sim-opus", "sim-claude"}[i%3], system: pick(neutralSystems) + " " + longText(r, 2, i%2 == 1), cacheSys: i%2 == 0,
			turns: []map[string]any{user(text(userTexts[i%len(userTexts)]))}, maxTok: 2048}
		if i%3 != 2 {
			b.extra = map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}}
		}
		if i%4 == 1 {
			b.turns = []map[string]any{user(map[string]any{"type": "text", "text": userTexts[i%len(userTexts)], "cache_control": map[string]any{"type": "ephemeral"}})}
		}
		add("thinking-cache", b, dcase{})
	}
	// Long inputs.
	for i := range 24 {
		oa, rs, st := fmt3(i)
		b := &builder{openai: oa, responses: rs, stream: st, model: bothFormats[i%3], system: pick(neutralSystems),
			turns: []map[string]any{user(text("Summarise the notes below for the leadership team.\n\n" + longText(r, 20+i*8, i%3 == 2)))}}
		add("long", b, dcase{})
	}
	// Long inputs that ask for JSON (in the system prompt, or JSON mode).
	for i := range 12 {
		oa, st := fmtStream(i)
		b := &builder{openai: oa, stream: st, model: bothFormats[i%3],
			turns: []map[string]any{user(text("Extract the decisions from the notes below.\n\n" + longText(r, 40+i*6, i%2 == 1)))}}
		c := dcase{}
		switch {
		case oa && i%4 == 1:
			b.system = "You extract decisions. Respond in JSON."
			b.extra = map[string]any{"response_format": map[string]any{"type": "json_object"}}
			c.wantJSON = true
		case i%3 == 0:
			b.system = "仅输出 JSON，包含两个字段：decisions 和 owners。"
			c.wantKeys = []string{"decisions", "owners"}
		default:
			b.system = "Respond in JSON. Include decisions and owners."
			c.wantKeys = []string{"decisions", "owners"}
		}
		add("long-json", b, c)
	}
	// Personal data in the conversation.
	for i := range 18 {
		oa, rs, st := fmt3(i)
		b := &builder{openai: oa, responses: rs, stream: st, model: bothFormats[i%3], system: neutralSystems[1], turns: []map[string]any{user(text(piiTexts[i%len(piiTexts)]))}}
		add("pii", b, dcase{})
	}
	// Limits: a small max_tokens cuts the answer (also a JSON one).
	for i := range 24 {
		oa, st := fmtStream(i)
		b := &builder{openai: oa, stream: st, model: bothFormats[i%3], turns: []map[string]any{user(text(userTexts[i%len(userTexts)]))}, maxTok: 3 + i%5}
		c := dcase{}
		if i%2 == 0 {
			b.system = "Respond in JSON. Required: title, summary, tags."
			c.wantKeys = []string{"title", "summary", "tags"}
		}
		if oa && i%4 == 1 {
			var sc any
			json.Unmarshal([]byte(riskSchema), &sc)
			b.extra = map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "risk", "strict": true, "schema": sc}}}
			c.wantJSON, c.schema = true, riskSchema
		}
		add("max-tokens", b, c)
	}
	// Multi-turn conversations, some ending in an Anthropic prefill.
	for i := range 16 {
		oa, st := fmtStream(i)
		b := &builder{openai: oa, stream: st, model: bothFormats[i%3], system: pick(neutralSystems), turns: []map[string]any{
			user(text(userTexts[i%len(userTexts)])),
			{"role": "assistant", "content": []any{text("Sure. Could you tell me a bit more about what you need?")}},
			user(text("Keep it to two sentences, please.")),
		}}
		if !oa && i%4 == 0 {
			b.turns = append(b.turns, map[string]any{"role": "assistant", "content": []any{text("Here")}})
		}
		add("multi-turn", b, dcase{})
	}
	return cs
}
