package sim

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// continuationFleets returns one in-memory fleet per continuation kind,
// sim-sonnet's OpenAI endpoints set to that kind ("" is the default).
func continuationFleets(t *testing.T) map[Continuation]harness {
	t.Helper()
	out := map[Continuation]harness{}
	for _, k := range []Continuation{"", ContinueNone, ContinuePrefill, ContinueFinalMessage, ContinuePrefix} {
		cfg := ZeroLatency()
		for i := range cfg.Models {
			if cfg.Models[i].Name == "sim-sonnet" {
				cfg.Models[i].Continuation = k
			}
		}
		f, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = memHarness(f)
	}
	return out
}

// callText sends body and returns the status, the answer's text (streamed
// or not) and, for a non-200, the error.
func callText(t *testing.T, h harness, format Format, body string, stream bool) (int, string, *llm.APIError) {
	t.Helper()
	resp, err := h.post(context.Background(), format, "", body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, "", parseError(format, resp)
	}
	if stream {
		res := readStream(format, newEventReader(format, resp.Body), -1)
		if res.err != nil || res.errEv != nil {
			t.Fatalf("stream: %v %v", res.err, res.errEv)
		}
		return resp.StatusCode, res.text, nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r *llm.Response
	if format == FormatOpenAI {
		r, err = openai.ParseResponse(b)
	} else {
		r, err = anthropic.ParseResponse(b)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return resp.StatusCode, r.Text(), nil
}

// prefillBody is a request in format whose last message is an assistant
// message of text prefill (none when last is "user": the user turn ends
// it); msgExtra is appended to that assistant message and extra to the
// top-level object (each starting with a comma).
func prefillBody(format Format, question, prefill, msgExtra, extra string, stream bool) string {
	s := `{"model":"sim-sonnet","messages":[{"role":"user","content":"` + question + `"},{"role":"assistant","content":"` + prefill + `"` + msgExtra + `}]`
	if format == FormatAnthropic {
		s += `,"max_tokens":1024`
	}
	if stream {
		s += `,"stream":true`
	}
	return s + extra + "}"
}

// TestContinuationKinds checks, for each continuation kind and both wire
// formats, exactly what a request ending in a partial answer gets back:
// the rest of the answer where the endpoint continues it, a new complete
// answer where the trailing assistant message is history, or a 400.
func TestContinuationKinds(t *testing.T) {
	const question = "Describe the harbor"
	cfg := ZeroLatency()
	full := Answer(cfg, userReq("sim-sonnet", question)).Text()
	prefill := full[:len(full)/2] // mid-answer, possibly mid-word
	rest := full[len(full)/2:]
	fleets := continuationFleets(t)

	const (
		wantRest  = "rest"  // exactly the rest of the answer
		wantFresh = "fresh" // a new complete answer, the prefill as history
	)
	cases := []struct {
		name     string
		kind     Continuation
		format   Format
		msgExtra string // members of the trailing assistant message
		extra    string // top-level members
		want     string // wantRest, wantFresh, or "" for a 400
		param    string // the 400's param
		msg      string // a substring of the 400's message
	}{
		// Anthropic-format requests always continue (the Messages API's prefill).
		{name: "anthropic default", kind: "", format: FormatAnthropic, want: wantRest},
		{name: "anthropic none", kind: ContinueNone, format: FormatAnthropic, want: wantRest},
		{name: "anthropic prefill", kind: ContinuePrefill, format: FormatAnthropic, want: wantRest},
		{name: "anthropic continue_final_message", kind: ContinueFinalMessage, format: FormatAnthropic, want: wantRest},
		{name: "anthropic prefix", kind: ContinuePrefix, format: FormatAnthropic, want: wantRest},

		// OpenAI: the default is OpenAI's own behaviour.
		{name: "openai default is none", kind: "", format: FormatOpenAI, want: wantFresh},
		{name: "openai none", kind: ContinueNone, format: FormatOpenAI, want: wantFresh},
		{name: "openai none ignores continue_final_message", kind: ContinueNone, format: FormatOpenAI, extra: `,"continue_final_message":true,"add_generation_prompt":false`, want: wantFresh},
		{name: "openai none ignores prefix", kind: ContinueNone, format: FormatOpenAI, msgExtra: `,"prefix":true`, want: wantFresh},

		{name: "openai prefill", kind: ContinuePrefill, format: FormatOpenAI, want: wantRest},

		{name: "openai continue_final_message with both flags", kind: ContinueFinalMessage, format: FormatOpenAI, extra: `,"continue_final_message":true,"add_generation_prompt":false`, want: wantRest},
		{name: "openai continue_final_message without flags", kind: ContinueFinalMessage, format: FormatOpenAI, want: wantFresh},
		{name: "openai continue_final_message false", kind: ContinueFinalMessage, format: FormatOpenAI, extra: `,"continue_final_message":false,"add_generation_prompt":false`, want: wantFresh},
		{name: "openai continue_final_message ignores prefix", kind: ContinueFinalMessage, format: FormatOpenAI, msgExtra: `,"prefix":true`, want: wantFresh},
		{name: "openai continue_final_message with add_generation_prompt true", kind: ContinueFinalMessage, format: FormatOpenAI, extra: `,"continue_final_message":true,"add_generation_prompt":true`, param: "continue_final_message", msg: "Cannot set both"},
		{name: "openai continue_final_message with add_generation_prompt left at its default", kind: ContinueFinalMessage, format: FormatOpenAI, extra: `,"continue_final_message":true`, param: "continue_final_message", msg: "Cannot set both"},
		{name: "openai continue_final_message not a boolean", kind: ContinueFinalMessage, format: FormatOpenAI, extra: `,"continue_final_message":"yes","add_generation_prompt":false`, param: "continue_final_message", msg: "not a boolean"},

		{name: "openai prefix true", kind: ContinuePrefix, format: FormatOpenAI, msgExtra: `,"prefix":true`, want: wantRest},
		{name: "openai prefix absent", kind: ContinuePrefix, format: FormatOpenAI, want: wantFresh},
		{name: "openai prefix false", kind: ContinuePrefix, format: FormatOpenAI, msgExtra: `,"prefix":false`, want: wantFresh},
		{name: "openai prefix ignores continue_final_message", kind: ContinuePrefix, format: FormatOpenAI, extra: `,"continue_final_message":true,"add_generation_prompt":false`, want: wantFresh},
		{name: "openai prefix not a boolean", kind: ContinuePrefix, format: FormatOpenAI, msgExtra: `,"prefix":1`, param: "messages[1].prefix", msg: "not a boolean"},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += " stream"
			}
			t.Run(name, func(t *testing.T) {
				h := fleets[tc.kind]
				body := prefillBody(tc.format, question, prefill, tc.msgExtra, tc.extra, stream)
				status, got, ae := callText(t, h, tc.format, body, stream)
				var req *llm.Request
				if tc.format == FormatOpenAI {
					req = parseOpenAI(t, body)
				} else {
					req = parseAnthropic(t, body)
				}
				oracle, oerr := AnswerFormat(h.f.Config(), tc.format, req, 0)
				if tc.want == "" {
					if status != http.StatusBadRequest || ae == nil || ae.Param != tc.param || !strings.Contains(ae.Message, tc.msg) || ae.Type != llm.ErrInvalidRequest {
						t.Fatalf("got %d %+v, want a 400 invalid_request_error on %s containing %q", status, ae, tc.param, tc.msg)
					}
					if oerr == nil || oerr.Error() != ae.Error() {
						t.Errorf("AnswerFormat error %v, the endpoint answered %v", oerr, ae)
					}
					return
				}
				if status != http.StatusOK {
					t.Fatalf("status %d: %+v", status, ae)
				}
				if oerr != nil || oracle.Text() != got {
					t.Errorf("AnswerFormat = %q, %v; the endpoint sent %q", oracle.Text(), oerr, got)
				}
				switch tc.want {
				case wantRest:
					if got != rest {
						t.Errorf("got %q, want the rest of the answer %q", got, rest)
					}
				case wantFresh:
					if got == rest || got == full || strings.HasPrefix(got, rest) {
						t.Errorf("got %q: the prefill %q was continued, want a new answer", got, prefill)
					}
					if r := []rune(got); len(r) == 0 || !unicode.IsUpper(r[0]) || !strings.HasSuffix(got, ".") {
						t.Errorf("got %q, want a whole answer (a capital first, a full stop last)", got)
					}
				}
			})
		}
	}
}

