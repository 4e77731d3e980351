package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

func TestErrorFaults(t *testing.T) {
	cases := []struct {
		name       string
		fault      Fault
		wantStatus map[Format]int
		wantType   llm.ErrorType
		check      func(t *testing.T, resp *http.Response)
	}{
		{
			name:       "rate limit",
			fault:      Fault{Kind: KindRateLimit, RetryAfter: Duration(2 * time.Second)},
			wantStatus: map[Format]int{FormatAnthropic: 429, FormatOpenAI: 429},
			wantType:   llm.ErrRateLimit,
			check: func(t *testing.T, resp *http.Response) {
				if got := resp.Header.Get("Retry-After"); got != "2" {
					t.Errorf("retry-after = %q, want 2", got)
				}
				if got := resp.Header.Get("Retry-After-Ms"); got != "2000" {
					t.Errorf("retry-after-ms = %q, want 2000", got)
				}
				left := resp.Header.Get("Anthropic-Ratelimit-Requests-Remaining") + resp.Header.Get("X-Ratelimit-Remaining-Requests")
				if left != "0" {
					t.Errorf("remaining requests = %q, want 0", left)
				}
			},
		},
		{
			name:       "overloaded",
			fault:      Fault{Kind: KindOverloaded},
			wantStatus: map[Format]int{FormatAnthropic: 529, FormatOpenAI: 503},
			wantType:   llm.ErrOverloaded,
		},
		{
			name:       "server error",
			fault:      Fault{Kind: KindServerError, Status: 502},
			wantStatus: map[Format]int{FormatAnthropic: 502, FormatOpenAI: 502},
			wantType:   llm.ErrAPI,
		},
	}
	for _, h := range harnesses(t, ZeroLatency()) {
		for _, tc := range cases {
			for _, format := range formats {
				t.Run(fmt.Sprintf("%s/%s/%s", h.name, tc.name, format), func(t *testing.T) {
					fl := tc.fault
					fl.Count = 1
					if err := h.f.SetFaults([]Fault{fl}); err != nil {
						t.Fatal(err)
					}
					h.f.Reset()
					resp, err := h.post(context.Background(), format, "us-east", chatBody(format, "sim-opus", "hi", false, ""))
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					if resp.StatusCode != tc.wantStatus[format] {
						t.Fatalf("status %d, want %d", resp.StatusCode, tc.wantStatus[format])
					}
					if tc.check != nil {
						tc.check(t, resp)
					}
					if e := parseError(format, resp); e.Type != tc.wantType {
						t.Errorf("error type %q, want %q (%v)", e.Type, tc.wantType, e)
					}
					// The fault was counted once and has expired: the next call succeeds.
					resp2, err := h.post(context.Background(), format, "us-east", chatBody(format, "sim-opus", "hi", false, ""))
					if err != nil {
						t.Fatal(err)
					}
					resp2.Body.Close()
					if resp2.StatusCode != 200 {
						t.Errorf("after the fault: status %d", resp2.StatusCode)
					}
					st, _ := h.f.Endpoint("sim-opus", "us-east")
					if st.ByFault[tc.fault.Kind] != 1 || st.ByStatus[tc.wantStatus[format]] != 1 || st.ByStatus[200] != 1 || st.Requests != 2 {
						t.Errorf("stats %+v", st)
					}
				})
			}
		}
	}
}

func TestResetFault(t *testing.T) {
	for _, h := range harnesses(t, ZeroLatency()) {
		for _, format := range formats {
			t.Run(h.name+"/"+format.String(), func(t *testing.T) {
				h.f.SetFaults([]Fault{{Kind: KindReset, Count: 1}})
				resp, err := h.post(context.Background(), format, "eu-west", chatBody(format, "sim-opus", "hi", false, ""))
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got status %d, want a connection error", resp.StatusCode)
				}
				if !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("error %v is not ECONNRESET", err)
				}
			})
		}
	}
}

