package translate

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// propertyCases is how many random requests and responses each round-trip
// property checks.
const propertyCases = 3000

var words = []string{"keel", "hull", "mast", "sail", "tide", "port", "knot", "a", "the", "über", "ß", "\"quoted\"", "new\nline", "tab\t", "<tag>", "emoji 🌊"}

func randText(r *rand.Rand) string {
	n := 1 + r.Intn(6)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = words[r.Intn(len(words))]
	}
	return strings.Join(parts, " ")
}

func randID(r *rand.Rand, prefix string) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := []byte(prefix)
	for range 12 {
		b = append(b, alnum[r.Intn(len(alnum))])
	}
	return string(b)
}

func randInput(r *rand.Rand) json.RawMessage {
	m := map[string]any{}
	for range r.Intn(4) {
		switch r.Intn(4) {
		case 0:
			m[randID(r, "k")] = randText(r)
		case 1:
			m[randID(r, "n")] = r.Intn(1000)
		case 2:
			m[randID(r, "b")] = r.Intn(2) == 0
		default:
			m[randID(r, "l")] = []any{randText(r), r.Intn(9)}
		}
	}
	b, _ := json.Marshal(m)
	return b
}

func textBlocks(r *rand.Rand, n int) []llm.Block {
	bs := make([]llm.Block, n)
	for i := range bs {
		bs[i] = llm.Block{Type: llm.BlockText, Text: randText(r)}
	}
	return bs
}

// randRequest draws a request using only what both formats express the
// same way: system prompt, alternating turns of text, images (base64 and
// URL), tools, tool choice, tool calls and their results, max tokens,
// temperature, top_p, up to four stop sequences, stream, user id.
func randRequest(r *rand.Rand) *llm.Request {
	req := &llm.Request{Model: randID(r, "model-"), MaxTokens: 1 + r.Intn(8000), HasMaxTokens: true}
	if r.Intn(2) == 0 {
		req.System = textBlocks(r, 1+r.Intn(2))
	}
	var tools []string
	for i := range r.Intn(4) {
		name := fmt.Sprintf("tool_%d_%s", i, randID(r, ""))
		tools = append(tools, name)
		t := llm.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
		if r.Intn(2) == 0 {
			t.Description = randText(r)
		}
		req.Tools = append(req.Tools, t)
	}
	if len(tools) > 0 {
		switch r.Intn(5) {
		case 0:
			req.ToolChoice = &llm.ToolChoice{Type: llm.ToolChoiceAuto}
		case 1:
			req.ToolChoice = &llm.ToolChoice{Type: llm.ToolChoiceAny}
		case 2:
			req.ToolChoice = &llm.ToolChoice{Type: llm.ToolChoiceNone}
		case 3:
			req.ToolChoice = &llm.ToolChoice{Type: llm.ToolChoiceTool, Name: tools[r.Intn(len(tools))]}
		}
	}
	var pending []string // tool-use ids the next user turn must answer
	turns := 1 + 2*r.Intn(4)
	for i := range turns {
		if i%2 == 0 {
			m := llm.Message{Role: llm.RoleUser}
			for _, id := range pending {
				m.Content = append(m.Content, llm.Block{Type: llm.BlockToolResult, ToolUseID: id, Content: textBlocks(r, 1), ContentIsString: true})
			}
			pending = nil
			if len(m.Content) == 0 || r.Intn(2) == 0 {
				m.Content = append(m.Content, textBlocks(r, 1+r.Intn(2))...)
				if r.Intn(4) == 0 {
					img := &llm.ImageSource{Kind: "base64", MediaType: "image/png", Data: "iVBORw0KGgo="}
					if r.Intn(2) == 0 {
						img = &llm.ImageSource{Kind: "url", URL: "https://example.com/" + randID(r, "") + ".jpg"}
					}
					m.Content = append(m.Content, llm.Block{Type: llm.BlockImage, Image: img})
				}
			}
			req.Messages = append(req.Messages, m)
			continue
		}
		m := llm.Message{Role: llm.RoleAssistant}
		if r.Intn(3) > 0 || len(tools) == 0 {
			m.Content = textBlocks(r, 1)
		}
		if len(tools) > 0 && (len(m.Content) == 0 || r.Intn(2) == 0) {
			for range 1 + r.Intn(2) {
				id := randID(r, "toolu_")
				pending = append(pending, id)
				m.Content = append(m.Content, llm.Block{Type: llm.BlockToolUse, ID: id, Name: tools[r.Intn(len(tools))], Input: randInput(r)})
			}
		}
		req.Messages = append(req.Messages, m)
	}
	if r.Intn(2) == 0 {
		f := float64(r.Intn(21)) / 20
		req.Temperature = &f
	}
	if r.Intn(3) == 0 {
		f := float64(1+r.Intn(20)) / 20
		req.TopP = &f
	}
	for range r.Intn(5) {
		req.StopSequences = append(req.StopSequences, randID(r, "STOP"))
	}
	req.Stream = r.Intn(2) == 0
	if r.Intn(2) == 0 {
		req.UserID = randID(r, "user-")
	}
	return req
}

