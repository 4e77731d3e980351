package structured

import (
	"regexp"
	"slices"
	"strings"
)

// SpanKind classifies a guarded span.
type SpanKind uint8

const (
	SpanNumber     SpanKind = iota + 1 // 42, -3.5, 1,234.50, 6.02e23
	SpanCurrency                       // $152.37, ¥1,234.50, €0.99, 152.37 USD, USD 152.37
	SpanPercent                        // -15%, 3.5 %
	SpanDate                           // 2024-03-01, 2024-03-01T10:00:00Z, 03/01/2024, 1 March 2024, March 1, 2024, 2024年3月1日
	SpanIdentifier                     // INV-2024-0001, PO_7731, AB12345, UUIDs
)

// Span is a guarded span: bytes of a text that no later stage may rewrite.
type Span struct {
	Start, End int // byte offsets, Text == text[Start:End]
	Kind       SpanKind
	Text       string
}

const (
	num       = `\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?`
	curSymbol = `(?:US\$|HK\$|A\$|C\$|NT\$|R\$|\$|€|£|¥|￥|₹|₩|₽|₺|₪|฿|₫|₱)`
	curCode   = `(?:USD|EUR|GBP|JPY|CNY|RMB|CHF|CAD|AUD|HKD|NZD|SGD|INR|KRW|SEK|NOK|DKK|MXN|BRL|ZAR|TWD)`
	months    = `(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)`
)

// spanRules are tried in priority order; a later rule never claims bytes an
// earlier rule claimed, so "$152.37" is one currency span, not a number.
var spanRules = []struct {
	kind SpanKind
	re   *regexp.Regexp
}{
	// A personal-data placeholder the engine put in the prompt
	// ([EMAIL_1], [CN_ID_2]; internal/pii), brackets included: the engine
	// restores it in the answer only if it arrives whole.
	{SpanIdentifier, regexp.MustCompile(`\[[A-Z][A-Z0-9_]*_\d+\]`)},
	{SpanIdentifier, regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`)},
	{SpanDate, regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b\d{1,2}\.\d{1,2}\.\d{4}\b|\b` + months + `\.? \d{1,2}(?:st|nd|rd|th)?,? \d{4}\b|\b\d{1,2} ` + months + `\.?,? \d{4}\b|\d{4}年\d{1,2}月(?:\d{1,2}日)?`)},
	{SpanIdentifier, regexp.MustCompile(`\b[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)+\b|\b[A-Z]{2,}\d{3,}\b`)},
	{SpanCurrency, regexp.MustCompile(`[-−]?` + curSymbol + ` ?-?(?:` + num + `)|\b` + curCode + ` ?-?(?:` + num + `)|-?\b(?:` + num + `) ?` + curCode + `\b|-?\b(?:` + num + `) ?(?:元|円|美元|欧元|英镑|人民币)`)},
	{SpanPercent, regexp.MustCompile(`[-+−]?\b(?:` + num + `) ?[%％]`)},
	{SpanNumber, regexp.MustCompile(`-?\b(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?\b`)},
}

// GuardedSpans returns the guarded spans of text in order of position:
// currency amounts with their symbol or code, percentages, dates, identifiers
// (codes such as INV-2024-0001 that mix letters and digits, UUIDs, and
// personal-data placeholders such as [EMAIL_1], brackets included), and
// any other numbers. Spans do not overlap. It is safe for concurrent use.
func GuardedSpans(text string) []Span {
	var spans []Span
	taken := func(a, b int) bool {
		for _, s := range spans {
			if a < s.End && s.Start < b {
				return true
			}
		}
		return false
	}
	for _, r := range spanRules {
		for _, m := range r.re.FindAllStringIndex(text, -1) {
			a, b := m[0], m[1]
			if r.kind == SpanIdentifier && !hasDigit(text[a:b]) {
				continue // a hyphenated word ("follow-up"), not a code
			}
			if taken(a, b) {
				continue
			}
			spans = append(spans, Span{Start: a, End: b, Kind: r.kind, Text: text[a:b]})
		}
	}
	slices.SortFunc(spans, func(x, y Span) int { return x.Start - y.Start })
	return spans
}

func hasDigit(s string) bool { return strings.IndexAny(s, "0123456789") >= 0 }

// guardCheck reports the first guarded span of orig, or of input that also
// occurs in orig, that out does not contain as many times as orig does. It is
// the mechanical guarantee behind Repair: whatever a step does, a span the
// answer carried survives byte for byte or the repair is rejected.
func guardCheck(orig, out, input string) (lost string, ok bool) {
	seen := make(map[string]bool)
	check := func(s string) bool {
		if seen[s] {
			return true
		}
		seen[s] = true
		return strings.Count(out, s) >= strings.Count(orig, s)
	}
	for _, sp := range GuardedSpans(orig) {
		if !check(sp.Text) {
			return sp.Text, false
		}
	}
	if input != "" {
		for _, sp := range GuardedSpans(input) {
			if strings.Contains(orig, sp.Text) && !check(sp.Text) {
				return sp.Text, false
			}
		}
	}
	return "", true
}
