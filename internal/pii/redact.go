package pii

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// Redaction is one call's reversible placeholders: each distinct value of a
// kind gets [KIND_n], n counting from 1 per kind in order of first sight, so
// the same value is the same placeholder everywhere in the call and the model
// can refer to it. Restore puts the values back. A Redaction is used by one
// goroutine while the request is redacted; after that Restore, RestoreJSON
// and NewRestorer only read it and are safe for concurrent use.
type Redaction struct {
	byValue map[string]string // kind + "\x00" + value → placeholder
	values  map[string]string // placeholder → value
	counts  map[Kind]int
	maxLen  int
	// reserved are placeholder-shaped texts already in the request
	// (Reserve): never issued, so never restored.
	reserved map[string]bool
}

// NewRedaction returns an empty Redaction.
func NewRedaction() *Redaction {
	return &Redaction{byValue: map[string]string{}, values: map[string]string{}, counts: map[Kind]int{}, reserved: map[string]bool{}}
}

// placeholderShape is the shape of a placeholder: [KIND_n].
var placeholderShape = regexp.MustCompile(`\[[A-Z][A-Z0-9_]*_[0-9]+\]`)

// Reserve marks every placeholder-shaped text of text (one the user wrote,
// such as a template's "[EMAIL_1]") as taken: Placeholder skips it, so the
// answer never has the user's own text restored to a value. Call it on
// every text before the first Placeholder.
func (r *Redaction) Reserve(text string) {
	if !strings.Contains(text, "[") {
		return
	}
	for _, p := range placeholderShape.FindAllString(text, -1) {
		r.reserved[p] = true
	}
}

// Placeholder returns value's placeholder, issuing the next one of its kind
// the first time value is seen.
func (r *Redaction) Placeholder(k Kind, value string) string {
	key := string(k) + "\x00" + value
	if p, ok := r.byValue[key]; ok {
		return p
	}
	var p string
	for {
		r.counts[k]++
		p = "[" + string(k) + "_" + strconv.Itoa(r.counts[k]) + "]"
		if !r.reserved[p] {
			break
		}
	}
	r.byValue[key], r.values[p] = p, value
	r.maxLen = max(r.maxLen, len(p))
	return p
}

// Len is the number of placeholders issued.
func (r *Redaction) Len() int { return len(r.values) }

// Mask is the irreversible stand-in of a value of kind k: [KIND].
func Mask(k Kind) string { return "[" + string(k) + "]" }

// Replace returns text with each match replaced by repl(match's kind, its
// value). ms must be sorted and non-overlapping, as Find returns them.
func Replace(text string, ms []Match, repl func(k Kind, value string) string) string {
	if len(ms) == 0 {
		return text
	}
	var sb strings.Builder
	sb.Grow(len(text))
	at := 0
	for _, m := range ms {
		sb.WriteString(text[at:m.Start])
		sb.WriteString(repl(m.Kind, text[m.Start:m.End]))
		at = m.End
	}
	sb.WriteString(text[at:])
	return sb.String()
}

// Restore returns s with every placeholder of r replaced by its value.
func (r *Redaction) Restore(s string) string {
	if len(r.values) == 0 || !strings.Contains(s, "[") {
		return s
	}
	return r.replacer(false).Replace(s)
}

// RestoreJSON returns s, JSON text, with every placeholder replaced by its
// value escaped for a JSON string (placeholders stand inside strings).
func (r *Redaction) RestoreJSON(s string) string {
	if len(r.values) == 0 || !strings.Contains(s, "[") {
		return s
	}
	return r.replacer(true).Replace(s)
}

func (r *Redaction) replacer(escape bool) *strings.Replacer {
	pairs := make([]string, 0, 2*len(r.values))
	for p, v := range r.values {
		if escape {
			v = jsonEscape(v)
		}
		pairs = append(pairs, p, v)
	}
	return strings.NewReplacer(pairs...)
}

// jsonEscape is v as the inside of a JSON string literal.
func jsonEscape(v string) string {
	b, _ := json.Marshal(v) // a string always marshals
	return string(b[1 : len(b)-1])
}

// RestoreMode says how a Restorer writes values.
type RestoreMode uint8

const (
	// RestoreAuto decides at the first non-space byte of the text: JSON
	// when it is '{', plain text otherwise.
	RestoreAuto RestoreMode = iota
	// RestoreText writes values as they are.
	RestoreText
	// RestoreJSONText writes values escaped for a JSON string.
	RestoreJSONText
)

// NewRestorer returns a streaming restorer over one block of text: Write
// takes each delta and returns the restored text ready to send, holding back
// only a tail that may begin a placeholder of r (so at most the longest
// placeholder's length less one byte); Flush returns what is held at the
// block's end. A Restorer is used by one goroutine.
func (r *Redaction) NewRestorer(mode RestoreMode) *Restorer {
	return &Restorer{r: r, mode: mode}
}

// Restorer restores placeholders in a text that arrives in pieces.
type Restorer struct {
	r    *Redaction
	mode RestoreMode
	held string
}

// Held is the text held back, waiting for the next delta.
func (s *Restorer) Held() string { return s.held }

// Write takes the next delta and returns the text that can be sent now.
func (s *Restorer) Write(delta string) string {
	if s.mode == RestoreAuto {
		if t := strings.TrimLeft(delta, " \t\r\n"); t != "" {
			s.mode = RestoreText
			if t[0] == '{' {
				s.mode = RestoreJSONText
			}
		}
	}
	if s.held == "" && !strings.Contains(delta, "[") {
		return delta
	}
	in := s.held + delta
	s.held = ""
	var sb strings.Builder
	at := 0
	for {
		i := strings.IndexByte(in[at:], '[')
		if i < 0 {
			sb.WriteString(in[at:])
			return sb.String()
		}
		i += at
		sb.WriteString(in[at:i])
		rest := in[i:]
		if p, v, ok := s.r.complete(rest); ok {
			if s.mode == RestoreJSONText {
				v = jsonEscape(v)
			}
			sb.WriteString(v)
			at = i + len(p)
			continue
		}
		if s.r.prefix(rest) {
			s.held = rest
			return sb.String()
		}
		sb.WriteByte('[')
		at = i + 1
	}
}

// Flush returns the held text, as it is: the block ended without
// completing a placeholder.
func (s *Restorer) Flush() string {
	h := s.held
	s.held = ""
	return h
}

// complete reports the placeholder rest starts with, if any.
func (r *Redaction) complete(rest string) (p, v string, ok bool) {
	end := strings.IndexByte(rest, ']')
	if end < 0 || end+1 > r.maxLen {
		return "", "", false
	}
	p = rest[:end+1]
	v, ok = r.values[p]
	return p, v, ok
}

// prefix reports whether rest is a proper prefix of a placeholder of r.
func (r *Redaction) prefix(rest string) bool {
	if len(rest) >= r.maxLen {
		return false
	}
	for p := range r.values {
		if len(rest) < len(p) && strings.HasPrefix(p, rest) {
			return true
		}
	}
	return false
}
