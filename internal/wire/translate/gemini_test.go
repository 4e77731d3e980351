package translate

import (
	"bytes"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/gemini"
	"github.com/keelmesh/keel/internal/wire/openai"
	"github.com/keelmesh/keel/internal/wire/responses"
)

// geminiExtraRequests are client requests only the Gemini translation
// needs: a thinking budget, a reasoning effort, a URL image, a Responses
// client.
var geminiExtraRequests = []requestCase{
	{"a2g_thinking_budget", llm.FormatAnthropic, `{"model":"m","max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[{"role":"user","content":"Why?"}]}`},
	{"a2g_thinking_disabled", llm.FormatAnthropic, `{"model":"m","max_tokens":400,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"Why?"}]}`},
	{"o2g_reasoning_effort", llm.FormatOpenAI, `{"model":"m","reasoning_effort":"medium","messages":[{"role":"user","content":"Why?"}]}`},
	{"r2g_input_and_instructions", llm.FormatResponses, `{"model":"m","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"Hi"}]}],"max_output_tokens":200,"temperature":0.3}`},
	{"r2g_function_call_history", llm.FormatResponses, `{"model":"m","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}],"input":[{"role":"user","content":"Weather in Paris?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":"18C"}]}`},
	{"r2g_json_schema", llm.FormatResponses, `{"model":"m","input":"A city","text":{"format":{"type":"json_schema","name":"city","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false},"strict":true}}}`},
}

func parseClient(t *testing.T, c requestCase) *llm.Request {
	t.Helper()
	var req *llm.Request
	var err error
	switch c.from {
	case llm.FormatAnthropic:
		req, err = anthropic.ParseRequest([]byte(c.body))
	case llm.FormatOpenAI:
		req, err = openai.ParseRequest([]byte(c.body))
	default:
		req, err = responses.ParseRequest([]byte(c.body))
	}
	if err != nil {
		t.Fatalf("parsing the client request: %v", err)
	}
	return req
}

// geminiName renames a2o_x / o2a_x to a2g_x / o2g_x.
func geminiName(name string) string {
	switch {
	case strings.HasPrefix(name, "a2o_"):
		return "a2g_" + name[4:]
	case strings.HasPrefix(name, "o2a_"):
		return "o2g_" + name[4:]
	}
	return name
}

// TestGeminiRequestGolden translates every client request of the
// request goldens (and the Gemini-only ones) for a Gemini endpoint and
// compares the GenerateContentRequest and the dropped list (or the
// refusal) with testdata/gemini/requests/<name>.golden. The body must
// parse with the strict Gemini request parser (unknown members refused).
func TestGeminiRequestGolden(t *testing.T) {
	for _, c := range append(append([]requestCase{}, requestCases...), geminiExtraRequests...) {
		name := geminiName(c.name)
		t.Run(name, func(t *testing.T) {
			req := parseClient(t, c)
			before := dump(req)
			var got strings.Builder
			out, rep, err := Prepare(req, llm.FormatGemini, Policy{})
			if after := dump(req); after != before {
				t.Fatalf("Prepare modified its input (-got +want):\n%s", diffLines(after, before))
			}
			if err != nil {
				got.WriteString("# refused: " + err.Error() + "\n")
				checkGolden(t, filepath.Join("testdata", "gemini", "requests", name+".golden"), []byte(got.String()))
				return
			}
			body, err := gemini.EncodeRequest(out)
			if err != nil {
				got.WriteString("# not encoded: " + err.Error() + "\n")
				checkGolden(t, filepath.Join("testdata", "gemini", "requests", name+".golden"), []byte(got.String()))
				return
			}
			if _, err := gemini.ParseRequest(body); err != nil {
				t.Errorf("the Gemini parser rejects the translated body: %v\n%s", err, body)
			}
			got.WriteString("# dropped: " + strings.Join(rep.Dropped, ",") + "\n")
			for _, n := range sortedKeys(rep.names) {
				got.WriteString("# tool name " + n + " <- " + rep.names[n] + "\n")
			}
			got.Write(indentJSON(t, body))
			checkGolden(t, filepath.Join("testdata", "gemini", "requests", name+".golden"), []byte(got.String()))
		})
	}
}

// geminiAnswers are GenerateContentResponses as the Gemini API sends
// them (ai.google.dev/api/generate-content#generatecontentresponse).
var geminiAnswers = []struct{ name, body string }{
	{"text", `{"candidates":[{"content":{"parts":[{"text":"Keels keep boats upright."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":6,"totalTokenCount":18},"modelVersion":"gemini-2.5-flash","responseId":"resp-1"}`},
	{"thoughts_and_cache", `{"candidates":[{"content":{"parts":[{"text":"Consider the hull.","thought":true},{"text":"Because of ballast."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1200,"cachedContentTokenCount":1000,"candidatesTokenCount":5,"thoughtsTokenCount":40,"totalTokenCount":1245},"modelVersion":"gemini-2.5-pro","responseId":"resp-2"}`},
	{"function_calls", `{"candidates":[{"content":{"parts":[{"text":"Checking."},{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}},{"functionCall":{"name":"get_weather","args":{"city":"Oslo"}}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":20,"totalTokenCount":50},"modelVersion":"gemini-2.5-flash","responseId":"resp-3"}`},
	{"max_tokens", `{"candidates":[{"content":{"parts":[{"text":"Keels keep"}],"role":"model"},"finishReason":"MAX_TOKENS","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":2,"totalTokenCount":14},"modelVersion":"gemini-2.5-flash","responseId":"resp-4"}`},
	{"safety", `{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_HATE_SPEECH","probability":"HIGH","blocked":true}]}],"usageMetadata":{"promptTokenCount":12,"totalTokenCount":12},"modelVersion":"gemini-2.5-flash","responseId":"resp-5"}`},
}

