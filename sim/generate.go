package sim

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
)

// Answer returns the answer a fleet built from cfg gives to req, exactly as
// its Anthropic-format endpoints send it when no fault interferes (the wire
// adds only the response id's prefix conventions and timestamps). It is
// pure: the result depends only on cfg.Seed, req.Model and the conversation
// (system text, messages, tools, tool choice, stop sequences, max tokens,
// response format). Over the OpenAI format the answer is the same unless
// the last message is an assistant message, which only some OpenAI-format
// servers continue (see Continuation and AnswerFormat). Safe for concurrent
// use.
//
// The rules, which tests may rely on:
//   - The prompt key is the system text plus each non-system turn (consecutive
//     turns of one role merged) as its role and the text of its blocks; tool
//     results count as their text, tool calls as name and compact input.
//   - A text answer is 12–48 words from a built-in vocabulary, chosen by a
//     PRNG seeded from a hash of (seed, model, prompt key, tool names). One
//     word is one token; every word but the first carries its leading space.
//   - max_tokens caps the tokens (stop_reason max_tokens); a stop sequence
//     ends the text where it begins (stop_reason stop_sequence).
//   - A last assistant turn of text P is a prefill where the endpoint
//     continues one (always over the Anthropic format; over the OpenAI format
//     as the model's Continuation says): the answer to the conversation
//     without it is computed, and if it starts with P only the rest is
//     returned (possibly from mid-word); otherwise the whole answer. Where
//     the endpoint does not continue it, it is an ordinary turn of the prompt
//     key, so the answer is a new, complete one that depends on P.
//   - With tools and tool_choice other than none, unless the last turn holds a
//     tool result: tool_choice tool calls that tool; otherwise every tool
//     named in the last user text is called in order of first mention; with
//     tool_choice any and none named, the first tool. The answer is a short
//     "Calling NAME." text block and tool_use blocks (ids "toolu_sim_<hash>")
//     whose inputs are generated from the input schema (a free-form one, an
//     object naming no properties and not closed, gets {"answer": "<words>"}:
//     the model's answer, as in JSON mode); stop_reason tool_use.
//   - A JSON output format, read from the request's own wire only
//     (Anthropic output_config.format or output_format, OpenAI
//     response_format; see AnswerSample and ModelSpec.StructuredOutputs):
//     json_object answers {"answer": "<words>"}; json_schema answers a value
//     generated from the schema.
//   - input_tokens counts the words of the prompt key, one per turn, and one
//     plus the description words per tool; output_tokens counts the tokens
//     emitted.
//   - Temperature: at temperature T > 0 each word of a text answer (and of a
//     json_object answer) is replaced by another vocabulary word with
//     probability WordChangeProbability(T × the model's TemperatureScale),
//     drawn from a hash of (seed, model, conversation, sample), so repeated
//     calls differ while the answer's length and sentence shape stay. At T = 0
//     or without a temperature nothing is drawn: the rules above hold exactly.
//     A prefill that is not a prefix of the sample is continued word-aligned
//     after as many words as it holds.
//   - Field extraction: a request is an extraction when it asks for a JSON
//     schema object with properties and a user turn holds a "field: value"
//     line (see GroundTruth) for at least one of them, or when the system
//     text contains "extract" and a user turn holds such lines. The answer is
//     a JSON object with one member per schema property (without a schema,
//     per field line), whose value is the line's value converted to the
//     property's type (integer, number, boolean; else the text), null for a
//     property no line names. With probability ExtractionErrorRate, drawn per
//     call and field, a value is wrong: another enum value, a number off by
//     5–50 %, a negated boolean or another word.
func Answer(cfg Config, req *llm.Request) *llm.Response {
	return AnswerSample(cfg, req, 0)
}

// answer is a generated answer in streamable form.
type answer struct {
	id      string
	model   string
	blocks  []genBlock
	stop    llm.StopReason
	stopSeq string
	usage   llm.Usage
	// jsonText marks a JSON-mode text block (block 0).
	jsonText bool
	// h is the conversation hash, for fault variants.
	h uint64
}

// genBlock is one content block split into the pieces a stream sends.
type genBlock struct {
	tool bool
	// custom marks a call of a Responses custom (freeform) tool: its input
	// is {"input": text}, written as a custom_tool_call item.
	custom bool
	// tokens are the text deltas, or the input JSON pieces of a tool call.
	tokens []string
	id     string
	name   string
}