func TestStreamFaults(t *testing.T) {
	cfg := ZeroLatency()
	want := Answer(cfg, userReq("sim-opus", "stream me"))
	toks := splitWords(want.Text())
	for _, h := range harnesses(t, cfg) {
		for _, format := range formats {
			t.Run(h.name+"/"+format.String(), func(t *testing.T) {
				t.Run("clean", func(t *testing.T) {
					h.f.SetFaults(nil)
					resp, err := h.post(context.Background(), format, "", chatBody(format, "sim-opus", "stream me", true, ""))
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
						t.Errorf("content-type %q", ct)
					}
					res := readStream(format, newEventReader(format, resp.Body), -1)
					if res.err != nil || res.text != want.Text() || res.deltas != len(toks) || res.stop != llm.StopEndTurn {
						t.Errorf("got %+v, want text %q", res, want.Text())
					}
					if res.usage == nil || res.usage.OutputTokens != want.Usage.OutputTokens || res.usage.InputTokens != want.Usage.InputTokens {
						t.Errorf("usage %+v, want %+v", res.usage, want.Usage)
					}
				})
				t.Run("stream_cut", func(t *testing.T) {
					h.f.SetFaults([]Fault{{Kind: KindStreamCut, AfterTokens: 3, Count: 1}})
					resp, err := h.post(context.Background(), format, "", chatBody(format, "sim-opus", "stream me", true, ""))
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					res := readStream(format, newEventReader(format, resp.Body), -1)
					if !errors.Is(res.err, io.ErrUnexpectedEOF) {
						t.Errorf("error %v, want an unexpected EOF", res.err)
					}
					if res.text != strings.Join(toks[:3], "") {
						t.Errorf("text before the cut %q, want %q", res.text, strings.Join(toks[:3], ""))
					}
				})
				t.Run("stream_cut raw body", func(t *testing.T) {
					h.f.SetFaults([]Fault{{Kind: KindStreamCut, AfterTokens: 1, Count: 1}})
					resp, err := h.post(context.Background(), format, "", chatBody(format, "sim-opus", "stream me", true, ""))
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Errorf("body read error %v, want io.ErrUnexpectedEOF", err)
					}
				})
				t.Run("stream_error", func(t *testing.T) {
					h.f.SetFaults([]Fault{{Kind: KindStreamError, AfterTokens: 2, Count: 1}})
					resp, err := h.post(context.Background(), format, "", chatBody(format, "sim-opus", "stream me", true, ""))
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					res := readStream(format, newEventReader(format, resp.Body), -1)
					// OpenAI names a failure on its side server_error, Anthropic
					// overloaded_error.
					want := llm.ErrOverloaded
					if format == FormatOpenAI {
						want = llm.ErrAPI
					}
					if res.err != nil || res.errEv == nil || res.errEv.Type != want {
						t.Fatalf("got %+v, want a %s error event", res, want)
					}
					if res.text != strings.Join(toks[:2], "") || res.stop != "" {
						t.Errorf("text %q stop %q, want %q and no stop", res.text, res.stop, strings.Join(toks[:2], ""))
					}
				})
				t.Run("stall", func(t *testing.T) {
					h.f.SetFaults([]Fault{{Kind: KindStall, AfterTokens: 4, Count: 1}})
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					resp, err := h.post(ctx, format, "", chatBody(format, "sim-opus", "stream me", true, ""))
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					er := newEventReader(format, resp.Body)
					if res := readStream(format, er, 4); res.text != strings.Join(toks[:4], "") {
						t.Fatalf("text %q, want %q", res.text, strings.Join(toks[:4], ""))
					}
					// Nothing more comes: with no latency the rest would be
					// here at once, so a read still blocked after a while
					// shows the stall; then the client gives up.
					next := make(chan streamResult, 1)
					go func() { next <- readStream(format, er, 1) }()
					select {
					case res := <-next:
						t.Fatalf("stalled stream went on: %+v", res)
					case <-time.After(100 * time.Millisecond):
					}
					cancel()
					if res := <-next; res.err == nil {
						t.Errorf("read after cancel: %+v, want an error", res)
					}
				})
			})
		}
	}
}

func TestHangFault(t *testing.T) {
	for _, h := range harnesses(t, ZeroLatency()) {
		t.Run(h.name, func(t *testing.T) {
			h.f.SetFaults([]Fault{{Kind: KindHang, Count: 1}})
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			resp, err := h.post(ctx, FormatOpenAI, "", chatBody(FormatOpenAI, "sim-opus", "hi", false, ""))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("hung call answered %d", resp.StatusCode)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v, want deadline exceeded", err)
			}
		})
	}
}

