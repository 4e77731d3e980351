package shadow

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Step is one step of a Path: an object member (Key, Index -1) or an
// array element (Index ≥ 0).
type Step struct {
	Key   string
	Index int
}

// Path locates a value in a JSON document: a.b[2].c.
type Path []Step

// String writes p as a.b[2].c; a key that is not a name (letters, digits,
// underscore, not starting with a digit) is written ["key"].
func (p Path) String() string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.Index >= 0:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.Index))
			b.WriteByte(']')
		case isName(s.Key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Key)
		default:
			q, _ := json.Marshal(s.Key)
			b.WriteByte('[')
			b.Write(q)
			b.WriteByte(']')
		}
	}
	return b.String()
}

func isName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

// Lookup returns the value at p in v, a decoded JSON value.
func (p Path) Lookup(v any) (any, bool) {
	for _, s := range p {
		if s.Index >= 0 {
			a, ok := v.([]any)
			if !ok || s.Index >= len(a) {
				return nil, false
			}
			v = a[s.Index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[s.Key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// Kind is how one field of the shadow's answer compares with the
// primary's.
type Kind string

// The kinds of FieldDiff.
const (
	// Equal: same value.
	Equal Kind = "equal"
	// NumericDelta: both numbers, different; Delta is shadow − primary.
	NumericDelta Kind = "numeric_delta"
	// Missing: the primary has the field, the shadow does not.
	Missing Kind = "missing"
	// Extra: the shadow has the field, the primary does not.
	Extra Kind = "extra"
	// TypeChange: both have it, with different JSON types (a number and a
	// string, an object and null …).
	TypeChange Kind = "type_change"
	// ValueChange: both strings (or both booleans), different.
	ValueChange Kind = "value_change"
)

// FieldDiff is one field's comparison.
type FieldDiff struct {
	Path  string  `json:"path"`
	Kind  Kind    `json:"kind"`
	Delta float64 `json:"delta,omitempty"`
	// Similarity is the text similarity of two different strings (see
	// Similarity); set for ValueChange between strings.
	Similarity float64 `json:"similarity,omitempty"`
}

// Comparison is the diff of two answers.
type Comparison struct {
	// JSON is set when both answers are JSON objects or arrays (a
	// ```json fence around either is ignored); Fields then holds every
	// leaf of either, sorted by path. Otherwise the answers are compared
	// as text and only Similarity is set.
	JSON   bool        `json:"json"`
	Fields []FieldDiff `json:"fields,omitempty"`
	// Similarity is, for text answers, their text similarity (1
	// identical, 0 nothing in common; see Similarity); for JSON answers,
	// the share of fields that are equal.
	Similarity float64 `json:"similarity"`
	// RulePrimary and RuleShadow are the decision rule's verdicts on each
	// answer (Undefined when there is no rule).
	RulePrimary Verdict `json:"rule_primary"`
	RuleShadow  Verdict `json:"rule_shadow"`
}

// Differ reports whether any field (or the text) differs.
func (c *Comparison) Differ() bool {
	if !c.JSON {
		return c.Similarity < 1
	}
	for _, f := range c.Fields {
		if f.Kind != Equal {
			return true
		}
	}
	return false
}

// maxFields bounds the fields one comparison lists; a larger document
// is compared up to there (its other fields are not reported).
const maxFields = 1024

// Compare diffs the shadow's answer against the primary's. rule may be nil.
func Compare(primary, shadow string, rule *Rule) *Comparison {
	c := &Comparison{RulePrimary: Undefined, RuleShadow: Undefined}
	pv, pok := decodeJSON(primary)
	sv, sok := decodeJSON(shadow)
	if rule != nil {
		if pok {
			c.RulePrimary = rule.Eval(pv)
		}
		if sok {
			c.RuleShadow = rule.Eval(sv)
		}
	}
	if !pok || !sok {
		c.Similarity = Similarity(primary, shadow)
		return c
	}
	c.JSON = true
	d := differ{}
	d.walk(nil, pv, sv, true, true)
	c.Fields = d.out
	slices.SortFunc(c.Fields, func(a, b FieldDiff) int { return strings.Compare(a.Path, b.Path) })
	equal := 0
	for _, f := range c.Fields {
		if f.Kind == Equal {
			equal++
		}
	}
	c.Similarity = 1
	if len(c.Fields) > 0 {
		c.Similarity = float64(equal) / float64(len(c.Fields))
	}
	return c
}

// decodeJSON decodes s as a JSON object or array, after trimming space
// and a Markdown code fence (```json … ```).
func decodeJSON(s string) (any, bool) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(s, "```")
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "```"))
	}
	if s == "" || s[0] != '{' && s[0] != '[' {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	return v, true
}

type differ struct {
	out []FieldDiff
}

func (d *differ) add(p Path, f FieldDiff) {
	if len(d.out) >= maxFields {
		return
	}
	f.Path = p.String()
	d.out = append(d.out, f)
}

// walk compares a (primary) and b (shadow) at p; hasA / hasB say whether
// each side has the field at all.
func (d *differ) walk(p Path, a, b any, hasA, hasB bool) {
	if len(d.out) >= maxFields {
		return
	}
	switch {
	case hasA && !hasB:
		d.leaves(p, a, Missing)
		return
	case !hasA && hasB:
		d.leaves(p, b, Extra)
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			d.add(p, FieldDiff{Kind: TypeChange})
			return
		}
		if len(av) == 0 && len(bv) == 0 {
			d.add(p, FieldDiff{Kind: Equal})
			return
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			x, okA := av[k]
			y, okB := bv[k]
			d.walk(append(p[:len(p):len(p)], Step{Key: k, Index: -1}), x, y, okA, okB)
		}
	case []any:
		bv, ok := b.([]any)
		if !ok {
			d.add(p, FieldDiff{Kind: TypeChange})
			return
		}
		if len(av) == 0 && len(bv) == 0 {
			d.add(p, FieldDiff{Kind: Equal})
			return
		}
		for i := range max(len(av), len(bv)) {
			var x, y any
			if i < len(av) {
				x = av[i]
			}
			if i < len(bv) {
				y = bv[i]
			}
			d.walk(append(p[:len(p):len(p)], Step{Index: i}), x, y, i < len(av), i < len(bv))
		}
	case json.Number:
		bv, ok := b.(json.Number)
		if !ok {
			d.add(p, FieldDiff{Kind: TypeChange})
			return
		}
		x, errA := av.Float64()
		y, errB := bv.Float64()
		switch {
		case av == bv || errA == nil && errB == nil && x == y:
			d.add(p, FieldDiff{Kind: Equal})
		case errA != nil || errB != nil || math.IsInf(y-x, 0):
			d.add(p, FieldDiff{Kind: ValueChange})
		default:
			d.add(p, FieldDiff{Kind: NumericDelta, Delta: y - x})
		}
	case string:
		bv, ok := b.(string)
		switch {
		case !ok:
			d.add(p, FieldDiff{Kind: TypeChange})
		case av == bv:
			d.add(p, FieldDiff{Kind: Equal})
		default:
			d.add(p, FieldDiff{Kind: ValueChange, Similarity: Similarity(av, bv)})
		}
	case bool:
		bv, ok := b.(bool)
		switch {
		case !ok:
			d.add(p, FieldDiff{Kind: TypeChange})
		case av == bv:
			d.add(p, FieldDiff{Kind: Equal})
		default:
			d.add(p, FieldDiff{Kind: ValueChange})
		}
	case nil:
		if b == nil {
			d.add(p, FieldDiff{Kind: Equal})
		} else {
			d.add(p, FieldDiff{Kind: TypeChange})
		}
	}
}

// leaves adds every leaf under v at p with kind k (a field only one side
// has).
func (d *differ) leaves(p Path, v any, k Kind) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			break
		}
		keys := make([]string, 0, len(x))
		for key := range x {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		for _, key := range keys {
			d.leaves(append(p[:len(p):len(p)], Step{Key: key, Index: -1}), x[key], k)
		}
		return
	case []any:
		if len(x) == 0 {
			break
		}
		for i, e := range x {
			d.leaves(append(p[:len(p):len(p)], Step{Index: i}), e, k)
		}
		return
	}
	d.add(p, FieldDiff{Kind: k})
}