func (b *genBlock) joined() string { return strings.Join(b.tokens, "") }

// hasJSON reports whether the answer carries JSON a fault could corrupt.
func (a *answer) hasJSON() bool {
	if a.jsonText {
		return true
	}
	for i := range a.blocks {
		if a.blocks[i].tool {
			return true
		}
	}
	return false
}

// tokenCount is the number of stream deltas (= output tokens).
func (a *answer) tokenCount() int {
	n := 0
	for i := range a.blocks {
		n += len(a.blocks[i].tokens)
	}
	return n
}

// response renders the answer as a canonical response.
func (a *answer) response() *llm.Response {
	r := &llm.Response{
		ID:           a.id,
		Model:        a.model,
		StopReason:   a.stop,
		StopSequence: a.stopSeq,
		Usage:        a.usage,
		Content:      make([]llm.Block, 0, len(a.blocks)),
	}
	for i := range a.blocks {
		b := &a.blocks[i]
		if b.tool {
			r.Content = append(r.Content, llm.Block{Type: llm.BlockToolUse, ID: b.id, Name: b.name, Input: json.RawMessage(b.joined()), Raw: b.customRaw()})
		} else {
			r.Content = append(r.Content, llm.Block{Type: llm.BlockText, Text: b.joined()})
		}
	}
	return r
}

// generate computes the answer to req. With cont, a trailing assistant
// text message is a prefill the answer continues; without, it is history.
// rf is the JSON output format the endpoint honours (see outputFormat), nil
// for none. Its passes over the messages look at ctx every checkEvery
// messages, so a call whose client has gone (or a fleet shutting down)
// stops early with ctx's error.
func generate(ctx context.Context, seed int64, req *llm.Request, s sampling, cont bool, rf *llm.ResponseFormat) (*answer, error) {
	conv, prefill, hasPrefill := splitPrefill(req, cont)
	var turnBuf [4]turn
	turns, err := mergeTurns(ctx, turnBuf[:0], conv)
	if err != nil {
		return nil, err
	}
	sys := req.SystemText()

	// The prompt key (see Answer) is hashed piece by piece rather than built.
	kh := newHasher(hashString(uint64(seed)^0x6b65656c73696d, req.Model))
	kh.add(sys)
	for i, t := range turns {
		if i%checkEvery == checkEvery-1 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		kh.add("\x00")
		kh.add(string(t.role))
		kh.add("\x01")
		kh.add(t.text)
	}
	for _, t := range req.Tools {
		kh.add("\x02")
		kh.add(t.Name)
	}
	h := kh.sum()

	a := &answer{id: hexID("msg_sim_", h), model: req.Model, h: h, stop: llm.StopEndTurn}
	a.usage.InputTokens = promptTokens(sys, turns, req, prefill, hasPrefill)
	if s.errPerKTok > 0 {
		s.errRate = min(1, s.errRate+s.errPerKTok*float64(a.usage.InputTokens)/1000)
	}

	var lastUser string
	lastIsToolResult := false
	if n := len(turns); n > 0 {
		lastUser = turns[n-1].text
		lastIsToolResult = turns[n-1].toolResult
		if turns[n-1].role != llm.RoleUser {
			lastUser = ""
		}
	}

	var text []string
	calls := toolsToCall(req, lastUser, lastIsToolResult)
	sampled := false
	ex, extraction := "", false
	if len(calls) == 0 {
		ex, extraction = extractionAnswer(req, sys, turns, rf, h, s)
	}
	switch {
	case extraction:
		a.jsonText = true
		text = splitPieces(ex)
	case len(calls) > 0:
		names := make([]string, len(calls))
		for i, t := range calls {
			names[i] = t.Name
		}
		text = splitWords("Calling " + joinNames(names) + ".")
	case rf != nil:
		a.jsonText = true
		text = splitPieces(jsonAnswer(rf, h, s))
	default:
		// Without a prefill, tokens past max_tokens are never sent: only
		// those are generated, plus one that tells limit the answer was cut
		// (words draws its words in order, so the first ones do not depend
		// on how many follow).
		limit := -1
		if req.HasMaxTokens && req.MaxTokens >= 0 && !(hasPrefill && prefill != "") {
			limit = req.MaxTokens + 1
		}
		text = words(h, s, limit)
		sampled = s.p > 0
	}
	if hasPrefill && prefill != "" {
		if full := strings.Join(text, ""); strings.HasPrefix(full, prefill) {
			text = cutTokens(text, len(prefill))
		} else if sampled {
			text = continueSampled(text, prefill)
		}
	}
	if a.jsonText && s.drift != nil {
		// Drawn from the conversation alone, not the call's sample: the
		// same request drifts the same way however many calls came before.
		r := newRNG(hashString(h, "drift"))
		if d := s.drift.apply(strings.Join(text, ""), &r); d != strings.Join(text, "") {
			text = splitPieces(d)
		}
	}
	a.blocks = append(a.blocks, genBlock{tokens: text})
	for i, t := range calls {
		th := hashString(h^uint64(i+1)*0x9e3779b97f4a7c15, t.Name)
		r := newRNG(th)
		sc := parseSchema(t.InputSchema)
		in, _ := json.Marshal(genValue(sc, &r, 0))
		if freeForm(sc) {
			// A model fills a free-form input with its answer, as it
			// answers JSON mode (LiteLLM and Keel emulate JSON mode on
			// Anthropic with such a forced tool).
			in, _ = json.Marshal(map[string]string{"answer": strings.Join(words(th, s, -1), "")})
		}
		a.blocks = append(a.blocks, genBlock{tool: true, id: hexID("toolu_sim_", th), name: t.Name, tokens: splitPieces(string(in))})
	}
	if len(calls) > 0 {
		a.stop = llm.StopToolUse
	}
	a.limit(req)
	return a, nil
}