func TestMalformedJSONFault(t *testing.T) {
	cfg := ZeroLatency()
	toolExtra := `,"tools":[{"name":"get_weather","input_schema":` + weatherTool + `}]`
	oaiToolExtra := `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":` + weatherTool + `}}]`
	for _, h := range harnesses(t, cfg) {
		t.Run(h.name, func(t *testing.T) {
			// A plain text answer has no JSON: the fault waits for one that has.
			h.f.SetFaults([]Fault{{Kind: KindMalformedJSON, Count: 3}})
			resp, err := h.post(context.Background(), FormatOpenAI, "", chatBody(FormatOpenAI, "sim-opus", "plain", false, ""))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r, err := openai.ParseResponse(b)
			if err != nil || r.Text() != Answer(cfg, userReq("sim-opus", "plain")).Text() {
				t.Fatalf("plain answer changed: %v %s", err, b)
			}

			// JSON mode.
			resp, err = h.post(context.Background(), FormatOpenAI, "", chatBody(FormatOpenAI, "sim-opus", "json", false, `,"response_format":{"type":"json_object"}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			r, err = openai.ParseResponse(b)
			if err != nil {
				t.Fatal(err)
			}
			if json.Valid([]byte(r.Text())) {
				t.Errorf("JSON-mode answer still valid: %s", r.Text())
			}

			// A tool input, non-streaming Anthropic: valid JSON, wrong shape.
			resp, err = h.post(context.Background(), FormatAnthropic, "", chatBody(FormatAnthropic, "sim-opus", "get_weather", false, toolExtra))
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			ar, err := anthropic.ParseResponse(b)
			if err != nil {
				t.Fatalf("%v: %s", err, b)
			}
			var in map[string]any
			if err := json.Unmarshal(ar.Content[1].Input, &in); err != nil || len(in) != 1 || in["input"] == nil {
				t.Errorf("tool input %s, want {\"input\": <broken text>}", ar.Content[1].Input)
			}

			// A streamed tool input (OpenAI arguments): invalid JSON.
			resp, err = h.post(context.Background(), FormatOpenAI, "", chatBody(FormatOpenAI, "sim-opus", "get_weather", true, oaiToolExtra))
			if err != nil {
				t.Fatal(err)
			}
			res := readStream(FormatOpenAI, newEventReader(FormatOpenAI, resp.Body), -1)
			resp.Body.Close()
			if res.err != nil || json.Valid([]byte(res.input)) || res.input == "" {
				t.Errorf("streamed tool input %q (err %v), want invalid JSON", res.input, res.err)
			}
			if n := len(h.f.Faults()); n != 0 {
				t.Errorf("%d faults left, want 0", n)
			}
		})
	}
}

func TestRegionDownControlAPI(t *testing.T) {
	for _, h := range harnesses(t, ZeroLatency()) {
		t.Run(h.name, func(t *testing.T) {
			ctx := context.Background()
			call := func(region string) error {
				resp, err := h.post(ctx, FormatAnthropic, region, chatBody(FormatAnthropic, "sim-sonnet", "hi", false, ""))
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				return nil
			}
			if code, body, err := h.do(ctx, "POST", "/sim/regions/eu-west/down", ""); err != nil || code != 200 {
				t.Fatalf("down: %d %s %v", code, body, err)
			}
			if err := call("eu-west"); !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("call to a down region: %v, want ECONNRESET", err)
			}
			if err := call("us-east"); err != nil {
				t.Errorf("call to a healthy region: %v", err)
			}
			if code, _, _ := h.do(ctx, "POST", "/sim/regions/nowhere/down", ""); code != 404 {
				t.Errorf("unknown region: %d, want 404", code)
			}
			if code, body, err := h.do(ctx, "POST", "/sim/regions/eu-west/up", ""); err != nil || code != 200 {
				t.Fatalf("up: %d %s %v", code, body, err)
			}
			if err := call("eu-west"); err != nil {
				t.Errorf("call after up: %v", err)
			}
			code, body, _ := h.do(ctx, "GET", "/sim/stats", "")
			var st Stats
			if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
				t.Fatalf("stats: %d %v %s", code, err, body)
			}
			if st.Total.ByFault["region_down"] != 1 || st.Total.ByStatus[200] != 2 || st.Total.Requests != 3 {
				t.Errorf("stats total %+v", st.Total)
			}
			if code, _, _ := h.do(ctx, "POST", "/sim/reset", ""); code != 204 {
				t.Errorf("reset: %d", code)
			}
			if st := h.f.Stats(); st.Total.Requests != 0 {
				t.Errorf("requests after reset: %d", st.Total.Requests)
			}
		})
	}
}

func TestFaultsControlAPI(t *testing.T) {
	h := memHarness(mustNew(t, ZeroLatency()))
	ctx := context.Background()
	code, body, err := h.do(ctx, "POST", "/sim/faults", `[{"kind":"rate_limit","count":2,"retry_after":"1500ms","region":"us-east","format":"openai"},{"kind":"slow","rate":0.5,"factor":3}]`)
	if err != nil || code != 200 {
		t.Fatalf("%d %s %v", code, body, err)
	}
	for _, bad := range []string{`[{"kind":"meteor"}]`, `[{"kind":"reset","bogus":1}]`, `{"kind":"reset"}`, `[{"kind":"reset","rate":2}]`, `[]x`} {
		if code, body, _ := h.do(ctx, "POST", "/sim/faults", bad); code != 400 {
			t.Errorf("POST %s: %d %s, want 400", bad, code, body)
		}
	}
	// A rejected list leaves the active one in place.
	_, body, _ = h.do(ctx, "GET", "/sim/faults", "")
	fs, err := ParseFaults([]byte(body))
	if err != nil || len(fs) != 2 || fs[0].RetryAfter != Duration(1500*time.Millisecond) || fs[1].Factor != 3 {
		t.Fatalf("faults %s (%v)", body, err)
	}
	// The rate limit matches only OpenAI calls to us-east, twice.
	statuses := func(format Format, region string) int {
		resp, err := h.post(ctx, format, region, chatBody(format, "sim-opus", "x", false, ""))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	got := []int{statuses(FormatAnthropic, "us-east"), statuses(FormatOpenAI, "eu-west"), statuses(FormatOpenAI, "us-east"), statuses(FormatOpenAI, "us-east"), statuses(FormatOpenAI, "us-east")}
	if want := []int{200, 200, 429, 429, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
}

func TestAPIErrors(t *testing.T) {
	cfg := ZeroLatency()
	cfg.Models = append(cfg.Models, ModelSpec{Name: "sim-local", Capability: 2, ContextWindow: 5, Regions: []string{"eu-west"}, Formats: []string{"openai"}})
	h := memHarness(mustNew(t, cfg))
	cases := []struct {
		name   string
		format Format
		region string
		body   string
		status int
		typ    llm.ErrorType
	}{
		{"unknown model", FormatAnthropic, "", chatBody(FormatAnthropic, "gpt-9", "hi", false, ""), 404, llm.ErrNotFound},
		{"unknown model openai", FormatOpenAI, "us-east", chatBody(FormatOpenAI, "gpt-9", "hi", false, ""), 404, llm.ErrNotFound},
		{"not in region", FormatOpenAI, "us-east", chatBody(FormatOpenAI, "sim-local", "hi", false, ""), 404, llm.ErrNotFound},
		{"not in format", FormatAnthropic, "eu-west", chatBody(FormatAnthropic, "sim-local", "hi", false, ""), 404, llm.ErrNotFound},
		{"unknown region", FormatAnthropic, "mars", chatBody(FormatAnthropic, "sim-opus", "hi", false, ""), 404, llm.ErrNotFound},
		{"bad json anthropic", FormatAnthropic, "", `{"model":`, 400, llm.ErrInvalidRequest},
		{"bad json openai", FormatOpenAI, "", `{"model":`, 400, llm.ErrInvalidRequest},
		{"missing max_tokens", FormatAnthropic, "", `{"model":"sim-opus","messages":[{"role":"user","content":"hi"}]}`, 400, llm.ErrInvalidRequest},
		{"context window", FormatOpenAI, "", chatBody(FormatOpenAI, "sim-local", "one two three four five six", false, ""), 400, llm.ErrInvalidRequest},
		{"forced unknown tool", FormatAnthropic, "", chatBody(FormatAnthropic, "sim-opus", "hi", false, `,"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"b"}`), 400, llm.ErrInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := h.post(context.Background(), tc.format, tc.region, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content-type %q", ct)
			}
			if e := parseError(tc.format, resp); e.Type != tc.typ || e.Message == "" {
				t.Errorf("error %+v, want type %s", e, tc.typ)
			}
		})
	}
}

func mustNew(t testing.TB, cfg Config) *Fleet {
	t.Helper()
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
