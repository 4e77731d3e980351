package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// recoveredMesh is a mesh in front of a simulator whose first stream is
// cut after two tokens, so that a streamed call is continued on a second
// attempt: its X-Mesh values at the end differ from those at the start.
// It records the region of every upstream POST; the last one served the
// end of the answer.
type recoveredMesh struct {
	mesh *keel.Mesh
	up   *regionRecorder
}

func newRecoveredMesh(t *testing.T) *recoveredMesh {
	t.Helper()
	simCfg := sim.ZeroLatency()
	simCfg.Faults = []sim.Fault{{Kind: sim.KindStreamCut, AfterTokens: 2, Count: 1}}
	fleet, err := sim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	up := &regionRecorder{next: fleet.Transport()}
	m, err := keel.New(simfleet.Config(fleet, "http://sim.test"), keel.WithUpstream(up))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return &recoveredMesh{mesh: m, up: up}
}

const streamBody = `{"model":"sim-sonnet","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"Name three rivers of Europe."}]}`

// want is what each X-Mesh trailer must say at the end of the recovered
// stream: two attempts, one continuation, served from the region of the
// last upstream call.
func (r *recoveredMesh) want(t *testing.T) map[string]string {
	t.Helper()
	regions := r.up.posts()
	if len(regions) != 2 {
		t.Fatalf("upstream calls to regions %v, want two (a cut stream and its continuation)", regions)
	}
	return map[string]string{
		"X-Mesh-Model":     "sim-sonnet",
		"X-Mesh-Region":    regions[1],
		"X-Mesh-Provider":  simfleet.AnthropicProvider,
		"X-Mesh-Attempts":  "2",
		"X-Mesh-Recovered": "1",
	}
}

// regionRecorder records the region of each upstream POST.
type regionRecorder struct {
	next    http.RoundTripper
	mu      sync.Mutex // guards following
	regions []string
}

func (r *regionRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost {
		region := ""
		if rest, ok := strings.CutPrefix(req.URL.Path, "/r/"); ok {
			region, _, _ = strings.Cut(rest, "/")
		}
		r.mu.Lock()
		r.regions = append(r.regions, region)
		r.mu.Unlock()
	}
	return r.next.RoundTrip(req)
}

func (r *regionRecorder) posts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.regions...)
}

// TestStreamTrailersSentOnceWithFinalValues reads a recovered stream's raw
// HTTP/1.1 bytes from `keel serve`'s handler: each X-Mesh trailer appears
// exactly once in the trailer section, with its value at the stream's end.
// Each used to be sent twice, the final value (set with http.TrailerPrefix)
// and then the value from before the stream (left under the declared
// name), so a client kept either "X-Mesh-Attempts: 2" or "1".
func TestStreamTrailersSentOnceWithFinalValues(t *testing.T) {
	r := newRecoveredMesh(t)
	ts := httptest.NewServer(r.mesh.Handler())
	defer ts.Close()

	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"+
		"Anthropic-Version: 2023-06-01\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(streamBody), streamBody)
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}

	br := bufio.NewReader(bytes.NewReader(raw))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response head: %v\n%s", err, raw)
	}
	if resp.StatusCode != http.StatusOK || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("status %d, transfer encoding %v; want a chunked 200", resp.StatusCode, resp.TransferEncoding)
	}
	// Read the chunks off the raw bytes (not resp.Body, which would merge
	// the trailer lines into a map and hide a repeated name).
	body, err := io.ReadAll(httputil.NewChunkedReader(br))
	if err != nil {
		t.Fatalf("reading chunks: %v", err)
	}
	if !bytes.Contains(body, []byte("event: message_stop")) {
		t.Fatalf("the stream did not finish cleanly:\n%s", body)
	}
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("trailer section not terminated: %q, %v", lines, err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		lines = append(lines, line)
	}

	count := map[string]int{}
	got := map[string]string{}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("malformed trailer line %q", l)
		}
		k = http.CanonicalHeaderKey(k)
		count[k]++
		got[k] = strings.TrimSpace(v)
	}
	for k, n := range count {
		if strings.HasPrefix(k, "X-Mesh-") && n != 1 {
			t.Errorf("trailer %s sent %d times; trailer section:\n%s", k, n, strings.Join(lines, "\n"))
		}
	}
	for k, v := range r.want(t) {
		if got[k] != v {
			t.Errorf("trailer %s = %q, want %q (the value at the stream's end)", k, got[k], v)
		}
	}
	// The header keeps the values known when the stream began.
	if got := resp.Header.Get("X-Mesh-Attempts"); got != "1" {
		t.Errorf("header X-Mesh-Attempts = %q, want 1", got)
	}
}

// TestEmbeddedStreamTrailersFinal: through the embedded client the same
// recovered stream's trailers hold one value each, the final one.
func TestEmbeddedStreamTrailersFinal(t *testing.T) {
	r := newRecoveredMesh(t)
	req, err := http.NewRequest("POST", "http://keel.test/v1/messages", strings.NewReader(streamBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := r.mesh.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Contains(body, []byte("event: message_stop")) {
		t.Fatalf("body %q, %v; want a clean stream", body, err)
	}
	for k, v := range r.want(t) {
		if got := resp.Trailer.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("trailer %s = %q, want [%q]", k, got, v)
		}
	}
	if n, _ := strconv.Atoi(resp.Header.Get("X-Mesh-Attempts")); n != 1 {
		t.Errorf("header X-Mesh-Attempts = %q, want 1", resp.Header.Get("X-Mesh-Attempts"))
	}
}