// freeForm reports whether a tool input schema is an object that names no
// properties and does not forbid them ({"type": "object"}).
func freeForm(s map[string]any) bool {
	if s == nil || schemaType(s) != "object" || s["additionalProperties"] == false {
		return false
	}
	props, _ := s["properties"].(map[string]any)
	return len(props) == 0
}

// echoPrefill puts the prefill req's answer continued (its trailing
// assistant text message) back in front of the answer's text, as
// llama.cpp's llama-server sends it (PROTOCOLS.md §6.2): one piece with
// the first new token, so a stream's first delta holds both and the token
// count is unchanged.
func (a *answer) echoPrefill(req *llm.Request) {
	n := len(req.Messages)
	if n == 0 || req.Messages[n-1].Role != llm.RoleAssistant || !onlyText(req.Messages[n-1].Content) || len(a.blocks) == 0 || a.blocks[0].tool {
		return
	}
	p := req.Messages[n-1].Text()
	if p == "" {
		return
	}
	b := &a.blocks[0]
	if len(b.tokens) == 0 {
		b.tokens = []string{p}
		return
	}
	b.tokens = slices.Clone(b.tokens)
	b.tokens[0] = p + b.tokens[0]
}

// checkEvery is how many messages (or turns) a pass over a request handles
// between looks at its context.
const checkEvery = 1024

// limit applies max_tokens and stop sequences to the answer's blocks and
// sets the output token count.
func (a *answer) limit(req *llm.Request) {
	budget := -1
	if req.HasMaxTokens {
		budget = req.MaxTokens
	}
	emitted := 0
	maxStop := 0
	for _, s := range req.StopSequences {
		maxStop = max(maxStop, len(s))
	}
	out := a.blocks[:0] // filtered in place: out never overtakes bi
	for bi := range a.blocks {
		b := a.blocks[bi]
		if b.tool {
			if budget >= 0 && emitted+len(b.tokens) > budget {
				// A tool call that does not fit is dropped whole: a canonical
				// tool_use block always carries a complete JSON input.
				emitted = budget
				a.stop, a.stopSeq = llm.StopMaxTokens, ""
				break
			}
			emitted += len(b.tokens)
			out = append(out, b)
			continue
		}
		var sb strings.Builder
		cut := false
		for i, tok := range b.tokens {
			if budget >= 0 && emitted == budget {
				b.tokens = b.tokens[:i]
				a.stop, a.stopSeq = llm.StopMaxTokens, ""
				cut = true
				break
			}
			emitted++
			if maxStop == 0 {
				continue
			}
			from := max(0, sb.Len()-maxStop+1)
			sb.WriteString(tok)
			if p, s := findStop(sb.String(), from, req.StopSequences); s != "" {
				// Keep the text before the stop sequence (which may span
				// several tokens); the token that completed it still counts.
				b.tokens = trimTo(b.tokens[:i+1], p)
				a.stop, a.stopSeq = llm.StopSequence, s
				cut = true
				break
			}
		}
		if len(b.tokens) > 0 {
			out = append(out, b)
		}
		if cut {
			break
		}
	}
	a.blocks = out
	a.usage.OutputTokens = emitted
}

