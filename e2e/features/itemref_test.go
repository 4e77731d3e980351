package features_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/keelmesh/keel/sim"
)

// The Vercel AI SDK (ai 6, @ai-sdk/openai 3: `openai(model)`), with store
// left at its default (true), sends an earlier answer's message back as
// {"type":"item_reference","id":"msg_…"} — the output item's id — and
// its function_call in full (observed in review against keel serve,
// docs/CLIENTS.md). OpenAI resolves the reference from the stored
// response. Keel stored that response (docs/config.md `responses`), so a
// follow-up served by an Anthropic endpoint must get the referenced
// message's text, not a 400 "item_reference_block is not supported".
func TestResponsesItemReferenceResolvedFromStore(t *testing.T) {
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	m, rec := convMesh(t, fleet, nil)
	hc := m.HTTPClient()
	post := func(body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://keel.invalid/v1/responses", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	const tools = `[{"type":"function","name":"get_weather","description":"Weather for a city","parameters":` + weatherSchema + `}]`
	const user = `{"role":"user","content":[{"type":"input_text","text":"` + convPrompt + `"}]}`
	code, b := post(`{"model":"claude-eu","input":[` + user + `],"tools":` + tools + `,"tool_choice":"auto"}`)
	if code != 200 {
		t.Fatalf("turn 1: %d %s", code, b)
	}
	var r1 struct {
		Output []struct {
			Type, ID, Name, Arguments string
			CallID                    string `json:"call_id"`
			Content                   []struct{ Text string }
		}
	}
	if err := json.Unmarshal(b, &r1); err != nil {
		t.Fatal(err)
	}
	var msgID, text, call string
	for _, it := range r1.Output {
		switch it.Type {
		case "message":
			msgID, text = it.ID, it.Content[0].Text
		case "function_call":
			c, _ := json.Marshal(map[string]string{"type": "function_call", "call_id": it.CallID, "name": it.Name, "arguments": it.Arguments})
			call = string(c) + `,{"type":"function_call_output","call_id":"` + it.CallID + `","output":"{\"temp\":12}"}`
		}
	}
	if msgID == "" || call == "" {
		t.Fatalf("turn 1 output %s: want a message and a function call", b)
	}
	code, b = post(`{"model":"claude-eu","input":[` + user + `,{"type":"item_reference","id":"` + msgID + `"},` + call + `],"tools":` + tools + `,"tool_choice":"auto"}`)
	if code != 200 {
		t.Fatalf("turn 2 with an item_reference to %s: %d %s", msgID, code, b)
	}
	up := rec.last(t, "/r/eu-west/v1/messages")
	if !strings.Contains(string(up.body), text) || strings.Contains(string(up.body), "item_reference") {
		t.Fatalf("Anthropic upstream body %s: want the referenced message's text %q in place of the reference", up.body, text)
	}
}
