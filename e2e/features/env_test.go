package features_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a simulator on a real socket, a mesh in front of it (upstream
// attempts recorded), and the mesh's proxy handler on a real socket.
type env struct {
	simCfg sim.Config
	fleet  *sim.Fleet
	simSrv *sim.Server
	mesh   *keel.Mesh
	proxy  *httptest.Server
	rec    *recorder
}

func newEnv(t *testing.T, simCfg sim.Config, tweaks ...func(*config.Config)) *env {
	t.Helper()
	fleet, err := sim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fleet.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Keel's own upstream transport: the lean HTTP/1.1 client for the
	// simulator's plain-http socket.
	up := provider.NewUpstreamTransport(provider.TransportOptions{})
	rec := &recorder{next: up}
	cfg := simfleet.Config(fleet, srv.URL())
	cfg.Providers[0].APIKey = "sk-ant-upstream-secret"
	off := false
	cfg.RequestLog.Enabled = &off
	for _, tw := range tweaks {
		tw(cfg)
	}
	m, err := keel.New(cfg, keel.WithUpstream(rec))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(m.Handler())
	t.Cleanup(func() {
		proxy.Close()
		m.Close()
		up.CloseIdleConnections()
		srv.Close()
	})
	return &env{simCfg: simCfg, fleet: fleet, simSrv: srv, mesh: m, proxy: proxy, rec: rec}
}

// recorder keeps the headers of every upstream attempt.
type recorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	reqs  []http.Header
	paths []string // the URL path of each attempt
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Header.Clone())
	r.paths = append(r.paths, req.URL.Path)
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

func (r *recorder) last() http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		return nil
	}
	return r.reqs[len(r.reqs)-1]
}

// countPath counts the attempts sent to path.
func (r *recorder) countPath(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.paths {
		if p == path {
			n++
		}
	}
	return n
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// post sends a raw request to the proxy.
func (e *env) post(t *testing.T, path, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return doRaw(t, e.proxy.URL+path, http.MethodPost, body, hdr...)
}

func doRaw(t *testing.T, url, method, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, stringsReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func userText(model, text string, maxTokens int) *llm.Request {
	return &llm.Request{
		Model:        model,
		Messages:     []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}},
		MaxTokens:    maxTokens,
		HasMaxTokens: true,
	}
}
