package affinity

import (
	"net/http"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// TestHeaderValueIsGet: llm.HeaderValue answers as http.Header.Get for the
// session header, whatever case the client sent.
func TestHeaderValueIsGet(t *testing.T) {
	if c := http.CanonicalHeaderKey(SessionHeader); c != SessionHeader {
		t.Fatalf("%q is not canonical (%q): headerValue needs canonical names", SessionHeader, c)
	}
	for _, h := range []http.Header{
		nil,
		{},
		{"X-Mesh-Session": {"s1", "s2"}},
		{"X-Mesh-Session": {""}},
		{"x-mesh-session": {"s1"}}, // set in the map as sent: Get does not see it either
	} {
		if got, want := llm.HeaderValue(h, SessionHeader), h.Get(SessionHeader); got != want {
			t.Errorf("headerValue(%v) = %q, Get = %q", h, got, want)
		}
	}
}
