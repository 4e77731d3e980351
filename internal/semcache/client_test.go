package semcache

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/keelmesh/keel/sim"
)

func TestClientEmbedsFromSimulator(t *testing.T) {
	f, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		f.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	c, err := NewClient(ClientConfig{BaseURL: srv.URL + "/v1/", APIKey: "sk-test", Model: "text-embedding-3-small", Dimensions: 256}, srv.Client().Transport)
	if err != nil {
		t.Fatal(err)
	}
	const text = "How do I reset my password?"
	v, err := c.Embed(context.Background(), text)
	if err != nil {
		t.Fatal(err)
	}
	want := sim.Embed(text, 256)
	if len(v) != len(want) {
		t.Fatalf("%d dimensions, want %d", len(v), len(want))
	}
	for i := range v {
		if v[i] != want[i] {
			t.Fatalf("[%d] = %v, want %v", i, v[i], want[i])
		}
	}
	if got.URL.Path != "/v1/embeddings" || got.Header.Get("Authorization") != "Bearer sk-test" || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %v", got.URL.Path, got.Header)
	}
}

func TestClientFailures(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"status 500", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			io.WriteString(w, `{"error":{"message":"boom"}}`)
		}},
		{"status 429", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(429) }},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>") }},
		{"no vector", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"data":[]}`) }},
		{"empty vector", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"data":[{"embedding":[]}]}`) }},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // net/http watches the connection only once the body is read
			<-r.Context().Done()        // until the client gives up
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c, err := NewClient(ClientConfig{BaseURL: srv.URL, Model: "m", Timeout: 50 * time.Millisecond}, srv.Client().Transport)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := c.Embed(context.Background(), "x"); !errors.Is(err, ErrEmbed) {
				t.Fatalf("Embed = %v, %v; want ErrEmbed", v, err)
			}
		})
	}
}

func TestNewClientValidates(t *testing.T) {
	for _, cfg := range []ClientConfig{
		{Model: "m"},
		{BaseURL: "ftp://x", Model: "m"},
		{BaseURL: "http://", Model: "m"},
		{BaseURL: "http://x"},
		{BaseURL: "http://x", Model: "m", Dimensions: -1},
		{BaseURL: "http://x", Model: "m", Timeout: -1},
	} {
		if _, err := NewClient(cfg, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("NewClient(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
}