// findStop returns the position and value of the stop sequence that
// completes first in s, searching occurrences that end after from.
func findStop(s string, from int, stops []string) (int, string) {
	bestEnd, bestPos, best := -1, -1, ""
	for _, st := range stops {
		if st == "" {
			continue
		}
		i := strings.Index(s[from:], st)
		if i < 0 {
			continue
		}
		p := from + i
		if end := p + len(st); bestEnd < 0 || end < bestEnd || end == bestEnd && p < bestPos {
			bestEnd, bestPos, best = end, p, st
		}
	}
	return bestPos, best
}

// trimTo trims tokens so that their concatenation has length n.
func trimTo(tokens []string, n int) []string {
	total := 0
	for i, t := range tokens {
		if total+len(t) >= n {
			rest := n - total
			if rest == 0 {
				return tokens[:i]
			}
			tokens[i] = t[:rest]
			return tokens[:i+1]
		}
		total += len(t)
	}
	return tokens
}

// cutTokens drops the first n bytes of the tokens' concatenation, keeping the
// rest of the token n falls in as a token of its own.
func cutTokens(tokens []string, n int) []string {
	off := 0
	for i, t := range tokens {
		if off+len(t) > n {
			rest := slices.Clone(tokens[i:])
			rest[0] = t[n-off:]
			return rest
		}
		off += len(t)
	}
	return nil
}

func onlyText(bs []llm.Block) bool {
	for _, b := range bs {
		if b.Type != llm.BlockText {
			return false
		}
	}
	return true
}

// turn is one merged conversation turn.
type turn struct {
	role       llm.Role
	text       string
	toolResult bool
}

// mergeTurns flattens non-system messages into turns, merging consecutive
// messages of one role (as the Anthropic API does, and as OpenAI tool
// messages following each other become one turn). It is linear in the
// messages' text: a merged turn is built once, in a strings.Builder.
func mergeTurns(ctx context.Context, out []turn, ms []llm.Message) ([]turn, error) {
	var (
		cur    turn
		have   bool
		merged bool // cur.text is in sb
		sb     strings.Builder
	)
	flush := func() {
		if merged {
			cur.text = sb.String()
			sb.Reset() // the next merged turn gets a new buffer
		}
		out = append(out, cur)
	}
	for i := range ms {
		if i%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return out, err
			}
		}
		m := &ms[i]
		if m.Role == llm.RoleSystem || m.Role == llm.RoleDeveloper {
			continue
		}
		text, tr := blocksKeyText(m.Content)
		if have && cur.role == m.Role {
			if !merged {
				sb.WriteString(cur.text)
				merged = true
			}
			if text != "" {
				if sb.Len() > 0 {
					sb.WriteByte('\n')
				}
				sb.WriteString(text)
			}
			// The turn ends in a tool result when its last message holds one.
			cur.toolResult = tr
			continue
		}
		if have {
			flush()
		}
		cur, have, merged = turn{role: m.Role, text: text, toolResult: tr}, true, false
	}
	if have {
		flush()
	}
	return out, nil
}

// blocksKeyText is the text of blocks for the prompt key, and whether they
// hold a tool result.
func blocksKeyText(bs []llm.Block) (string, bool) {
	if len(bs) == 1 && bs[0].Type == llm.BlockText {
		return bs[0].Text, false
	}
	var parts []string
	tr := false
	for _, b := range bs {
		switch b.Type {
		case llm.BlockText:
			if b.Text != "" {
				parts = append(parts, b.Text)
			}
		case llm.BlockToolResult:
			tr = true
			if t, _ := blocksKeyText(b.Content); t != "" {
				parts = append(parts, t)
			}
		case llm.BlockToolUse:
			parts = append(parts, b.Name+compactJSON(b.Input))
		}
	}
	return strings.Join(parts, "\n"), tr
}

func compactJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// splitPrefill separates a trailing assistant text message that the
// answer continues (cont) from the conversation before it.
func splitPrefill(req *llm.Request, cont bool) (conv []llm.Message, prefill string, ok bool) {
	conv = req.Messages
	if n := len(conv); cont && n > 0 && conv[n-1].Role == llm.RoleAssistant && onlyText(conv[n-1].Content) {
		return conv[:n-1], conv[n-1].Text(), true
	}
	return conv, "", false
}

