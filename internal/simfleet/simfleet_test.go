package simfleet_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

func TestDefaultAlias(t *testing.T) {
	cases := []struct {
		name  string
		drop  string // a model removed from DefaultConfig
		alias []string
	}{
		{name: "default fleet", alias: []string{"sim-sonnet", "sim-opus", "sim-haiku"}},
		{name: "without sim-opus", drop: "sim-opus"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sim.DefaultConfig()
			c.Models = slices.DeleteFunc(c.Models, func(m sim.ModelSpec) bool { return m.Name == tc.drop })
			f, err := sim.New(c)
			if err != nil {
				t.Fatal(err)
			}
			cfg := simfleet.Config(f, "http://sim.invalid")
			a := cfg.Alias(simfleet.DefaultAlias)
			switch {
			case tc.alias == nil && a != nil:
				t.Errorf("alias %+v, want none", a)
			case tc.alias != nil && (a == nil || !slices.Equal(a.Models, tc.alias) || a.Strategy != "ordered"):
				t.Errorf("alias %+v, want ordered over %v", a, tc.alias)
			}
			m, err := keel.New(cfg, keel.WithUpstream(f.Transport()))
			if err != nil {
				t.Fatalf("keel.New: %v", err)
			}
			m.Close()
		})
	}
}

// Through the default fleet's config, GET /v1/models lists sim-default, and
// a call to it while sim-sonnet is overloaded in every region is served by
// sim-opus, the headers saying so.
func TestDefaultAliasFallsBackAcrossModels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := sim.New(sim.ZeroLatency())
		if err != nil {
			t.Fatal(err)
		}
		m, err := keel.New(simfleet.Config(f, "http://sim.invalid"), keel.WithUpstream(f.Transport()))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		h := m.Handler()

		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/models", nil))
		var list struct{ Data []struct{ ID string } }
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
			t.Fatalf("%v: %s", err, rec.Body)
		}
		if !slices.ContainsFunc(list.Data, func(d struct{ ID string }) bool { return d.ID == simfleet.DefaultAlias }) {
			t.Errorf("GET /v1/models = %s, want %s listed", rec.Body, simfleet.DefaultAlias)
		}

		call := func() *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(`{"model":"sim-default","max_tokens":16,"messages":[{"role":"user","content":"Hello"}]}`))
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("content-type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		if rec := call(); rec.Code != http.StatusOK || rec.Header().Get("X-Mesh-Model") != "sim-sonnet" || rec.Header().Get("X-Mesh-Fallback") != "" {
			t.Errorf("healthy: %d, X-Mesh-Model %q, X-Mesh-Fallback %q; want 200 from sim-sonnet without fallback",
				rec.Code, rec.Header().Get("X-Mesh-Model"), rec.Header().Get("X-Mesh-Fallback"))
		}
		f.SetFaults([]sim.Fault{{Kind: sim.KindOverloaded, Model: "sim-sonnet"}})
		if rec := call(); rec.Code != http.StatusOK || rec.Header().Get("X-Mesh-Model") != "sim-opus" || rec.Header().Get("X-Mesh-Fallback") == "" {
			t.Errorf("sim-sonnet overloaded: %d, X-Mesh-Model %q, X-Mesh-Fallback %q; want 200 from sim-opus with a fallback reason\n%s",
				rec.Code, rec.Header().Get("X-Mesh-Model"), rec.Header().Get("X-Mesh-Fallback"), rec.Body)
		}
	})
}

// TestAddEmbeddings: the embedding model in every region of the fleet, a
// valid config, served through a mesh; declared once however often added.
func TestAddEmbeddings(t *testing.T) {
	f, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	cfg := simfleet.Config(f, "http://sim.test")
	simfleet.AddEmbeddings(cfg, f, "http://sim.test")
	simfleet.AddEmbeddings(cfg, f, "http://sim.test")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range cfg.Models {
		if m.Name == simfleet.EmbeddingModel {
			n++
			if len(m.Endpoints) != len(f.Regions()) {
				t.Errorf("%d endpoints, want one per region (%d)", len(m.Endpoints), len(f.Regions()))
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d embedding models, want 1", n)
	}
	m, err := keel.New(cfg, keel.WithUpstream(f.Transport()))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/embeddings", "application/json", strings.NewReader(`{"model":"text-embedding-3-small","input":"hello","dimensions":4}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []struct{ Embedding []float32 }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Data) != 1 {
		t.Fatalf("%d %+v %v", resp.StatusCode, out, err)
	}
	if !slices.Equal(out.Data[0].Embedding, sim.Embed("hello", 4)) {
		t.Errorf("vector %v, want %v", out.Data[0].Embedding, sim.Embed("hello", 4))
	}
}