// normalRequest is the form two requests are compared in, ignoring what the
// formats write differently without a change of meaning: the system prompt
// becomes one leading system message; string-versus-array and null markers
// go; a user turn of only tool results merges with the user turn after it
// (OpenAI tool messages are separate); the source format is forgotten;
// a stream's include_usage (the provider always asks an OpenAI upstream).
func normalRequest(in *llm.Request) *llm.Request {
	r := *in
	r.Format, r.SystemIsString, r.StopIsString, r.MaxTokensLegacy, r.IncludeUsage = 0, false, false, false, false
	var msgs []llm.Message
	if len(r.System) > 0 {
		msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: []llm.Block{{Type: llm.BlockText, Text: llm.BlocksText(r.System)}}})
		r.System = nil
	}
	for _, m := range in.Messages {
		m.ContentIsString, m.ContentIsNull = false, false
		m.Content = slices.Clone(m.Content)
		for i := range m.Content {
			if c := &m.Content[i]; c.Type == llm.BlockToolResult {
				c.ContentIsString = false
			}
		}
		if m.Role == llm.RoleSystem {
			m.Content = []llm.Block{{Type: llm.BlockText, Text: m.Text()}}
		}
		if n := len(msgs); n > 0 && m.Role == llm.RoleUser && msgs[n-1].Role == llm.RoleUser && onlyToolResults(msgs[n-1].Content) {
			msgs[n-1].Content = append(msgs[n-1].Content, m.Content...)
			continue
		}
		msgs = append(msgs, m)
	}
	r.Messages = msgs
	if len(r.StopSequences) == 0 {
		r.StopSequences = nil
	}
	return &r
}

func encodeIn(t *testing.T, f llm.Format, req *llm.Request) []byte {
	t.Helper()
	var b []byte
	var err error
	if f == llm.FormatAnthropic {
		b, err = anthropic.EncodeRequest(req)
	} else {
		b, err = openai.EncodeUpstreamRequest(req)
	}
	if err != nil {
		t.Fatalf("encoding: %v", err)
	}
	return b
}

func parseIn(t *testing.T, f llm.Format, b []byte) *llm.Request {
	t.Helper()
	var req *llm.Request
	var err error
	if f == llm.FormatAnthropic {
		req, err = anthropic.ParseRequest(b)
	} else {
		req, err = openai.ParseRequest(b)
	}
	if err != nil {
		t.Fatalf("parsing %s: %v", b, err)
	}
	return req
}

