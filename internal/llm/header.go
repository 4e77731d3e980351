package llm

import "net/http"

// HeaderValue is h.Get(key) for a key already in canonical form (every
// constant header name on the request path): the map's lookup without
// Get's canonicalisation, which scans the name byte by byte on every call.
func HeaderValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
