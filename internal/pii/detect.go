package pii

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Detector finds the built-in kinds and the custom kinds of its Config.
// It is immutable after New and safe for concurrent use by any number of
// goroutines; Find never blocks and does no I/O.
//
// The built-in kinds are found in one pass over the bytes, without regular
// expressions, and validated where the format allows:
//
//   - Email: local@domain with a dotted domain and an alphabetic TLD.
//   - Phone: '+' and 8–15 digits (E.164, separators allowed; 10 without
//     them); North American (555) 123-4567, 555-123-4567, 555.123.4567,
//     1-555-123-4567; national numbers with a trunk 0 written in groups
//     (UK, DE, FR, JP, Chinese landlines 021-61234567); 00-prefixed
//     international; Chinese mobiles 1[3-9] and 9 digits, 3-4-4 or with
//     +86. A plain Chinese mobile counts in Chinese text or after a label;
//     555 123 4567 and plain 10- or 11-digit numbers only after a label
//     (phone, tel, call, reach, 电话, 手机, 联系 …).
//   - Card: 13–19 digits, whole, in groups of four (the last may be
//     shorter), 4-6-5 or 4-6-4, joined by spaces or dashes, with a scheme's
//     prefix and length and the Luhn check.
//   - IBAN: country code, check digits and the country's length (SWIFT
//     registry), whole or in groups, mod-97.
//   - CN_ID: 17 digits and a digit or X, a province code, a real birth date
//     and the ISO 7064 MOD 11-2 check character.
//   - SSN: 3-2-4 digits with dashes, or spaced or plain after "SSN" or
//     "social security"; not area 000, 666 or 9xx, group 00, serial 0000.
//   - IPv4: four dotted decimals ≤ 255 without leading zeros, not part of a
//     longer dotted run, not a netmask (255.x), not loopback (127.x), not
//     after version, build, section or a product name; one shaped like a
//     version (1.8.1.2, 1.16.0.1) only after an IP word (ip, host, server,
//     dns …). IPv6: with "::" or eight groups, a group of three or more hex
//     digits, parsed, not loopback (::1); a zone (%eth0) is left out.
//   - Secret: provider keys by prefix and shape (OpenAI and Anthropic sk-,
//     AWS AKIA/ASIA, Google AIza, GitHub ghp_ and github_pat_, GitLab,
//     Slack xox?-, Stripe, Hugging Face, Groq), JSON web tokens, PEM private
//     keys, the token after "Bearer", the password in a URL's user info
//     (postgres://app:…@db), and the value of a setting named like
//     a secret (DB_PASSWORD=…, "api_key": "…", 密码：…) when it has 8 or
//     more bytes, letters and digits, and no brackets (code such as
//     cfg.Password.Value() is not a secret).
//
// Numbers are not reported where they continue an identifier, a time or a
// URL path (ORD-2025-000123, 13:48:07 2009, /testcase/5072358514753536),
// look like a date, or follow a word such as order, invoice, tracking,
// buffer, 订单, 发票 in the same clause (checksum kinds excepted).
//
// Phones, cards and Chinese IDs typed in full width (１３８ ００１３ ８０００,
// with ＋, －, （ ）, Ｘ and the ideographic space) are found too.
//
// Not detected: names and postal addresses; full-width IP addresses, IBANs
// and e-mail addresses; lower-case IBANs; 15-digit Chinese IDs of the first generation
// (no check digit); phone numbers of fewer than 8 digits; card numbers with
// dots between groups; addresses written to dodge detection (john [at]
// example [dot] com); keys without a known prefix or label (an Azure key is
// 32 hex digits like any hash).
type Detector struct {
	patterns []customPattern
	words    [256][]dictWord // dictionary words by their first byte, lowercased
	hasWords bool
}

type customPattern struct {
	kind Kind
	re   *regexp.Regexp
}

type dictWord struct {
	kind Kind
	w    string // ASCII-lowercased
}