// promptTokens is an answer's usage input_tokens: the prompt's turns and
// tools, and the prefill it continues.
func promptTokens(sys string, turns []turn, req *llm.Request, prefill string, hasPrefill bool) int {
	n := inputTokens(sys, turns, req)
	if hasPrefill {
		n += 1 + countWords(prefill)
	}
	return n
}

// CountTokens is what the fleet's count_tokens answers for req (an
// Anthropic-format request, whose trailing assistant message is
// continued): exactly the input_tokens of the usage of req's answer, as
// Anthropic's count_tokens matches the usage its Messages API reports for
// the same request (docs.anthropic.com/en/docs/build-with-claude/token-counting).
func CountTokens(req *llm.Request) int {
	conv, prefill, has := splitPrefill(req, true)
	turns, _ := mergeTurns(context.Background(), nil, conv)
	return promptTokens(req.SystemText(), turns, req, prefill, has)
}

func inputTokens(sys string, turns []turn, req *llm.Request) int {
	n := countWords(sys)
	for _, t := range turns {
		n += 1 + countWords(t.text)
	}
	for _, t := range req.Tools {
		n += 1 + countWords(t.Description)
	}
	return max(n, 1)
}

func countWords(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		sp := s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'
		if !sp && !in {
			n++
		}
		in = !sp
	}
	return n
}

// toolsToCall picks the tools the answer calls.
func toolsToCall(req *llm.Request, lastUser string, lastIsToolResult bool) []llm.Tool {
	if len(req.Tools) == 0 || lastIsToolResult {
		return nil
	}
	choice := llm.ToolChoiceAuto
	if req.ToolChoice != nil && req.ToolChoice.Type != "" {
		choice = req.ToolChoice.Type
	}
	var calls []llm.Tool
	switch choice {
	case llm.ToolChoiceNone:
		return nil
	case llm.ToolChoiceTool:
		for _, t := range req.Tools {
			if t.Name == req.ToolChoice.Name {
				return []llm.Tool{t}
			}
		}
		return []llm.Tool{{Name: req.ToolChoice.Name}}
	}
	type hit struct {
		pos int
		t   llm.Tool
	}
	var hits []hit
	for _, t := range req.Tools {
		if t.Name == "" {
			continue
		}
		if p := strings.Index(lastUser, t.Name); p >= 0 {
			hits = append(hits, hit{p, t})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.pos - b.pos })
	for _, h := range hits {
		calls = append(calls, h.t)
	}
	if len(calls) == 0 && choice == llm.ToolChoiceAny {
		calls = req.Tools[:1]
	}
	single := req.ParallelToolCalls != nil && !*req.ParallelToolCalls ||
		req.ToolChoice != nil && req.ToolChoice.DisableParallel != nil && *req.ToolChoice.DisableParallel
	if single && len(calls) > 1 {
		calls = calls[:1]
	}
	return calls
}

