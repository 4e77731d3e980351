package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/golden"
)

// goldenCall is one call of TestAnswersGolden: faults (a JSON list, "" for
// none) are set before it.
type goldenCall struct {
	path, body, faults string
	anthropic          bool
}

func goldenCalls() []goldenCall {
	const (
		plain  = `"messages":[{"role":"user","content":"Summarise the operational risks of this deployment plan. (request 1)"}]`
		tools  = `"messages":[{"role":"user","content":"call get_weather then lookup"}],"tools":[{"name":"get_weather","description":"weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7},"unit":{"enum":["c","f"]}},"required":["city"]}},{"name":"lookup","input_schema":{"type":"object","properties":{"q":{"type":"array","items":{"type":"string"},"minItems":2}}}}]`
		oaTool = `"messages":[{"role":"user","content":"call get_weather"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
		schema = `"messages":[{"role":"user","content":"schema"}],"output_format":{"type":"json_schema","schema":{"type":"object","properties":{"risk":{"enum":["low","high"]},"score":{"type":"number"}},"required":["risk","score"],"additionalProperties":false}}`
		oaJSON = `"messages":[{"role":"user","content":"json please"}],"response_format":{"type":"json_object"}`
	)
	anth := []string{
		`"max_tokens":16,` + plain,
		plain,
		`"max_tokens":5,` + plain,
		`"max_tokens":64,` + tools,
		`"max_tokens":64,` + schema,
		`"max_tokens":64,"messages":[{"role":"user","content":"prefill"},{"role":"assistant","content":"Signal"}]`,
		`"max_tokens":64,"temperature":0.9,` + plain,
		`"max_tokens":64,"stop_sequences":["the"," a"],` + plain,
		`"max_tokens":64,"system":"Extract the fields.","messages":[{"role":"user","content":"name: Ada\nage: 36\nactive: yes"}]`,
	}
	oa := []string{
		plain,
		`"max_tokens":16,` + plain,
		oaTool,
		oaJSON,
		`"temperature":0.5,` + oaJSON,
	}
	var cs []goldenCall
	for _, stream := range []string{"", `,"stream":true`} {
		for _, m := range anth {
			cs = append(cs, goldenCall{"/v1/messages", `{"model":"sim-sonnet",` + m + stream + `}`, "", true})
		}
		ost := stream
		if stream != "" {
			ost += `,"stream_options":{"include_usage":true}`
		}
		for _, m := range oa {
			cs = append(cs, goldenCall{"/r/eu-west/v1/chat/completions", `{"model":"sim-opus",` + m + ost + `}`, "", false})
		}
		for _, fl := range []string{
			`[{"kind":"rate_limit","retry_after":"2500ms"}]`,
			`[{"kind":"overloaded","retry_after":"3s"}]`,
			`[{"kind":"server_error","status":502}]`,
			`[{"kind":"malformed_json"}]`,
			`[{"kind":"stream_error","after_tokens":3}]`,
		} {
			cs = append(cs,
				goldenCall{"/v1/messages", `{"model":"sim-haiku","max_tokens":64,` + tools + stream + `}`, fl, true},
				goldenCall{"/v1/chat/completions", `{"model":"sim-haiku",` + oaJSON + ost + `}`, fl, false})
		}
	}
	return append(cs,
		goldenCall{"/v1/messages", `{"model":`, "", true},
		goldenCall{"/v1/messages", `{"model":"nope","max_tokens":1,` + plain + `}`, "", true},
		goldenCall{"/r/mars/v1/chat/completions", `{"model":"sim-opus",` + plain + `}`, "", false},
		goldenCall{"/v1/chat/completions", `{"model":"sim-opus","messages":[],"tool_choice":{"type":"function","function":{"name":"x"}}}`, "", false},
		// OpenAI (the default continuation, none) does not continue a
		// trailing assistant message: a new answer, the message as history.
		goldenCall{"/v1/chat/completions", `{"model":"sim-sonnet","messages":[{"role":"user","content":"prefill"},{"role":"assistant","content":"Signal"}]}`, "", false},
	)
}

var (
	goldenCreated = regexp.MustCompile(`"created":\d+`)
	goldenTime    = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
)

// TestAnswersGolden pins what the fleet answers, headers and bodies byte for
// byte (timestamps aside), over both wire formats, streaming or not, with
// tools, JSON modes, prefill, temperature, stop sequences, faults and
// errors, and the Stats the calls leave. Run with -update to rewrite
// testdata/answers.golden.
func TestAnswersGolden(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i, c := range goldenCalls() {
		var fs []Fault
		if c.faults != "" {
			if fs, err = ParseFaults([]byte(c.faults)); err != nil {
				t.Fatal(err)
			}
		}
		f.SetFaults(fs)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req := httptest.NewRequestWithContext(ctx, "POST", "http://"+TransportHost+c.path, strings.NewReader(c.body))
		if c.anthropic {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		rec := httptest.NewRecorder()
		f.Handler().ServeHTTP(rec, req)
		cancel()
		fmt.Fprintf(&b, "### %d POST %s faults=%s\n%s\n%d\n", i, c.path, c.faults, c.body, rec.Code)
		h := rec.Result().Header
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range h {
				if !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			v := strings.Join(h[k], ", ")
			if goldenTime.MatchString(v) || strings.HasPrefix(k, "X-Ratelimit-Reset-") {
				v = "<time>"
			}
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
		b.WriteString(goldenCreated.ReplaceAllString(rec.Body.String(), `"created":0`))
		b.WriteString("\n")
	}
	st, err := json.MarshalIndent(f.Stats().Total, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.Write(st)
	b.WriteString("\n")
	got := b.String()

	const path = "testdata/answers.golden"
	if golden.Update() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs at line %d (-got +want):\n-%s\n+%s", path, i+1, g, w)
			}
		}
	}
}
