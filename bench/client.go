package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// Error kinds counted in TargetResult.ErrorsByKind besides "status_NNN"
// (an HTTP error without a mesh code) and the MESH_* codes (an error Keel
// decided, read from the body's mesh_error_code).
const (
	KindTransport       = "transport"        // connection refused or reset, before a status
	KindTimeout         = "timeout"          // no complete answer within Options.Timeout
	KindStreamError     = "stream_error"     // the wire's error event inside a 200 stream
	KindStreamCut       = "stream_cut"       // a stream that ended without the wire's terminator
	KindInvalidJSON     = "invalid_json"     // asked for JSON, got an answer that does not parse
	KindInvalidResponse = "invalid_response" // a 200 whose body is not the wire's answer
)

// jsonSchema is the schema a JSON-mode request asks for.
const jsonSchema = `{"type":"object","properties":{"risk_level":{"type":"string","enum":["low","medium","high"]},` +
	`"mitigation_steps":{"type":"array","items":{"type":"string"}},"confidence_score":{"type":"number","minimum":0,"maximum":1}},` +
	`"required":["risk_level","mitigation_steps","confidence_score"]}`

// endpointPath returns the API URL of a target base for format f: a base
// that already names the API path is used as is, one ending in /v1 gets the
// path's tail, anything else gets the whole path.
func endpointPath(base string, f llm.Format) string {
	base = strings.TrimRight(base, "/")
	tail := "/v1/messages"
	if f == llm.FormatOpenAI {
		tail = "/v1/chat/completions"
	}
	switch {
	case strings.HasSuffix(base, "/v1/messages"), strings.HasSuffix(base, "/v1/chat/completions"):
		return base
	case strings.HasSuffix(base, "/v1"):
		return base + strings.TrimPrefix(tail, "/v1")
	}
	return base + tail
}

