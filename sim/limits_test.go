package sim

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// One message more than the wire's cap is a 400 in the wire's error format
// naming the limit: Anthropic's 100,000, OpenAI's 2,048, or the model's
// MaxMessages.
func TestSimMessageLimit(t *testing.T) {
	cases := []struct {
		name   string
		format Format
		max    int
		n      int
		msg    string
		param  string
		code   string
	}{
		{"anthropic", FormatAnthropic, 0, 100_001, "messages: List should have at most 100000 items after validation, not 100001", "", ""},
		{"openai", FormatOpenAI, 0, 2049,
			"Invalid 'messages': array too long. Expected an array with maximum length 2048, but got an array with length 2049 instead.", "messages", "array_above_max_length"},
		{"anthropic model cap", FormatAnthropic, 10, 11, "messages: List should have at most 10 items after validation, not 11", "", ""},
		{"openai model cap", FormatOpenAI, 10, 11,
			"Invalid 'messages': array too long. Expected an array with maximum length 10, but got an array with length 11 instead.", "messages", "array_above_max_length"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(withMaxMessages(ZeroLatency(), tc.max))
			if err != nil {
				t.Fatal(err)
			}
			status, _, ae := postText(t, memHarness(f), tc.format, manyMessagesBody(tc.format, "sim-sonnet", tc.n))
			if status != http.StatusBadRequest || ae == nil {
				t.Fatalf("status %d, want 400", status)
			}
			if ae.Type != llm.ErrInvalidRequest || ae.Message != tc.msg || ae.Param != tc.param || ae.Code != tc.code {
				t.Errorf("error (type, message, param, code) = (%s, %q, %q, %q), want (invalid_request_error, %q, %q, %q)",
					ae.Type, ae.Message, ae.Param, ae.Code, tc.msg, tc.param, tc.code)
			}
			if st := f.Stats().Total; st.InFlight != 0 || st.InputTokens != 0 {
				t.Errorf("stats = %+v: the call was served", st)
			}
		})
	}
}

func TestSimMaxMessagesValidate(t *testing.T) {
	cfg := withMaxMessages(ZeroLatency(), -1)
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), ".max_messages: -1 is negative") {
		t.Errorf("Validate = %v, want a max_messages error", err)
	}
}

// A body over 32 MiB is a 413 request_too_large, refused before reading
// when its Content-Length says so, and after reading one byte past the
// limit when it does not (chunked).
func TestSimBodyTooLarge(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	h := memHarness(f)
	big := strings.Repeat(" ", maxBodyBytes+1)
	for _, format := range formats {
		for _, chunked := range []bool{false, true} {
			name := format.String() + map[bool]string{false: " content-length", true: " chunked"}[chunked]
			t.Run(name, func(t *testing.T) {
				body := &countingReader{r: strings.NewReader(big)}
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, h.root+apiPath(format), body)
				if err != nil {
					t.Fatal(err)
				}
				if !chunked {
					req.ContentLength = int64(len(big))
				}
				resp, err := h.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				ae := parseError(format, resp)
				if resp.StatusCode != http.StatusRequestEntityTooLarge || ae.Type != llm.ErrTooLarge || ae.Message != tooLargeMessage {
					t.Errorf("got %d %s %q, want 413 request_too_large %q", resp.StatusCode, ae.Type, ae.Message, tooLargeMessage)
				}
				if want := map[bool]int{false: 0, true: maxBodyBytes + 1}[chunked]; body.n != want {
					t.Errorf("the fleet read %d bytes, want %d", body.n, want)
				}
			})
		}
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A Content-Length larger than what arrives does not size the buffer: it
// starts at most readChunk bytes and grows with the bytes read (doubling).
func TestReadBodyBufferFollowsArrivals(t *testing.T) {
	cases := []struct {
		name     string
		declared int64
		body     int
		maxCap   int
	}{
		{"claims 32 MiB, sends 10 bytes", maxBodyBytes, 10, readChunk},
		{"claims 1 MiB, sends 100 KiB", 1 << 20, 100 << 10, 256 << 10},
		{"exact length", 300 << 10, 300 << 10, 2 * (300 << 10)}, // append's size classes round up
		{"small exact length", 100, 100, 512},
		{"no length", -1, 5000, 8 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{ContentLength: tc.declared, Body: io.NopCloser(&oneByteAtATime{strings.NewReader(strings.Repeat("x", tc.body))})}
			buf, err := readBody(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(buf) != tc.body {
				t.Errorf("read %d bytes, want %d", len(buf), tc.body)
			}
			if cap(buf) > tc.maxCap {
				t.Errorf("buffer capacity %d for %d bytes read (declared %d), want at most %d", cap(buf), tc.body, tc.declared, tc.maxCap)
			}
		})
	}
}

// oneByteAtATime delivers a body in 1-byte reads, like a slow client.
type oneByteAtATime struct{ r io.Reader }

func (o *oneByteAtATime) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}