func joinNames(ns []string) string {
	if len(ns) == 1 {
		return ns[0]
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " and " + ns[len(ns)-1]
}

// splitWords splits s into tokens before each space.
func splitWords(s string) []string {
	var out []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] == ' ' {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// pieceBytes bounds one token of JSON text.
const pieceBytes = 8

// splitPieces splits JSON text into tokens: before each space, and at most
// pieceBytes bytes each, never inside a UTF-8 sequence.
func splitPieces(s string) []string {
	var out []string
	for _, w := range splitWords(s) {
		for len(w) > pieceBytes {
			n := pieceBytes
			for n < len(w) && w[n]&0xC0 == 0x80 {
				n++
			}
			out = append(out, w[:n])
			w = w[n:]
		}
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// words generates a text answer of 12–48 word tokens, each word changed
// with probability s.p by the call's own draws (none when s.p is 0). A
// limit >= 0 returns only the first limit tokens of that answer.
func words(h uint64, s sampling, limit int) []string {
	r := newRNG(h)
	var pr rng
	if s.p > 0 {
		pr = s.rng(h, "temperature")
	}
	n := 12 + int(h%37)
	m := n
	if limit >= 0 {
		m = min(n, limit)
	}
	out := make([]string, m)
	capNext := true
	sentence := 0
	for i := range out {
		k := s.changeWord(r.intn(len(vocabulary)), &pr)
		sentence++
		end := i == n-1 || sentence >= 5 && r.intn(6) == 0
		f := 0
		if capNext {
			f |= formCap
		}
		if end {
			f |= formEnd
		}
		if i > 0 {
			f |= formSpaced
		}
		out[i] = wordForms[f][k]
		capNext = end
		if end {
			sentence = 0
		}
	}
	return out
}

// The forms of a vocabulary word in a text answer, an index of wordForms.
const (
	formCap    = 1 << iota // capitalised: the first word of a sentence
	formEnd                // followed by "."
	formSpaced             // with its leading space: every word but the first
)

// wordForms holds each vocabulary word in each of its forms, so that a text
// answer's tokens need no allocation.
var wordForms = func() (out [8][len(vocabulary)]string) {
	for f := range out {
		for k, w := range vocabulary {
			if f&formCap != 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			if f&formEnd != 0 {
				w += "."
			}
			if f&formSpaced != 0 {
				w = " " + w
			}
			out[f][k] = w
		}
	}
	return out
}()

func jsonAnswer(rf *llm.ResponseFormat, h uint64, s sampling) string {
	if rf.Type == "json_schema" && len(rf.Schema) > 0 {
		if s := parseSchema(rf.Schema); s != nil {
			r := newRNG(h)
			b, _ := json.Marshal(genValue(s, &r, 0))
			return string(b)
		}
	}
	b, _ := json.Marshal(map[string]string{"answer": strings.Join(words(h, s, -1), "")})
	return string(b)
}

func parseSchema(raw json.RawMessage) map[string]any {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// maxSchemaDepth bounds recursion through nested schemas.
const maxSchemaDepth = 8

// genValue generates a value that satisfies the common JSON Schema
// keywords: type, properties, required, items, minItems, enum, const,
// anyOf/oneOf/allOf (first alternative), minimum and maximum.
func genValue(s map[string]any, r *rng, depth int) any {
	if depth > maxSchemaDepth {
		return nil
	}
	if s == nil {
		return map[string]any{}
	}
	if v, ok := s["const"]; ok {
		return v
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range [...]string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			alt, _ := alts[0].(map[string]any)
			if alt == nil {
				alt = map[string]any{}
			}
			return genValue(alt, r, depth+1)
		}
	}
	typ := schemaType(s)
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ps, _ := props[k].(map[string]any)
			if ps == nil {
				ps = map[string]any{"type": "string"}
			}
			out[k] = genValue(ps, r, depth+1)
		}
		if req, ok := s["required"].([]any); ok {
			for _, k := range req {
				if ks, ok := k.(string); ok {
					if _, have := out[ks]; !have {
						out[ks] = vocabulary[r.intn(len(vocabulary))]
					}
				}
			}
		}
		return out
	case "array":
		items, _ := s["items"].(map[string]any)
		if items == nil {
			items = map[string]any{"type": "string"}
		}
		n := 1
		if mi, ok := s["minItems"].(float64); ok && mi > 1 {
			n = min(int(mi), 3)
		}
		out := make([]any, n)
		for i := range out {
			out[i] = genValue(items, r, depth+1)
		}
		return out
	case "integer":
		lo, hi := bounds(s, 0, 100)
		return int64(lo) + int64(r.next()%uint64(int64(hi)-int64(lo)+1))
	case "number":
		lo, hi := bounds(s, 0, 100)
		v := lo + float64(r.next()%10001)/10000*(hi-lo)
		v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'f', 2, 64), 64)
		return min(max(v, lo), hi)
	case "boolean":
		return r.next()&1 == 1
	case "null":
		return nil
	}
	return vocabulary[r.intn(len(vocabulary))]
}

func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if xs, ok := x.(string); ok && xs != "null" {
				return xs
			}
		}
		return "null"
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	if _, ok := s["items"]; ok {
		return "array"
	}
	return "string"
}

// bounds reads minimum/maximum, falling back to [dlo, dhi] and keeping
// lo <= hi and a bounded span.
func bounds(s map[string]any, dlo, dhi float64) (float64, float64) {
	lo, hi := dlo, dhi
	minSet := false
	if v, ok := s["minimum"].(float64); ok {
		lo, minSet = v, true
	}
	if v, ok := s["maximum"].(float64); ok {
		hi = v
		if !minSet && hi < lo {
			lo = hi - (dhi - dlo)
		}
	} else if minSet {
		hi = lo + (dhi - dlo)
	}
	if hi < lo {
		hi = lo
	}
	if hi-lo > 1e12 {
		hi = lo + 1e12
	}
	return lo, hi
}