// A trailing assistant message that is history is part of the prompt: the
// new answer is the same for the same conversation and changes with the
// message's text, and its input tokens count it.
func TestContinuationNoneIsHistory(t *testing.T) {
	cfg := ZeroLatency()
	conv := func(assistant string) *llm.Request {
		r := userReq("sim-sonnet", "Describe the harbor")
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: assistant}}})
		return r
	}
	answer := func(r *llm.Request) *llm.Response {
		t.Helper()
		a, err := AnswerFormat(cfg, FormatOpenAI, r, 0)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a, b := answer(conv("Umber fable")), answer(conv("Umber fable"))
	if a.Text() != b.Text() {
		t.Errorf("the same conversation answered %q, then %q", a.Text(), b.Text())
	}
	if c := answer(conv("Cobalt ledger")); c.Text() == a.Text() {
		t.Errorf("another assistant turn, the same answer %q", a.Text())
	}
	if strings.HasPrefix(a.Text(), "Umber fable") {
		t.Errorf("answer %q repeats the assistant turn", a.Text())
	}
	// 3 + 1 words of the user turn, 2 + 1 of the assistant turn.
	if got, want := a.Usage.InputTokens, (1+3)+(1+2); got != want {
		t.Errorf("input_tokens = %d, want %d", got, want)
	}
	// Over the Anthropic format the same message is a prefill: the answer
	// to the user turn alone, which does not start with it, whole.
	if got, want := Answer(cfg, conv("Umber fable")).Text(), Answer(cfg, userReq("sim-sonnet", "Describe the harbor")).Text(); got != want {
		t.Errorf("anthropic: got %q, want the answer to the user turn %q", got, want)
	}
}