// clientEncoders write an answer in each client format.
var clientEncoders = []struct {
	name   string
	format llm.Format
	encode func(*llm.Response) ([]byte, error)
}{
	{"anthropic", llm.FormatAnthropic, anthropic.EncodeResponse},
	{"openai", llm.FormatOpenAI, openai.EncodeResponse},
	{"responses", llm.FormatResponses, responses.EncodeResponse},
}

// TestGeminiResponseGolden reads each Gemini answer and writes it in
// each client format, compared with
// testdata/gemini/responses/<answer>.<client>.golden.
func TestGeminiResponseGolden(t *testing.T) {
	for _, a := range geminiAnswers {
		for _, enc := range clientEncoders {
			t.Run(a.name+"/"+enc.name, func(t *testing.T) {
				resp, err := gemini.ParseResponse([]byte(a.body))
				if err != nil {
					t.Fatal(err)
				}
				resp.Created = 1767225600
				rep := Report{client: enc.format, upstream: llm.FormatGemini}
				out, err := enc.encode(rep.RestoreResponse(resp))
				if err != nil {
					t.Fatal(err)
				}
				checkGolden(t, filepath.Join("testdata", "gemini", "responses", a.name+"."+enc.name+".golden"), indentJSON(t, out))
			})
		}
	}
}

// geminiStreams are :streamGenerateContent?alt=sse bodies as the Gemini
// API sends them (simonw/llm-gemini#97): text deltas, usage on every
// chunk, the finish reason on the last.
var geminiStreams = []struct{ name, body string }{
	{"text", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Keels keep \"}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":12,\"candidatesTokenCount\":3,\"totalTokenCount\":15},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"s-1\"}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"boats upright.\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":12,\"candidatesTokenCount\":6,\"totalTokenCount\":18},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"s-1\"}\r\n\r\n"},
	{"thought_then_call", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Need weather.\",\"thought\":true}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":30,\"totalTokenCount\":30,\"thoughtsTokenCount\":8},\"modelVersion\":\"gemini-2.5-pro\",\"responseId\":\"s-2\"}\n\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"get_weather\",\"args\":{\"city\":\"Paris\"}}}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":30,\"candidatesTokenCount\":10,\"thoughtsTokenCount\":8,\"totalTokenCount\":48},\"modelVersion\":\"gemini-2.5-pro\",\"responseId\":\"s-2\"}\n\n"},
	{"blocked_prompt", "data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"},\"usageMetadata\":{\"promptTokenCount\":9,\"totalTokenCount\":9},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"s-3\"}\n\n"},
}

// streamWriters write events in each client format.
var streamWriters = []struct {
	name   string
	format llm.Format
	writer func(w *sse.Writer) interface{ Write(*llm.Event) error }
}{
	{"anthropic", llm.FormatAnthropic, func(w *sse.Writer) interface{ Write(*llm.Event) error } {
		return anthropic.NewStreamWriter(w, anthropic.StreamOptions{})
	}},
	{"openai", llm.FormatOpenAI, func(w *sse.Writer) interface{ Write(*llm.Event) error } {
		return openai.NewStreamWriter(w, openai.StreamOptions{IncludeUsage: true})
	}},
	{"responses", llm.FormatResponses, func(w *sse.Writer) interface{ Write(*llm.Event) error } {
		return responses.NewStreamWriter(w)
	}},
}

var createdAt = regexp.MustCompile(`"created_at":[0-9]+`)

// TestGeminiStreamGolden reads each Gemini stream and writes it as each
// client format's stream, compared with
// testdata/gemini/streams/<stream>.<client>.golden.
func TestGeminiStreamGolden(t *testing.T) {
	for _, s := range geminiStreams {
		for _, sw := range streamWriters {
			t.Run(s.name+"/"+sw.name, func(t *testing.T) {
				rd := gemini.NewStreamReader(strings.NewReader(s.body))
				rs := Report{client: sw.format, upstream: llm.FormatGemini}.NewStreamRestorer()
				var buf bytes.Buffer
				w := sw.writer(sse.NewWriter(&buf, nil))
				for {
					ev, err := rd.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if ev = rs.Restore(ev); ev == nil {
						continue
					}
					if ev.Type == llm.EventMessageStart && ev.Message != nil {
						m := *ev.Message
						m.Created = 1767225600
						ev = &llm.Event{Type: ev.Type, Message: &m}
					}
					if err := w.Write(ev); err != nil {
						t.Fatal(err)
					}
				}
				// A stream that fails before it starts is dated now by
				// the Responses writer: the golden holds no clock.
				out := createdAt.ReplaceAll(buf.Bytes(), []byte(`"created_at":0`))
				checkGolden(t, filepath.Join("testdata", "gemini", "streams", s.name+"."+sw.name+".golden"), out)
			})
		}
	}
}