// corrupt applies a malformed_json fault: the JSON-mode text, or else the
// first tool input, is broken by corruptJSON. Where the wire carries a tool
// input as a JSON object (Anthropic, non-streaming) the input becomes
// {"input": "<the broken text>"}: valid JSON that violates the schema.
func (a *answer) corrupt(objectInput bool) {
	h := a.h ^ 0x6d616c666f726d
	for i := range a.blocks {
		b := &a.blocks[i]
		if !b.tool && !a.jsonText {
			continue
		}
		bad := corruptJSON(b.joined(), h)
		if b.tool && objectInput {
			enc, _ := json.Marshal(map[string]string{"input": bad})
			bad = string(enc)
		}
		b.tokens = splitPieces(bad)
		break
	}
	a.usage.OutputTokens = a.tokenCount()
}

// corruptJSON breaks JSON text in one of four ways chosen by h: truncated
// mid-value, a trailing comma, a Markdown fence, or prose around it.
func corruptJSON(s string, h uint64) string {
	switch h % 4 {
	case 0:
		if n := len(s); n > 2 {
			return s[:n*2/3]
		}
		return s + "{"
	case 1:
		if i := strings.LastIndexAny(s, "}]"); i > 0 {
			return s[:i] + "," + s[i:]
		}
		return s + ","
	case 2:
		return "```json\n" + s + "\n```"
	default:
		return "Here is the JSON you asked for:\n" + s
	}
}

// rng is splitmix64: tiny, fast and fully specified here, so answers stay
// the same across Go releases.
type rng struct{ s uint64 }

func newRNG(seed uint64) rng { return rng{s: seed} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// float returns a number in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// hashString folds s into h (FNV-1a, then a final mix).
func hashString(h uint64, s string) uint64 {
	x := newHasher(h)
	x.add(s)
	return x.sum()
}

// hasher is hashString over the concatenation of the strings added.
type hasher struct{ h uint64 }

func newHasher(h uint64) hasher { return hasher{h ^ 0xcbf29ce484222325} }

func (x *hasher) add(s string) {
	h := x.h
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	x.h = h
}

func (x *hasher) sum() uint64 {
	h := x.h
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// hexID returns prefix followed by h as 16 hex digits.
func hexID(prefix string, h uint64) string {
	const digits = "0123456789abcdef"
	var buf [48]byte
	b := append(buf[:0], prefix...)
	for i := 60; i >= 0; i -= 4 {
		b = append(b, digits[h>>uint(i)&15])
	}
	return string(b)
}

// vocabulary is the fixed word list answers are drawn from.
var vocabulary = [...]string{
	"the", "a", "system", "router", "signal", "latency", "region", "model", "answer", "stream",
	"token", "budget", "circuit", "breaker", "fallback", "request", "response", "queue", "window", "cache",
	"value", "result", "careful", "steady", "quick", "quiet", "bright", "narrow", "broad", "simple",
	"measure", "observe", "balance", "gather", "follow", "compare", "select", "deliver", "resolve", "repeat",
	"river", "mountain", "harbor", "lantern", "orchard", "meadow", "compass", "anchor", "beacon", "bridge",
	"and", "or", "but", "then", "with", "without", "under", "over", "between", "across",
	"is", "was", "will", "can", "should", "must", "may", "does", "has", "keeps",
	"every", "each", "some", "many", "few", "most", "no", "any", "both", "either",
	"clear", "exact", "early", "late", "whole", "partial", "stable", "sudden", "gentle", "strong",
	"path", "node", "edge", "graph", "table", "record", "ledger", "report", "trace", "span",
	"north", "south", "east", "west", "morning", "evening", "winter", "summer", "autumn", "spring",
	"copper", "silver", "granite", "cedar", "willow", "amber", "cobalt", "marble", "velvet", "linen",
	"thinks", "writes", "reads", "sends", "holds", "moves", "builds", "checks", "counts", "finds",
	"plan", "step", "rule", "hint", "note", "claim", "proof", "guess", "check", "limit",
	"over", "near", "far", "inside", "outside", "before", "after", "during", "around", "beyond",
	"seven", "twelve", "forty", "hundred", "dozen", "single", "double", "triple", "half", "quarter",
}