// New checks cfg and builds a Detector. Every error wraps ErrConfig: a
// custom kind without a name, a name that is not [A-Z][A-Z0-9_]* (the shape
// of placeholders), a name used twice or equal to a built-in kind, a regular expression that does not compile or matches the empty
// string, a dictionary without words or with an empty word.
func New(cfg Config) (*Detector, error) {
	d := &Detector{}
	seen := map[Kind]bool{Email: true, Phone: true, Card: true, IBAN: true, CNID: true, SSN: true, IPv4: true, IPv6: true, Secret: true}
	name := func(what string, i int, n string) (Kind, error) {
		if n == "" {
			return "", fmt.Errorf("%w: %s[%d]: empty name", ErrConfig, what, i)
		}
		if !kindName(n) {
			return "", fmt.Errorf("%w: %s[%d]: name %q is not upper-case letters, digits and '_' starting with a letter (it names placeholders such as [%s_1])", ErrConfig, what, i, n, n)
		}
		k := Kind(n)
		if seen[k] {
			return "", fmt.Errorf("%w: %s[%d]: kind %q already defined", ErrConfig, what, i, n)
		}
		seen[k] = true
		return k, nil
	}
	for i, p := range cfg.Patterns {
		k, err := name("patterns", i, p.Name)
		if err != nil {
			return nil, err
		}
		if p.Regex == "" {
			return nil, fmt.Errorf("%w: patterns[%d] %q: empty regex", ErrConfig, i, p.Name)
		}
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			return nil, fmt.Errorf("%w: patterns[%d] %q: %w", ErrConfig, i, p.Name, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("%w: patterns[%d] %q: regex matches the empty string", ErrConfig, i, p.Name)
		}
		d.patterns = append(d.patterns, customPattern{kind: k, re: re})
	}
	for i, dc := range cfg.Dictionaries {
		k, err := name("dictionaries", i, dc.Name)
		if err != nil {
			return nil, err
		}
		if len(dc.Words) == 0 {
			return nil, fmt.Errorf("%w: dictionaries[%d] %q: no words", ErrConfig, i, dc.Name)
		}
		for j, w := range dc.Words {
			w = strings.TrimSpace(w)
			if w == "" {
				return nil, fmt.Errorf("%w: dictionaries[%d] %q: words[%d] is empty", ErrConfig, i, dc.Name, j)
			}
			w = asciiLower(w)
			d.words[w[0]] = append(d.words[w[0]], dictWord{kind: k, w: w})
			d.hasWords = true
		}
	}
	return d, nil
}

// Find returns the values found in text, sorted by Start and not
// overlapping. Where two findings overlap, the validated one (card, IBAN
// and Chinese ID by their check digits, a provider key by its format) wins,
// then the longer, then the earlier. Find
// allocates only for its result; it returns nil when it finds nothing.
// Custom patterns each run their regular expression over the whole text
// (one starting with a literal, EMP-\d{6}, is several times faster than
// one starting with \b); dictionary words are looked up by their first
// byte in the same kind of single pass as the built-in kinds.
func (d *Detector) Find(text string) []Match {
	var buf [32]cand
	cs := scan(text, buf[:0])
	for _, p := range d.patterns {
		for _, loc := range p.re.FindAllStringIndex(text, -1) {
			if loc[1] > loc[0] {
				cs = append(cs, cand{Match{p.kind, loc[0], loc[1]}, rankPlain})
			}
		}
	}
	if d.hasWords {
		cs = d.findWords(text, cs)
	}
	if len(cs) == 0 {
		return nil
	}
	return resolve(cs)
}

// kindName: [A-Z][A-Z0-9_]*.
func kindName(n string) bool {
	for i := 0; i < len(n); i++ {
		if c := n[i]; !isUpper(c) && (i == 0 || !isDigit(c) && c != '_') {
			return false
		}
	}
	return n != ""
}

// resolve keeps, of overlapping candidates, the validated one, then the
// longer, then the earlier, and returns the kept ones sorted by Start. It
// sorts by Start and decides each cluster of overlapping candidates on its
// own, so a text with thousands of values costs n log n, not n².
func resolve(cs []cand) []Match {
	slices.SortFunc(cs, func(a, b cand) int {
		if a.m.Start != b.m.Start {
			return a.m.Start - b.m.Start
		}
		return b.m.End - a.m.End
	})
	out := make([]Match, 0, len(cs))
	for i := 0; i < len(cs); {
		j, end := i+1, cs[i].m.End
		for j < len(cs) && cs[j].m.Start < end {
			end = max(end, cs[j].m.End)
			j++
		}
		if j == i+1 {
			out = append(out, cs[i].m)
		} else {
			out = keepBest(out, cs[i:j])
		}
		i = j
	}
	return out
}

// keepBest appends to out the candidates of one cluster that win: by rank,
// then length, then start, each kept if it overlaps none kept before.
func keepBest(out []Match, cl []cand) []Match {
	slices.SortFunc(cl, func(a, b cand) int {
		if a.rank != b.rank {
			return int(b.rank) - int(a.rank)
		}
		if la, lb := a.m.End-a.m.Start, b.m.End-b.m.Start; la != lb {
			return lb - la
		}
		return a.m.Start - b.m.Start
	})
	base := len(out)
	for _, c := range cl {
		ok := true
		for _, m := range out[base:] {
			if c.m.Start < m.End && m.Start < c.m.End {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, c.m)
		}
	}
	slices.SortFunc(out[base:], func(a, b Match) int { return a.Start - b.Start })
	return out
}

// findWords appends each occurrence of a dictionary word in text, ASCII
// case-insensitively, that is not inside a longer ASCII word.
func (d *Detector) findWords(text string, cs []cand) []cand {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		ws := d.words[c]
		if ws == nil || (isWordByte(c) && i > 0 && isWordByte(text[i-1])) {
			continue
		}
		for _, w := range ws {
			e := i + len(w.w)
			if e <= len(text) && equalFold(text[i:e], w.w) && !(isWordByte(w.w[len(w.w)-1]) && e < len(text) && isWordByte(text[e])) {
				cs = append(cs, cand{Match{w.kind, i, e}, rankPlain})
			}
		}
	}
	return cs
}

// asciiLower lowercases ASCII letters only, so byte offsets are kept.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
