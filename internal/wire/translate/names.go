package translate

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/keelmesh/keel/internal/llm"
)

// Tool names both APIs accept: 1–64 of [a-zA-Z0-9_-] (OpenAI's rule; the
// Anthropic API accepts the same set).
const maxToolName = 64

// OpenAI rejects tool-call ids longer than 40 characters.
const maxOpenAIID = 40

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func validChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if !nameChar(s[i]) {
			return false
		}
	}
	return true
}

// shortHash is 8 hex digits of SHA-256(s): a stable suffix that keeps
// mapped names apart (the same input always maps the same way, so prompt
// caches upstream still hit).
func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// sanitize replaces characters outside [a-zA-Z0-9_-] with '_', keeps at
// most keep bytes and appends '_' and the hash of s.
func sanitize(s string, keep int) string {
	b := make([]byte, 0, keep+9)
	for i := 0; i < len(s) && len(b) < keep; i++ {
		c := s[i]
		if !nameChar(c) {
			c = '_'
		}
		b = append(b, c)
	}
	b = append(b, '_')
	return string(b) + shortHash(s)
}

// mapName returns the tool name to send: the client's when both APIs accept
// it, else a sanitised, truncated name with a hash suffix (55 + 1 + 8 = 64
// characters at most), remembered for RestoreName.
func (t *prep) mapName(name string) string {
	if name == "" || len(name) <= maxToolName && validChars(name) {
		return name
	}
	m := sanitize(name, maxToolName-9)
	if t.rep.names == nil {
		t.rep.names = make(map[string]string)
	}
	t.rep.names[m] = name
	return m
}

// mapID returns the tool-use id to send: Anthropic requires
// [a-zA-Z0-9_-]+, OpenAI at most 40 characters. Other ids are sanitised
// with a hash suffix and remembered for RestoreID. Empty ids stay empty.
func (t *prep) mapID(id string) string {
	if id == "" {
		return id
	}
	var m string
	switch {
	case t.target == llm.FormatAnthropic && !validChars(id):
		m = sanitize(id, len(id))
	case t.target.Family() == llm.FormatOpenAI && len(id) > maxOpenAIID:
		m = sanitize(id, maxOpenAIID-9)
	default:
		return id
	}
	if t.rep.ids == nil {
		t.rep.ids = make(map[string]string)
	}
	t.rep.ids[m] = id
	return m
}
