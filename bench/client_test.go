package bench

import "github.com/keelmesh/keel/internal/llm"

// requestBody encodes call number seq of r in format f.
func requestBody(r *Request, f llm.Format, seq uint64) []byte {
	t := newBodyTemplate(r, f)
	return t.appendBody(nil, seq)
}