// continue_final_message on a conversation that does not end with an
// assistant message is a 400, as vLLM answers.
func TestContinueFinalMessageNeedsAssistant(t *testing.T) {
	h := continuationFleets(t)[ContinueFinalMessage]
	body := chatBody(FormatOpenAI, "sim-sonnet", "Describe the harbor", false, `,"continue_final_message":true,"add_generation_prompt":false`)
	status, _, ae := callText(t, h, FormatOpenAI, body, false)
	if status != http.StatusBadRequest || ae == nil || ae.Param != "continue_final_message" || !strings.Contains(ae.Message, "last message is not from the assistant") {
		t.Fatalf("got %d %+v, want a 400 on continue_final_message", status, ae)
	}
	// Without the flag the same conversation is answered.
	if status, _, ae := callText(t, h, FormatOpenAI, chatBody(FormatOpenAI, "sim-sonnet", "Describe the harbor", false, ""), false); status != http.StatusOK {
		t.Fatalf("without the flag: %d %+v", status, ae)
	}
}

func TestContinuationConfig(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string // "" valid
	}{
		{name: "each kind", mod: func(c *Config) {
			for i, k := range []Continuation{ContinueNone, ContinuePrefill, ContinueFinalMessage, ContinuePrefix} {
				c.Models[i].Continuation = k
			}
		}},
		{name: "unknown kind", mod: func(c *Config) { c.Models[0].Continuation = "echo" }, want: `models[0].continuation: unknown continuation "echo"`},
		{name: "anthropic-only model", mod: func(c *Config) { c.Models[4].Continuation = ContinuePrefill }, want: "models[4].continuation: applies to the openai format"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	c, err := ParseConfig([]byte("seed: 1\nregions: [{name: r}]\nmodels:\n  - {name: m, capability: 1, regions: [r], continuation: prefix}\n"))
	if err != nil || c.Models[0].Continuation != ContinuePrefix {
		t.Errorf("ParseConfig: %v %+v", err, c.Models)
	}
}

// TestEchoPrefill checks the llama-server echo (PROTOCOLS.md §6.2): a
// continued answer starts with the prefill, non-streamed in its text and
// streamed in its first delta together with the first new token; the
// tokens after it are those a non-echoing endpoint sends, and max_tokens
// counts only them.
func TestEchoPrefill(t *testing.T) {
	const question = "Describe the harbor"
	cfg := ZeroLatency()
	full := Answer(cfg, userReq("sim-sonnet", question)).Text()
	prefill := strings.TrimRight(full[:len(full)/2], " ")
	rest := full[len(prefill):]
	for i := range cfg.Models {
		if cfg.Models[i].Name == "sim-sonnet" {
			cfg.Models[i].Continuation = ContinuePrefill
			cfg.Models[i].EchoPrefill = true
		}
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := memHarness(f)
	for _, format := range formats {
		t.Run(format.String(), func(t *testing.T) {
			_, text, ae := callText(t, h, format, prefillBody(format, question, prefill, "", "", false), false)
			if ae != nil || text != prefill+rest {
				t.Fatalf("non-streamed: %q %v, want the prefill then the rest %q", text, ae, prefill+rest)
			}
			resp, err := h.post(context.Background(), format, "", prefillBody(format, question, prefill, "", "", true))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			er := newEventReader(format, resp.Body)
			first := readStream(format, er, 1)
			if !strings.HasPrefix(first.text, prefill) || len(first.text) <= len(prefill) || !strings.HasPrefix(rest, first.text[len(prefill):]) {
				t.Errorf("first delta %q, want the prefill %q and the first new token", first.text, prefill)
			}
			all := readStream(format, er, -1)
			if got := first.text + all.text; got != prefill+rest {
				t.Errorf("streamed %q, want %q", got, prefill+rest)
			}
			body := prefillBody(format, question, prefill, "", "", false)
			body = strings.Replace(body, `"model":"sim-sonnet",`, `"model":"sim-sonnet","max_tokens":3,`, 1)
			if format == FormatAnthropic {
				body = strings.Replace(body, `,"max_tokens":1024`, "", 1)
			}
			_, text, ae = callText(t, h, format, body, false)
			if ae != nil || !strings.HasPrefix(text, prefill) || len(strings.Fields(text[len(prefill):])) > 3 {
				t.Errorf("max_tokens 3: %q %v, want the prefill and at most 3 new tokens", text, ae)
			}
		})
	}
}
