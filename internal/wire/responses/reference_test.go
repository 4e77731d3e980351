package responses

import (
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// referencedCases: item ids and the response each names when Keel wrote
// it (itemID), "" for ids Keel did not write (OpenAI's own are one token
// after the prefix).
var referencedCases = []struct{ item, resp string }{
	{"msg_sim_86845ba590b2ff98_0", "resp_sim_86845ba590b2ff98"},
	{"fc_abc_12", "resp_abc"},
	{"ctc_x_y_3", "resp_x_y"},
	{"rs_q_1", "resp_q"},
	{"msg_67ccd3acc8d48190a77525dc6de64b4104becd0fc2c6ab3d", ""},
	{"msg__0", ""},
	{"msg_abc_", ""},
	{"msg_abc_1x", ""},
	{"call_abc_1", ""},
	{"", ""},
}

func TestReferencedResponse(t *testing.T) {
	for _, c := range referencedCases {
		got, ok := ReferencedResponse(c.item)
		if got != c.resp || ok != (c.resp != "") {
			t.Errorf("ReferencedResponse(%q) = %q, %v; want %q", c.item, got, ok, c.resp)
		}
	}
	// What EncodeResponse writes is found again.
	r := &llm.Response{ID: "msg_sim_1", StopReason: llm.StopToolUse, Content: []llm.Block{
		{Type: llm.BlockText, Text: "Calling get_weather."},
		{Type: llm.BlockToolUse, ID: "toolu_1", Name: "get_weather", Input: []byte(`{"city":"Oslo"}`)}}}
	obj, err := EncodeResponse(r)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{itemID("msg_", "resp_sim_1", 0), itemID("fc_", "resp_sim_1", 1)} {
		if rid, ok := ReferencedResponse(id); !ok || rid != "resp_sim_1" {
			t.Fatalf("ReferencedResponse(%q) = %q, %v; want resp_sim_1", id, rid, ok)
		}
		m, ok := OutputItem(obj, id)
		if !ok || m.Role != llm.RoleAssistant || len(m.Content) != 1 {
			t.Fatalf("OutputItem(%s) = %+v, %v; want the assistant's item", id, m, ok)
		}
		if _, has := m.Extra["id"]; has {
			t.Errorf("OutputItem(%s) keeps Keel's item id: %s", id, m.Extra["id"])
		}
		switch b := m.Content[0]; i {
		case 0:
			if b.Type != llm.BlockText || b.Text != "Calling get_weather." {
				t.Errorf("message item: %+v", b)
			}
		case 1:
			if b.Type != llm.BlockToolUse || b.ID != "toolu_1" || b.Name != "get_weather" {
				t.Errorf("function_call item: %+v", b)
			}
		}
	}
	if _, ok := OutputItem(obj, "msg_sim_1_9"); ok {
		t.Error("OutputItem found an item the response does not have")
	}
	if _, ok := OutputItem([]byte(`{"output":[{"type":"item_reference","id":"x"}]}`), "x"); ok {
		t.Error("OutputItem resolved a reference to a reference")
	}
}

// FuzzReferencedResponse: no id makes it panic; a response id it derives
// is "resp_" and a non-empty tail the id holds.
func FuzzReferencedResponse(f *testing.F) {
	for _, c := range referencedCases {
		f.Add(c.item, []byte(`{"output":[{"id":"`+c.item+`","type":"message","role":"assistant","content":[{"type":"output_text","text":"t"}]}]}`))
	}
	f.Fuzz(func(t *testing.T, id string, obj []byte) {
		if rid, ok := ReferencedResponse(id); ok && (len(rid) <= len("resp_") || rid[:5] != "resp_") {
			t.Fatalf("ReferencedResponse(%q) = %q", id, rid)
		}
		if m, ok := OutputItem(obj, id); ok && len(m.Content) == 0 {
			t.Fatalf("OutputItem(%q, %q) found an empty item", obj, id)
		}
	})
}

// NoInput: input items, a previous_response_id or a prompt are something
// to answer; instructions alone are not.
func TestNoInput(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m"}`:                            true,
		`{"model":"m","input":[]}`:                 true,
		`{"model":"m","instructions":"x"}`:         true,
		`{"model":"m","prompt":null}`:              true,
		`{"model":"m","input":"hi"}`:               false,
		`{"model":"m","previous_response_id":"r"}`: false,
		`{"model":"m","prompt":{"id":"pmpt_1"}}`:   false,
	} {
		r, err := ParseRequest([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := NoInput(r); got != want {
			t.Errorf("NoInput(%s) = %v, want %v", body, got, want)
		}
	}
}
