package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/keelmesh/keel/internal/llm"
)

// frame encodes one eventstream message with the AWS SDK's encoder.
func frame(t testing.TB, headers map[string]string, payload []byte) []byte {
	t.Helper()
	var hs eventstream.Headers
	for _, k := range []string{":message-type", ":event-type", ":exception-type", ":error-code", ":error-message", ":content-type"} {
		if v, ok := headers[k]; ok {
			hs.Set(k, eventstream.StringValue(v))
		}
	}
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: hs, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func chunk(t testing.TB, event string) []byte {
	t.Helper()
	p := `{"bytes":"` + base64.StdEncoding.EncodeToString([]byte(event)) + `","p":"abcd"}`
	return frame(t, map[string]string{":message-type": "event", ":event-type": "chunk", ":content-type": "application/json"}, []byte(p))
}

func exception(t testing.TB, name, payload string) []byte {
	t.Helper()
	return frame(t, map[string]string{":message-type": "exception", ":exception-type": name, ":content-type": "application/json"}, []byte(payload))
}

var streamEvents = []string{
	`{"type":"message_start","message":{"id":"msg_bdrk_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`,
	`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":9,"outputTokenCount":3,"invocationLatency":120,"firstByteLatency":80}}`,
}

// streamCases are eventstream bodies and how reading them ends.
func streamCases(t testing.TB) []struct {
	name   string
	body   []byte
	text   string
	endErr string // "" for a clean io.EOF after message_stop
	errEv  string // the error event's message, when the stream ends with one
} {
	var whole, cutMid, exc []byte
	for _, e := range streamEvents {
		whole = append(whole, chunk(t, e)...)
	}
	for _, e := range streamEvents[:4] {
		exc = append(exc, chunk(t, e)...)
	}
	exc = append(exc, exception(t, "modelStreamErrorException", `{"message":"stream failed","originalStatusCode":529,"originalMessage":"Overloaded"}`)...)
	cutMid = whole[:len(whole)-7]
	corrupt := bytes.Clone(whole)
	corrupt[len(chunk(t, streamEvents[0]))+20] ^= 0xff
	other := append(frame(t, map[string]string{":message-type": "event", ":event-type": "metadata"}, []byte(`{}`)), whole...)
	return []struct {
		name   string
		body   []byte
		text   string
		endErr string
		errEv  string
	}{
		{"whole stream", whole, "Hello world", "", ""},
		{"unknown event types skipped", other, "Hello world", "", ""},
		{"exception frame mid-stream", exc, "Hello world", "", "ModelStreamErrorException: stream failed (model said 529: Overloaded)"},
		{"cut inside a frame", cutMid, "Hello world", "cut before message_stop", ""},
		{"corrupt frame", corrupt, "", "eventstream frame", ""},
		{"not eventstream", []byte("event: message_start\ndata: {}\n\n"), "", "eventstream frame", ""},
		{"chunk without bytes", frame(t, map[string]string{":message-type": "event", ":event-type": "chunk"}, []byte(`{"p":"x"}`)), "", `without "bytes"`, ""},
		{"empty body", nil, "", "cut before message_stop", ""},
	}
}

func TestStreamReader(t *testing.T) {
	for _, tc := range streamCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			r := NewStreamReader(bytes.NewReader(tc.body))
			var text strings.Builder
			var errEv *llm.APIError
			var err error
			for {
				var ev *llm.Event
				ev, err = r.Next()
				if err != nil {
					break
				}
				switch ev.Type {
				case llm.EventBlockDelta:
					text.WriteString(ev.Delta)
				case llm.EventError:
					errEv = ev.Err
				}
			}
			if text.String() != tc.text {
				t.Errorf("text %q, want %q", text.String(), tc.text)
			}
			switch {
			case tc.endErr == "" && err != io.EOF:
				t.Errorf("ended with %v, want io.EOF", err)
			case tc.endErr != "" && (err == io.EOF || !strings.Contains(err.Error(), tc.endErr)):
				t.Errorf("ended with %v, want an error containing %q", err, tc.endErr)
			}
			if tc.errEv != "" && (errEv == nil || errEv.Message != tc.errEv || errEv.Type != llm.ErrAPI) {
				t.Errorf("error event %+v, want api_error %q", errEv, tc.errEv)
			}
			var ae *llm.APIError
			if strings.Contains(tc.endErr, "frame") || strings.Contains(tc.endErr, "bytes") {
				if !errors.As(err, &ae) || ae.Status != 502 || ae.MeshCode != llm.MeshUpstreamProtocolFailed {
					t.Errorf("error %v: want a 502 MESH_UPSTREAM_PROTOCOL", err)
				}
			}
		})
	}
}