// TestRequestRoundTrip checks, for random requests restricted to the shared
// features, that canonical → A → canonical and canonical → B → canonical
// give the original, and that a request parsed from format A, prepared for
// B, sent as B and parsed by B gives the original too, with nothing dropped
// (all modulo normalRequest).
func TestRequestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	formats := []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI}
	for i := range propertyCases {
		orig := randRequest(r)
		want := dump(normalRequest(orig))
		for _, f := range formats {
			src := *orig
			src.Format = f
			back := parseIn(t, f, encodeIn(t, f, &src))
			if got := dump(normalRequest(back)); got != want {
				t.Fatalf("case %d: canonical → %s → canonical differs (-got +want):\n%s", i, f, diffLines(got, want))
			}
			prepared, rep, err := Prepare(back, otherFormat(f), Policy{Unsupported: Reject})
			if err != nil || len(rep.Dropped) > 0 {
				t.Fatalf("case %d: %s → %s: shared features rejected or dropped: %v %v", i, f, otherFormat(f), err, rep.Dropped)
			}
			crossed := parseIn(t, otherFormat(f), encodeIn(t, otherFormat(f), prepared))
			if got := dump(normalRequest(crossed)); got != want {
				t.Fatalf("case %d: %s → %s → canonical differs (-got +want):\n%s", i, f, otherFormat(f), diffLines(got, want))
			}
		}
	}
}

// randResponse draws an answer using only what both formats express the
// same way: one text block then tool calls, the stop reasons both have,
// usage with cache reads and writes and reasoning tokens.
func randResponse(r *rand.Rand) *llm.Response {
	resp := &llm.Response{ID: randID(r, "msg_"), Model: randID(r, "model-")}
	if r.Intn(4) > 0 {
		resp.Content = textBlocks(r, 1)
	}
	resp.StopReason = []llm.StopReason{llm.StopEndTurn, llm.StopMaxTokens, llm.StopRefusal}[r.Intn(3)]
	if r.Intn(3) == 0 || len(resp.Content) == 0 {
		for range 1 + r.Intn(3) {
			resp.Content = append(resp.Content, llm.Block{Type: llm.BlockToolUse, ID: randID(r, "toolu_"), Name: randID(r, "tool_"), Input: randInput(r)})
		}
		resp.StopReason = llm.StopToolUse
	}
	resp.Usage = llm.Usage{InputTokens: r.Intn(5000), OutputTokens: r.Intn(5000)}
	if r.Intn(2) == 0 {
		resp.Usage.CacheReadTokens = r.Intn(5000)
	}
	if r.Intn(3) == 0 {
		resp.Usage.CacheWriteTokens = r.Intn(5000)
	}
	if r.Intn(3) == 0 {
		resp.Usage.ReasoningTokens = r.Intn(resp.Usage.OutputTokens + 1)
	}
	return resp
}

// normalResponse drops what one format has and the other cannot carry:
// OpenAI's created stamp, empty-versus-nil content.
func normalResponse(in *llm.Response) *llm.Response {
	r := *in
	r.Created = 0
	if len(r.Content) == 0 {
		r.Content = nil
	}
	return &r
}

// TestResponseRoundTrip checks canonical → A → canonical for both formats
// and canonical → upstream format → restore → client format → canonical.
func TestResponseRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	enc := map[llm.Format]func(*llm.Response) ([]byte, error){llm.FormatAnthropic: anthropic.EncodeResponse, llm.FormatOpenAI: openai.EncodeResponse}
	dec := map[llm.Format]func([]byte) (*llm.Response, error){llm.FormatAnthropic: anthropic.ParseResponse, llm.FormatOpenAI: openai.ParseResponse}
	for i := range propertyCases {
		orig := randResponse(r)
		want := dump(normalResponse(orig))
		for _, f := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} {
			b, err := enc[f](orig)
			if err != nil {
				t.Fatal(err)
			}
			back, err := dec[f](b)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if got := dump(normalResponse(back)); got != want {
				t.Fatalf("case %d: canonical → %s → canonical differs (-got +want):\n%s", i, f, diffLines(got, want))
			}
			client := otherFormat(f)
			rep := Report{client: client, upstream: f}
			b, err = enc[client](rep.RestoreResponse(back))
			if err != nil {
				t.Fatal(err)
			}
			crossed, err := dec[client](b)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if got := dump(normalResponse(crossed)); got != want {
				t.Fatalf("case %d: %s upstream → %s client differs (-got +want):\n%s", i, f, client, diffLines(got, want))
			}
		}
	}
}