// maxSimTokens bounds the tokens of each side Similarity compares (the
// dynamic programme is quadratic); tokens past it are compared by count
// only.
const maxSimTokens = 2000

// Similarity is 1 − the token-level Levenshtein distance between a and
// b over the longer one's token count: 1 for identical texts, 0 for texts
// with nothing in the same place. Tokens are runs of letters and digits,
// each CJK character, and single other non-space characters, compared
// case-sensitively. Two
// empty texts are identical. Each side is cut at 2,000 tokens; the rest
// counts as one edit per token of length difference.
func Similarity(a, b string) float64 {
	if a == b {
		return 1
	}
	ta, tb := tokens(a), tokens(b)
	n := max(len(ta), len(tb))
	if n == 0 {
		return 1
	}
	extra := 0
	if len(ta) > maxSimTokens || len(tb) > maxSimTokens {
		la, lb := min(len(ta), maxSimTokens), min(len(tb), maxSimTokens)
		extra = abs(len(ta) - la - (len(tb) - lb))
		ta, tb = ta[:la], tb[:lb]
	}
	dist := levenshtein(ta, tb) + extra
	return 1 - float64(min(dist, n))/float64(n)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func tokens(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		if r >= 0x2E80 && r <= 0x9FFF || r >= 0xAC00 && r <= 0xD7AF || r >= 0xF900 && r <= 0xFAFF {
			// CJK: a character is a word (no spaces between them).
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			out = append(out, string(r))
			continue
		}
		word := r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= 0x80 && !isSpace(r)
		if word {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			out = append(out, s[start:i])
			start = -1
		}
		if !isSpace(r) {
			out = append(out, string(r))
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\u00a0' || r == '\u3000'
}

// levenshtein is the edit distance between token lists, in two rows.
func levenshtein(a, b []string) int {
	if len(a) < len(b) {
		a, b = b, a
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
