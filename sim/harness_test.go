package sim

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// harness reaches a fleet either over real HTTP or through Transport.
type harness struct {
	name   string
	f      *Fleet
	client *http.Client
	root   string
}

// harnesses returns one harness per way of reaching a fleet built from cfg.
func harnesses(t *testing.T, cfg Config) []harness {
	t.Helper()
	f, srv := startFleet(t, cfg)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	mem, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return []harness{
		{name: "http", f: f, client: &http.Client{Transport: tr}, root: srv.URL()},
		{name: "transport", f: mem, client: &http.Client{Transport: mem.Transport()}, root: "http://" + TransportHost},
	}
}

func memHarness(f *Fleet) harness {
	return harness{name: "transport", f: f, client: &http.Client{Transport: f.Transport()}, root: "http://" + TransportHost}
}

func apiPath(format Format) string {
	if format == FormatOpenAI {
		return "/v1/chat/completions"
	}
	return "/v1/messages"
}

func (h harness) post(ctx context.Context, format Format, region, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL(h.root, region, FormatAnthropic)+apiPath(format), strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if format == FormatAnthropic {
		req.Header.Set("Anthropic-Version", "2026-10-21")
	}
	return h.client.Do(req)
}

func (h harness) do(ctx context.Context, method, path, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, h.root+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// chatBody is a one-turn request in format; extra is appended to the
// top-level object (it must start with a comma).
func chatBody(format Format, model, text string, stream bool, extra string) string {
	s := `{"model":"` + model + `","messages":[{"role":"user","content":"` + text + `"}]`
	if format == FormatAnthropic {
		s += `,"max_tokens":1024`
	}
	if stream {
		s += `,"stream":true`
		if format == FormatOpenAI {
			s += `,"stream_options":{"include_usage":true}`
		}
	}
	return s + extra + "}"
}

// streamResult is what a client read from a stream.
type streamResult struct {
	text   string
	input  string // tool input deltas, concatenated
	deltas int
	errEv  *llm.APIError
	stop   llm.StopReason
	usage  *llm.Usage
	err    error // nil after a clean end
}

type eventReader interface{ Next() (*llm.Event, error) }

func newEventReader(format Format, r io.Reader) eventReader {
	if format == FormatOpenAI {
		return openai.NewStreamReader(r)
	}
	return anthropic.NewStreamReader(r)
}

// readStream reads events until the end of the stream or until after
// stopAfter deltas (stopAfter < 0: no limit).
func readStream(format Format, er eventReader, stopAfter int) streamResult {
	var res streamResult
	for stopAfter < 0 || res.deltas < stopAfter {
		ev, err := er.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				res.err = err
			}
			return res
		}
		switch ev.Type {
		case llm.EventBlockDelta:
			if ev.Delta == "" {
				continue
			}
			res.deltas++
			if ev.DeltaType == llm.DeltaInputJSON {
				res.input += ev.Delta
			} else {
				res.text += ev.Delta
			}
		case llm.EventError:
			res.errEv = ev.Err
		case llm.EventMessageDelta:
			res.stop, res.usage = ev.StopReason, ev.Usage
		}
	}
	return res
}

func parseError(format Format, resp *http.Response) *llm.APIError {
	b, _ := io.ReadAll(resp.Body)
	if format == FormatOpenAI {
		return openai.ParseError(resp.StatusCode, resp.Header, b)
	}
	return anthropic.ParseError(resp.StatusCode, resp.Header, b)
}

var formats = []Format{FormatAnthropic, FormatOpenAI}
