package llm

import (
	"net/http"
	"testing"
)

// TestHeaderValueIsGet: HeaderValue answers as http.Header.Get for a
// canonical name, whatever case the sender used.
func TestHeaderValueIsGet(t *testing.T) {
	names := []string{"X-Mesh-Session", "X-Mesh-Rollout-Key", "Anthropic-Version", "Content-Length", "Upgrade"}
	for _, h := range []http.Header{
		nil,
		{},
		{"X-Mesh-Session": {"s1", "s2"}, "Anthropic-Version": {""}, "Content-Length": {"12"}},
		{"x-mesh-session": {"s1"}, "upgrade": {"h2c"}}, // set in the map as sent: Get does not see them either
		{"Upgrade": {"websocket"}, "X-Mesh-Rollout-Key": {"k"}},
	} {
		for _, n := range names {
			if c := http.CanonicalHeaderKey(n); c != n {
				t.Fatalf("%q is not canonical (%q)", n, c)
			}
			if got, want := HeaderValue(h, n), h.Get(n); got != want {
				t.Errorf("HeaderValue(%v, %q) = %q, Get = %q", h, n, got, want)
			}
		}
	}
}
