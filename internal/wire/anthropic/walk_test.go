package anthropic

import (
	"fmt"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// TestWalkOnce pins what the parsers read now that a nested value is
// walked once (jsonx.WalkMembers) rather than skipped and then walked: a
// block's type read from its first member or found first when it comes
// later or twice (the last one counts, as blockType reads it), the raw
// bytes of unmodelled blocks exact, the members after a walked array read,
// and content arrays of every length.
func TestWalkOnce(t *testing.T) {
	req := func(content string) string {
		return `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":` + content + `,"x":[{"y":"]"}]}],"metadata":{"user_id":"u"},"top_k":3}`
	}
	for _, tc := range []struct {
		name, content string
		want          []string // per block: type, then text or Raw
	}{
		{"type first", `[{"type":"text","text":"a"}]`, []string{"text a"}},
		{"type first, spaced", `[ { "type" : "text" , "text" : "a" } ]`, []string{"text a"}},
		{"type last", `[{"text":"a","type":"text"}]`, []string{"text a"}},
		{"type escaped", `[{"\u0074ype":"text","text":"a"}]`, []string{"text a"}},
		{"type twice, the last counts", `[{"type":"image","type":"text","text":"a"}]`, []string{"text a"}},
		{"type twice, unmodelled last", `[{"type":"text","text":"a","type":"x-new"}]`, []string{`x-new {"type":"text","text":"a","type":"x-new"}`}},
		{"unmodelled, then text", `[{"type":"x-new","a":[1,{"b":"}"}]},{"type":"text","text":"z"}]`, []string{`x-new {"type":"x-new","a":[1,{"b":"}"}]}`, "text z"}},
		{"unmodelled image source", `[{"type":"image","source":{"type":"file","file_id":"f"}} ]`, []string{`image {"type":"image","source":{"type":"file","file_id":"f"}}`}},
		{"tool_result nested", `[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"in"}],"is_error":false},{"type":"text","text":"out"}]`, []string{"tool_result [text in]", "text out"}},
		{"none", `[]`, []string{}},
		{"string", `"s"`, []string{"text s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(req(tc.content)))
			if err != nil {
				t.Fatal(err)
			}
			if r.UserID != "u" || r.TopK == nil || *r.TopK != 3 || string(r.Messages[0].Extra["x"]) != `[{"y":"]"}]` {
				t.Fatalf("members after messages: user %q, top_k %v, extra %s", r.UserID, r.TopK, r.Messages[0].Extra["x"])
			}
			if got := blockSummary(r.Messages[0].Content); strings.Join(got, "|") != strings.Join(tc.want, "|") || r.Messages[0].Content == nil {
				t.Errorf("blocks %q, want %q", got, tc.want)
			}
		})
	}
	for _, n := range []int{2, 4, 5, 9} {
		blocks, want := make([]string, n), make([]string, n)
		for i := range blocks {
			blocks[i] = fmt.Sprintf(`{"type":"text","text":"%d"}`, i)
			want[i] = fmt.Sprintf("text %d", i)
		}
		r, err := ParseRequest([]byte(req("[" + strings.Join(blocks, ",") + "]")))
		if err != nil {
			t.Fatal(err)
		}
		if got := blockSummary(r.Messages[0].Content); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%d blocks: %q", n, got)
		}
	}
	resp := `{"usage":{"input_tokens":1,"output_tokens":2,"cache_creation":{"ephemeral_5m_input_tokens":3,"z":[4]}},"content":[{"type":"tool_use","id":"i","name":"n","input":{"a":[{"b":"}"}]}},{"text":"t","type":"text"}],"id":"msg","type":"message","role":"assistant","model":"m","stop_reason":"end_turn","extra":{"k":[]}}`
	r, err := ParseResponse([]byte(resp))
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != "msg" || r.Model != "m" || r.StopReason != "end_turn" || r.Usage.OutputTokens != 2 || r.Usage.CacheWrite5mTokens != 3 ||
		string(r.Usage.Extra["cache_creation"]) != `{"z":[4]}` || string(r.Extra["extra"]) != `{"k":[]}` ||
		len(r.Content) != 2 || string(r.Content[0].Input) != `{"a":[{"b":"}"}]}` || r.Content[1].Text != "t" {
		t.Errorf("response read as %+v", r)
	}
}

func blockSummary(bs []llm.Block) []string {
	out := []string{}
	for _, b := range bs {
		switch {
		case b.Raw != nil:
			out = append(out, string(b.Type)+" "+string(b.Raw))
		case b.Type == llm.BlockToolResult:
			out = append(out, string(b.Type)+" ["+strings.Join(blockSummary(b.Content), ",")+"]")
		default:
			out = append(out, string(b.Type)+" "+b.Text)
		}
	}
	return out
}