// requestBody encodes call number seq of r in format f.
func requestBody(r *Request, f llm.Format, seq uint64) []byte {
	prompt, _ := json.Marshal(r.Prompt + " (request " + strconv.FormatUint(seq, 10) + ")")
	var b bytes.Buffer
	b.WriteString(`{"model":`)
	model, _ := json.Marshal(r.Model)
	b.Write(model)
	b.WriteString(`,"max_tokens":`)
	b.WriteString(strconv.Itoa(r.MaxTokens))
	b.WriteString(`,"messages":[{"role":"user","content":`)
	b.Write(prompt)
	b.WriteString(`}]`)
	if r.Stream {
		b.WriteString(`,"stream":true`)
		if f == llm.FormatOpenAI {
			b.WriteString(`,"stream_options":{"include_usage":true}`)
		}
	}
	if r.JSON {
		if f == llm.FormatOpenAI {
			b.WriteString(`,"response_format":{"type":"json_object"}`)
		} else {
			b.WriteString(`,"output_format":{"type":"json_schema","schema":` + jsonSchema + `}`)
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// outcome is what one call produced.
type outcome struct {
	kind  string // "" on success
	ttft  time.Duration
	usage llm.Usage
	// answered is true when the upstream produced a complete answer (which
	// it bills), even if the answer was invalid JSON.
	answered bool
}

// caller sends calls of one format to one URL.
type caller struct {
	client *http.Client
	url    string
	format llm.Format
	req    *Request
}

// call sends call number seq and classifies the answer. TTFT is measured
// from intended (the time the call was due) to the first content delta.
func (c *caller) call(ctx context.Context, seq uint64, intended time.Time) outcome {
	body := requestBody(c.req, c.format, seq)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return outcome{kind: KindTransport}
	}
	hr.Header["Content-Type"] = []string{"application/json"}
	if c.format == llm.FormatAnthropic {
		hr.Header["Anthropic-Version"] = []string{"2023-06-01"}
		hr.Header["X-Api-Key"] = []string{"keel-bench"}
	} else {
		hr.Header["Authorization"] = []string{"Bearer keel-bench"}
	}
	resp, err := c.client.Do(hr)
	if err != nil {
		return outcome{kind: transportKind(ctx, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var ae *llm.APIError
		if c.format == llm.FormatOpenAI {
			ae = openai.ParseError(resp.StatusCode, resp.Header, b)
		} else {
			ae = anthropic.ParseError(resp.StatusCode, resp.Header, b)
		}
		if ae.MeshCode != "" {
			return outcome{kind: ae.MeshCode}
		}
		return outcome{kind: "status_" + strconv.Itoa(resp.StatusCode)}
	}
	if c.req.Stream {
		return c.readStream(ctx, resp.Body, intended)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return outcome{kind: transportKind(ctx, err)}
	}
	var r *llm.Response
	if c.format == llm.FormatOpenAI {
		r, err = openai.ParseResponse(b)
	} else {
		r, err = anthropic.ParseResponse(b)
	}
	if err != nil {
		return outcome{kind: KindInvalidResponse}
	}
	o := outcome{usage: r.Usage, answered: true}
	if c.req.JSON && !validJSON(r.Text()) {
		o.kind = KindInvalidJSON
	}
	return o
}

// readStream reads a 200 stream to its end.
func (c *caller) readStream(ctx context.Context, body io.Reader, intended time.Time) outcome {
	var next func() (*llm.Event, error)
	if c.format == llm.FormatOpenAI {
		next = openai.NewStreamReader(body).Next
	} else {
		next = anthropic.NewStreamReader(body).Next
	}
	var o outcome
	var text strings.Builder
	for {
		ev, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			switch {
			case ctx.Err() != nil:
				o.kind = KindTimeout
			case errors.Is(err, io.ErrUnexpectedEOF):
				o.kind = KindStreamCut
			default:
				var ae *llm.APIError
				if errors.As(err, &ae) {
					o.kind = KindInvalidResponse
				} else {
					o.kind = KindTransport
				}
			}
			return o
		}
		switch ev.Type {
		case llm.EventMessageStart:
			if ev.Message != nil {
				o.usage = ev.Message.Usage
			}
		case llm.EventBlockDelta:
			if o.ttft == 0 {
				o.ttft = time.Since(intended)
			}
			if ev.DeltaType == llm.DeltaText {
				text.WriteString(ev.Delta)
			}
		case llm.EventMessageDelta:
			if u := ev.Usage; u != nil {
				if u.InputTokens != 0 {
					o.usage.InputTokens = u.InputTokens
				}
				o.usage.OutputTokens = u.OutputTokens
			}
		case llm.EventError:
			o.kind = KindStreamError
			return o
		}
	}
	o.answered = true
	if c.req.JSON && !validJSON(text.String()) {
		o.kind = KindInvalidJSON
	}
	return o
}

// validJSON reports whether an answer is one JSON value (surrounding
// whitespace allowed, nothing else).
func validJSON(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && json.Valid([]byte(s))
}

// transportKind classifies an error that came before or instead of a
// complete answer.
func transportKind(ctx context.Context, err error) string {
	var ne net.Error
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return KindTimeout
	}
	return KindTransport
}

// checkReachable dials the host of a target URL, so an unreachable target
// fails before the run rather than as a run full of transport errors.
func checkReachable(ctx context.Context, rawURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fmt.Errorf("invalid URL %q", rawURL)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("invalid URL %q (want http:// or https://)", rawURL)
	}
	host := req.URL.Host
	if req.URL.Port() == "" {
		port := "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(req.URL.Hostname(), port)
	}
	d := net.Dialer{Timeout: 3 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("unreachable: %w", unwrapOp(err))
	}
	conn.Close()
	return nil
}

// unwrapOp shortens "dial tcp 127.0.0.1:1: connect: connection refused" to
// its cause.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return fmt.Errorf("%s %s: %w", oe.Op, oe.Addr, oe.Err)
	}
	return err
}
