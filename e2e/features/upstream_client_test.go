package features_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// TestUpstreamHTTPClient: plain-http upstreams get the lean client by
// default (it sends no User-Agent of its own) and net/http's Transport with
// http_client: standard (it sends Go-http-client/1.1); answers are the same.
func TestUpstreamHTTPClient(t *testing.T) {
	for _, tc := range []struct{ client, wantUA string }{
		{"", ""},
		{"lean", ""},
		{"standard", "Go-http-client/1.1"},
	} {
		t.Run("client="+tc.client, func(t *testing.T) {
			fleet, err := sim.New(sim.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var agents []string
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				agents = append(agents, r.Header.Get("User-Agent"))
				mu.Unlock()
				fleet.Handler().ServeHTTP(w, r)
			}))
			defer up.Close()
			cfg := simfleet.Config(fleet, up.URL)
			cfg.Providers[0].HTTPClient = tc.client
			off := false
			cfg.RequestLog.Enabled = &off
			m, err := keel.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			proxy := httptest.NewServer(m.Handler())
			defer proxy.Close()
			for range 3 {
				resp, body := doRaw(t, proxy.URL+"/v1/messages", http.MethodPost,
					`{"model":"sim-haiku","max_tokens":8,"messages":[{"role":"user","content":"hello"}]}`,
					"anthropic-version", "2023-06-01", "content-type", "application/json")
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(agents) < 3 {
				t.Fatalf("upstream saw %d calls", len(agents))
			}
			for _, ua := range agents {
				if ua != tc.wantUA {
					t.Fatalf("upstream User-Agent %q, want %q (client %q)", ua, tc.wantUA, tc.client)
				}
			}
		})
	}
}
