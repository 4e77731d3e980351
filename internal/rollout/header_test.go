package rollout

import (
	"net/http"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// TestHeaderValueIsGet: llm.HeaderValue answers as http.Header.Get for the
// rollout key's header, whatever case the client sent.
func TestHeaderValueIsGet(t *testing.T) {
	if c := http.CanonicalHeaderKey(KeyHeader); c != KeyHeader {
		t.Fatalf("%q is not canonical (%q): headerValue needs canonical names", KeyHeader, c)
	}
	for _, h := range []http.Header{
		nil,
		{},
		{"X-Mesh-Rollout-Key": {"k1", "k2"}},
		{"X-Mesh-Rollout-Key": {""}},
		{"x-mesh-rollout-key": {"k1"}}, // set in the map as sent: Get does not see it either
	} {
		if got, want := llm.HeaderValue(h, KeyHeader), h.Get(KeyHeader); got != want {
			t.Errorf("headerValue(%v) = %q, Get = %q", h, got, want)
		}
	}
}