// TestStreamReaderReadError: a read error (the connection) is returned as
// it is, not as a protocol error.
func TestStreamReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := NewStreamReader(io.MultiReader(bytes.NewReader(chunk(t, streamEvents[0])[:10]), errReaderOf(boom)))
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the read error", err)
	}
}

type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

func errReaderOf(err error) io.Reader { return failing{err} }

var errorCases = []struct {
	name   string
	status int
	header http.Header
	body   string
	typ    llm.ErrorType
	raw    string
	msg    string
}{
	{"throttling", 429, http.Header{"X-Amzn-Errortype": {"ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"}}, `{"message":"Too many requests, please wait before trying again."}`, llm.ErrRateLimit, "ThrottlingException", "ThrottlingException: Too many requests, please wait before trying again."},
	{"model not ready", 429, http.Header{"X-Amzn-Errortype": {"ModelNotReadyException"}}, `{"message":"Model is not ready"}`, llm.ErrOverloaded, "ModelNotReadyException", "ModelNotReadyException: Model is not ready"},
	{"unavailable", 503, http.Header{"X-Amzn-Errortype": {"ServiceUnavailableException"}}, `{"message":"Bedrock is unable to process your request."}`, llm.ErrOverloaded, "ServiceUnavailableException", "ServiceUnavailableException: Bedrock is unable to process your request."},
	{"validation", 400, http.Header{"X-Amzn-Errortype": {"ValidationException"}}, `{"Message":"Malformed input request"}`, llm.ErrInvalidRequest, "ValidationException", "ValidationException: Malformed input request"},
	{"signature", 403, http.Header{"X-Amzn-Errortype": {"InvalidSignatureException"}}, `{"message":"The request signature we calculated does not match"}`, llm.ErrAuthentication, "InvalidSignatureException", "InvalidSignatureException: The request signature we calculated does not match"},
	{"type in body", 400, nil, `{"__type":"com.amazon.coral.validate#ValidationException","message":"bad"}`, llm.ErrInvalidRequest, "Com.amazon.coral.validate#ValidationException", "Com.amazon.coral.validate#ValidationException: bad"},
	{"anthropic shape relayed", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, llm.ErrOverloaded, "", "Overloaded"},
	{"not json", 502, nil, `<html>Bad Gateway</html>`, llm.ErrAPI, "", "<html>Bad Gateway</html>"},
	{"empty", 500, nil, ``, llm.ErrAPI, "", "Internal Server Error"},
}

func TestParseError(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			h.Set("X-Amzn-Requestid", "req-1")
			e := ParseError(tc.status, h, []byte(tc.body))
			if e.Status != tc.status || e.Type != tc.typ || e.RawType != tc.raw || e.Message != tc.msg {
				t.Errorf("got %d %s raw %q %q, want %d %s raw %q %q", e.Status, e.Type, e.RawType, e.Message, tc.status, tc.typ, tc.raw, tc.msg)
			}
			if e.RequestID != "req-1" {
				t.Errorf("request id %q", e.RequestID)
			}
		})
	}
}

func FuzzStreamReader(f *testing.F) {
	for _, tc := range streamCases(f) {
		f.Add(tc.body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := NewStreamReader(bytes.NewReader(body))
		for range 10_000 {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if ev.Type == llm.EventError && ev.Err == nil {
				t.Fatal("error event without its error")
			}
		}
		t.Fatal("reader did not end")
	})
}

func FuzzParseError(f *testing.F) {
	for _, tc := range errorCases {
		f.Add(tc.status, tc.header.Get("X-Amzn-Errortype"), []byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, status int, typ string, body []byte) {
		e := ParseError(status, http.Header{"X-Amzn-Errortype": {typ}}, body)
		if e == nil || e.Type == "" || e.Status != status {
			t.Fatalf("ParseError(%d, %q, %q) = %+v", status, typ, body, e)
		}
	})
}

func FuzzExceptionEvent(f *testing.F) {
	f.Add("modelStreamErrorException", []byte(`{"message":"x","originalStatusCode":529,"originalMessage":"y"}`))
	f.Add("", []byte(``))
	f.Add("throttlingException", []byte(`{"message":1}`))
	f.Fuzz(func(t *testing.T, name string, payload []byte) {
		ev := ExceptionEvent(name, payload)
		if !json.Valid(ev) || !bytes.HasPrefix(ev, []byte(`{"type":"error","error":{"type":"`)) {
			t.Fatalf("ExceptionEvent = %s", ev)
		}
	})
}
