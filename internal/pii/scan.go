package pii

import (
	"net/netip"
)

// The built-in scanner: one pass over the bytes of the text. A table marks
// the bytes where a check may start; every other byte costs one lookup.
// '@' starts an e-mail check; a word starting with a letter is read once
// and tried, by its length and first bytes, as a provider key, "Bearer",
// an IBAN, an IPv6 group or the name of a secret setting; a digit, '+' or
// '(' starts a number (numberAt), a full-width digit or '＋' a full-width
// number; "-----BEGIN" a PEM key; the first byte of 密, 秘, 口 or 令 a
// Chinese secret label.

type cand struct {
	m    Match
	rank int8
}

const (
	rankPlain    int8 = 0
	rankChecksum int8 = 1 // card, IBAN, Chinese ID: by a check digit; keys, PEM, URL passwords: by their format
)

func isDigit(b byte) bool    { return b >= '0' && b <= '9' }
func isUpper(b byte) bool    { return b >= 'A' && b <= 'Z' }
func isAlpha(b byte) bool    { return b|0x20 >= 'a' && b|0x20 <= 'z' }
func isAlnum(b byte) bool    { return isDigit(b) || isAlpha(b) }
func isWordByte(b byte) bool { return isAlnum(b) || b == '_' }
func isHex(b byte) bool      { return isDigit(b) || (b|0x20 >= 'a' && b|0x20 <= 'f') }

func scan(s string, out []cand) []cand {
	n := len(s)
	for i := 0; i < n; {
		c := s[i]
		if !trigger[c] {
			i++
			continue
		}
		if c == 0xEF { // a full-width digit or '＋'
			if fullwidthStart(s, i) {
				var en int
				out, en = fullwidthNumberAt(s, i, out)
				i = en
				continue
			}
			i++
			continue
		}
		if c >= 0x80 { // the first byte of 密, 秘, 口 or 令
			if st, en, ok := zhSecretAt(s, i); ok {
				out = append(out, cand{Match{Secret, st, en}, rankPlain})
				i = en
				continue
			}
			i++
			continue
		}
		if c == '@' {
			if st, en, ok := urlPasswordAt(s, i); ok {
				out = append(out, cand{Match{Secret, st, en}, rankChecksum})
				i++
				continue
			}
			if st, en, ok := emailAt(s, i); ok {
				out = append(out, cand{Match{Email, st, en}, rankPlain})
				i = en
				continue
			}
			i++
			continue
		}
		if i > 0 && (isWordByte(s[i-1]) || s[i-1] == ':' && c == ':') {
			i++
			continue
		}
		// At the start of a word.
		if isAlpha(c) {
			we := i + 1
			for we < n && (isWordByte(s[we]) || s[we] == '-') {
				we++
			}
			if en, k, r, st, ok := wordAt(s, i, we); ok {
				out = append(out, cand{Match{k, st, en}, r})
				i = en
				continue
			}
			i = we
			continue
		}
		if c == '-' {
			if en, ok := pemAt(s, i); ok {
				out = append(out, cand{Match{Secret, i, en}, rankChecksum})
				i = en
				continue
			}
			i++
			continue
		}
		if isDigit(c) || c == ':' {
			if en, ok := ipv6At(s, i); ok {
				out = append(out, cand{Match{IPv6, i, en}, rankPlain})
				i = en
				continue
			}
		}
		if c != ':' {
			var en int
			out, en = numberAt(s, i, out)
			if en > i {
				i = en
				continue
			}
		}
		i++
	}
	return out
}

// Full-width digits (１３８ ００１３ ８０００), typed with a Chinese input
// method in full-width mode, are read by mapping the run to ASCII, with the
// text before it for the labels, and the matches mapped back.

// fullwidthStart: s[i:] starts with a full-width digit, or '＋' and one.
func fullwidthStart(s string, i int) bool {
	if fwDigit(s, i) {
		return true
	}
	return len(s)-i >= 6 && s[i+1] == 0xBC && s[i+2] == 0x8B && fwDigit(s, i+3)
}

func fwDigit(s string, i int) bool {
	return len(s)-i >= 3 && s[i] == 0xEF && s[i+1] == 0xBC && s[i+2] >= 0x90 && s[i+2] <= 0x99
}

// fwByte maps the character at i of a full-width number to ASCII: digits,
// ＋, －, （, ）, Ｘ, the ideographic space, and ASCII digits, spaces, '-'
// and parentheses.
func fwByte(s string, i int) (b byte, size int) {
	c := s[i]
	if isDigit(c) || c == ' ' || c == '-' || c == '(' || c == ')' {
		return c, 1
	}
	if len(s)-i < 3 {
		return 0, 0
	}
	switch {
	case c == 0xEF && s[i+1] == 0xBC && s[i+2] >= 0x90 && s[i+2] <= 0x99:
		return '0' + s[i+2] - 0x90, 3
	case c == 0xEF && s[i+1] == 0xBC:
		switch s[i+2] {
		case 0x8B:
			return '+', 3
		case 0x8D:
			return '-', 3
		case 0x88:
			return '(', 3
		case 0x89:
			return ')', 3
		case 0xB8:
			return 'X', 3
		}
	case c == 0xEF && s[i+1] == 0xBD && s[i+2] == 0x98:
		return 'x', 3
	case c == 0xE3 && s[i+1] == 0x80 && s[i+2] == 0x80:
		return ' ', 3
	}
	return 0, 0
}

// fullwidthNumberAt finds the values of the full-width number at i and
// returns the end of its run.
func fullwidthNumberAt(s string, i int, out []cand) ([]cand, int) {
	const ctx = window
	var buf [ctx + 96 + 12]byte
	var src [len(buf) + 1]int
	n := 0
	from := max(0, i-ctx)
	for from < i && s[from]&0xC0 == 0x80 {
		from++ // start on a character
	}
	for j := from; j < i; j++ {
		buf[n], src[n] = s[j], j
		n++
	}
	tok := n
	j := i
	for j < len(s) && n < ctx+96 {
		b, size := fwByte(s, j)
		if size == 0 {
			break
		}
		buf[n], src[n] = b, j
		n++
		j += size
	}
	end := j
	for k := end; k < len(s) && n < len(buf); k++ { // what follows, for the boundary and the script
		buf[n], src[n] = s[k], k
		n++
	}
	src[n] = len(s) // a match ending there is cut to the run's end below
	var local [8]cand
	found, _ := numberAt(string(buf[:n]), tok, local[:0])
	for _, c := range found {
		c.m.Start, c.m.End = src[c.m.Start], src[c.m.End]
		if c.m.End > end {
			c.m.End = end
		}
		out = append(out, c)
	}
	return out, end
}

// trigger marks the bytes at which a check may start: letters, digits,
// '+', '(', ':', '-', '@' and the first bytes of the Chinese secret labels.
var trigger = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		t[c] = isAlnum(b) || b == '+' || b == '(' || b == ':' || b == '-' || b == '@' || b == 0xE4 || b == 0xE5 || b == 0xE7 || b == 0xEF
	}
	return t
}()

// wordAt checks the word s[i:we] (letters, digits, '_' and '-') starting
// with a letter: a provider key, "Bearer" and its token, an IBAN, an IPv6
// address written from a hex letter, a setting holding a secret.
func wordAt(s string, i, we int) (end int, k Kind, r int8, start int, ok bool) {
	wl := we - i
	if wl >= 15 || (wl >= 3 && s[i:i+3] == "eyJ") {
		if en, ok := secretAt(s, i); ok {
			return en, Secret, rankChecksum, i, true
		}
	}
	if wl == 6 {
		if st, en, ok := bearerAt(s, i); ok {
			return en, Secret, rankPlain, st, true
		}
	}
	if wl >= 4 && isUpper(s[i]) {
		if en, ok := ibanAt(s, i); ok {
			return en, IBAN, rankChecksum, i, true
		}
	}
	if wl <= 4 && we < len(s) && s[we] == ':' {
		if en, ok := ipv6At(s, i); ok {
			return en, IPv6, rankPlain, i, true
		}
	}
	if assignAfter(s, we) {
		if st, en, ok := assignedSecretAt(s, i, we); ok {
			return en, Secret, rankPlain, st, true
		}
	}
	return 0, "", 0, 0, false
}

// assignAfter: s[i:] starts with an optional quote, spaces and ':' or '='.
func assignAfter(s string, i int) bool {
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		i++
	}
	for i < len(s) && s[i] == ' ' {
		i++
	}
	return i < len(s) && (s[i] == ':' || s[i] == '=')
}

// secretNames end the names of settings whose value is a secret
// (DB_PASSWORD, client_secret, x-api-key).
var secretNames = []string{"password", "passwd", "secret", "api_key", "apikey", "api-key", "access_key", "secret_key", "token", "access_token", "auth_token", "private_key"}

// assignedSecretAt finds the value of a secret setting whose name is
// s[ws:we]: name, optional quote, ':' or '=', optional quote, a value of
// 8 or more bytes that mixes classes (not a word, not a placeholder).
func assignedSecretAt(s string, ws, we int) (start, end int, ok bool) {
	name := s[ws:we]
	if len(name) < 3 {
		return 0, 0, false
	}
	found := false
	for _, w := range secretNames {
		if len(name) >= len(w) && equalFold(name[len(name)-len(w):], w) && (len(name) == len(w) || !isAlpha(name[len(name)-len(w)-1])) {
			found = true
			break
		}
	}
	if !found {
		return 0, 0, false
	}
	j := we
	if j < len(s) && (s[j] == '"' || s[j] == '\'') {
		j++
	}
	for j < len(s) && s[j] == ' ' {
		j++
	}
	if j >= len(s) || (s[j] != ':' && s[j] != '=') {
		return 0, 0, false
	}
	return secretValueAt(s, j+1)
}

// secretValueAt finds a secret value after a label at j: optional spaces
// and quote, then 8 or more printable ASCII bytes that mix classes and do
// not start like a path, a variable, a template or a placeholder.
func secretValueAt(s string, j int) (start, end int, ok bool) {
	for j < len(s) && s[j] == ' ' {
		j++
	}
	if j < len(s) && (s[j] == '"' || s[j] == '\'') {
		j++
	}
	st := j
	if j < len(s) && (s[j] == '/' || s[j] == '.' || s[j] == '~' || s[j] == '$' || s[j] == '{' || s[j] == '<' || s[j] == '[') {
		return 0, 0, false // a path, a variable, a template or a placeholder
	}
	var cl classes
	for j < len(s) && s[j] > ' ' && s[j] < 0x7f && s[j] != '"' && s[j] != '\'' && s[j] != ',' && s[j] != ';' {
		cl.add(s[j])
		j++
	}
	for j > st && (s[j-1] == '.' || s[j-1] == ')' || s[j-1] == '}') {
		j--
	}
	if j-st < 8 || !cl.digit || !(cl.upper || cl.lower) || cl.code {
		return 0, 0, false // a word, an identifier or an expression of code
	}
	return st, j, true
}

// urlPasswordAt finds the password of a URL's user info before the '@' at
// at: scheme://user:password@host.
func urlPasswordAt(s string, at int) (start, end int, ok bool) {
	st := at
	for st > 0 && at-st < 256 && s[st-1] != ':' && s[st-1] > ' ' && s[st-1] < 0x7f && s[st-1] != '/' && s[st-1] != '@' {
		st--
	}
	if st == at || st == 0 || s[st-1] != ':' {
		return 0, 0, false
	}
	u := st - 1 // the colon after the user
	for u > 0 && (isWordByte(s[u-1]) || s[u-1] == '.' || s[u-1] == '-' || s[u-1] == '%') {
		u--
	}
	if u < 3 || s[u-3:u] != "://" {
		return 0, 0, false
	}
	return st, at, true
}

// emailAt finds an address around the '@' at i.
func emailAt(s string, at int) (start, end int, ok bool) {
	st := at
	for st > 0 && isLocalByte(s[st-1]) {
		st--
	}
	for st < at && s[st] == '.' {
		st++
	}
	if st == at || s[at-1] == '.' {
		return 0, 0, false
	}
	// domain: labels of [A-Za-z0-9-] separated by single dots, last label
	// letters only, at least two of them.
	e := at + 1
	lastDot, labelStart := -1, e
	for e < len(s) {
		c := s[e]
		if isAlnum(c) || c == '-' {
			e++
			continue
		}
		if c == '.' && e > labelStart && e+1 < len(s) && isAlnum(s[e+1]) {
			lastDot = e
			e++
			labelStart = e
			continue
		}
		break
	}
	if lastDot < 0 {
		return 0, 0, false
	}
	tld := s[lastDot+1 : e]
	if len(tld) < 2 {
		return 0, 0, false
	}
	for i := 0; i < len(tld); i++ {
		if !isAlpha(tld[i]) {
			return 0, 0, false
		}
	}
	return st, e, true
}

func isLocalByte(b byte) bool {
	return isAlnum(b) || b == '.' || b == '_' || b == '%' || b == '+' || b == '-'
}

// keyPrefixes are the providers' key formats: a prefix, the bytes the rest
// may hold, and the length of the rest.
type keyPrefix struct {
	prefix   string
	set      byte // 'A' [A-Z0-9], 'a' [A-Za-z0-9], 'u' [A-Za-z0-9_-], 'x' [A-Za-z0-9-]
	min, max int
}

var keyPrefixes = []keyPrefix{
	{"sk-ant-", 'u', 32, 200},     // Anthropic
	{"sk-proj-", 'u', 32, 200},    // OpenAI project keys
	{"sk-", 'u', 20, 200},         // OpenAI and compatible
	{"AKIA", 'A', 16, 16},         // AWS access key id
	{"ASIA", 'A', 16, 16},         // AWS temporary access key id
	{"AIza", 'u', 35, 35},         // Google API key
	{"ghp_", 'a', 36, 251},        // GitHub personal token
	{"gho_", 'a', 36, 251},        // GitHub OAuth token
	{"ghu_", 'a', 36, 251},        // GitHub user-to-server token
	{"ghs_", 'a', 36, 251},        // GitHub server-to-server token
	{"ghr_", 'a', 36, 251},        // GitHub refresh token
	{"github_pat_", 'u', 40, 120}, // GitHub fine-grained token
	{"glpat-", 'u', 20, 40},       // GitLab token
	{"xoxb-", 'x', 10, 200},       // Slack bot token
	{"xoxp-", 'x', 10, 200},       // Slack user token
	{"xoxa-", 'x', 10, 200},       // Slack app token
	{"xoxr-", 'x', 10, 200},       // Slack refresh token
	{"xoxs-", 'x', 10, 200},       // Slack session token
	{"sk_live_", 'a', 16, 120},    // Stripe secret key
	{"sk_test_", 'a', 16, 120},    // Stripe test key
	{"rk_live_", 'a', 16, 120},    // Stripe restricted key
	{"hf_", 'a', 30, 40},          // Hugging Face token
	{"gsk_", 'a', 40, 60},         // Groq key
	{"eyJ", 'j', 20, 4000},        // JSON web token (three base64url parts)
}

// keysByFirst indexes keyPrefixes by their first byte.
var keysByFirst = func() (t [256][]keyPrefix) {
	for _, k := range keyPrefixes {
		t[k.prefix[0]] = append(t[k.prefix[0]], k)
	}
	return t
}()

func inSet(set, b byte) bool {
	switch set {
	case 'A':
		return isUpper(b) || isDigit(b)
	case 'a':
		return isAlnum(b)
	case 'u':
		return isAlnum(b) || b == '_' || b == '-'
	case 'x':
		return isAlnum(b) || b == '-'
	case 'j':
		return isAlnum(b) || b == '_' || b == '-' || b == '.'
	}
	return false
}

// secretAt finds a provider key or a PEM private key starting at i.
func secretAt(s string, i int) (end int, ok bool) {
	rest := s[i:]
	for _, k := range keysByFirst[s[i]] {
		if len(rest) < len(k.prefix)+k.min || rest[:len(k.prefix)] != k.prefix {
			continue
		}
		j := len(k.prefix)
		var cl classes
		for j < len(rest) && j-len(k.prefix) < k.max+1 && inSet(k.set, rest[j]) {
			cl.add(rest[j])
			j++
		}
		for k.set == 'j' && j > len(k.prefix) && rest[j-1] == '.' {
			j-- // the end of a sentence, not of the token
		}
		l := j - len(k.prefix)
		if l < k.min || l > k.max || (j < len(rest) && isWordByte(rest[j])) {
			return 0, false
		}
		if k.set == 'j' && !jwtShape(rest[:j]) {
			return 0, false
		}
		if k.set != 'A' && k.set != 'j' && (!cl.random() || k.prefix == "sk-" && cl.longest < 16) {
			return 0, false // a word or a slug: sk-learn, sk-2024-roadmap-draft
		}
		return i + j, true
	}
	return 0, false
}

// classes counts the character classes of a token.
type classes struct {
	digit, upper, lower bool
	code                bool // has ( ) { } [ ], as in cfg.Password.Value()
	run, longest        int  // letters and digits in a row
}

func (c *classes) add(b byte) {
	if b == '(' || b == ')' || b == '{' || b == '}' || b == '[' || b == ']' {
		c.code = true
	}
	if isAlnum(b) {
		c.run++
		c.longest = max(c.longest, c.run)
	} else {
		c.run = 0
	}
	switch {
	case isDigit(b):
		c.digit = true
	case isUpper(b):
		c.upper = true
	case b >= 'a' && b <= 'z':
		c.lower = true
	}
}

// random: a generated token mixes digits and letters or both cases; words
// (a-long-hyphenated-name, ALLCAPS) do not.
func (c classes) random() bool {
	return (c.digit && (c.upper || c.lower)) || (c.upper && c.lower)
}

// jwtShape: three non-empty dot-separated parts, the first decoding to '{"'.
func jwtShape(t string) bool {
	dots := 0
	last := -1
	for i := 0; i < len(t); i++ {
		if t[i] == '.' {
			if i == last+1 {
				return false
			}
			dots++
			last = i
		}
	}
	return dots == 2 && last < len(t)-1
}

// pemAt finds "-----BEGIN ... PRIVATE KEY-----" through its END line.
func pemAt(s string, i int) (int, bool) {
	const begin = "-----BEGIN "
	rest := s[i:]
	if len(rest) < 64 || rest[:len(begin)] != begin {
		return 0, false
	}
	hdrEnd := indexFrom(rest, "-----", len(begin))
	if hdrEnd < 0 || hdrEnd > 64 || !hasSuffix(rest[:hdrEnd], "PRIVATE KEY") {
		return 0, false
	}
	if len(rest) > 16<<10 {
		rest = rest[:16<<10] // a PEM key is a few KiB; bounds the search for its end
	}
	end := indexFrom(rest, "-----END ", hdrEnd+5)
	if end < 0 {
		return 0, false
	}
	close := indexFrom(rest, "-----", end+9)
	if close < 0 {
		return 0, false
	}
	return i + close + 5, true
}

func indexFrom(s, sub string, from int) int {
	for j := from; j+len(sub) <= len(s); j++ {
		if s[j:j+len(sub)] == sub {
			return j
		}
	}
	return -1
}

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }

// bearerAt finds the token after "Bearer " (any case) at i.
func bearerAt(s string, i int) (start, end int, ok bool) {
	const b = "bearer"
	if len(s)-i < len(b)+17 || s[i]|0x20 != 'b' {
		return 0, 0, false
	}
	for k := 0; k < len(b); k++ {
		if s[i+k]|0x20 != b[k] {
			return 0, 0, false
		}
	}
	j := i + len(b)
	if s[j] != ' ' && s[j] != ':' {
		return 0, 0, false
	}
	for j < len(s) && (s[j] == ' ' || s[j] == ':') {
		j++
	}
	st := j
	var cl classes
	for j < len(s) && (isAlnum(s[j]) || s[j] == '-' || s[j] == '.' || s[j] == '_' || s[j] == '~' || s[j] == '+' || s[j] == '/' || s[j] == '=') {
		cl.add(s[j])
		j++
	}
	for j > st && s[j-1] == '.' {
		j-- // the end of a sentence; a trailing '-' is base64url
	}
	if j-st < 16 || !cl.random() || cl.longest < 16 {
		return 0, 0, false
	}
	return st, j, true
}

// ibanAt finds an IBAN at i: country code, check digits, then the BBAN,
// printed whole or in groups separated by single spaces.
func ibanAt(s string, i int) (int, bool) {
	if len(s)-i < 15 || !isUpper(s[i+1]) || !isDigit(s[i+2]) || !isDigit(s[i+3]) {
		return 0, false
	}
	want, ok := ibanLength[s[i:i+2]]
	if !ok {
		return 0, false
	}
	var buf [34]byte
	nb := 0
	j := i
	for j < len(s) && nb < want {
		c := s[j]
		switch {
		case isUpper(c) || isDigit(c):
			buf[nb] = c
			nb++
			j++
		case c == ' ' && j+1 < len(s) && isAlnum(s[j+1]) && nb >= 4:
			j++
		default:
			return 0, false
		}
	}
	if nb != want || (j < len(s) && isWordByte(s[j])) {
		return 0, false
	}
	return j, ibanValid(buf[:nb])
}

// ipv6Groups counts the non-empty colon-separated groups of a.
func ipv6Groups(a string) int {
	n, in := 0, false
	for i := 0; i < len(a); i++ {
		if a[i] == ':' {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}

// ipv6HasLongGroup: a group of three or more hex digits, or an IPv4 tail.
func ipv6HasLongGroup(a string) bool {
	run := 0
	for i := 0; i < len(a); i++ {
		switch {
		case a[i] == '.':
			return true
		case a[i] == ':':
			run = 0
		default:
			run++
			if run >= 3 {
				return true
			}
		}
	}
	return false
}

// ipv6At finds an IPv6 address at i.
func ipv6At(s string, i int) (int, bool) {
	h := i
	for h < len(s) && h-i <= 4 && isHex(s[h]) {
		h++
	}
	if h-i > 4 || h >= len(s) || s[h] != ':' {
		return 0, false // the first group is four hex digits at most
	}
	j := i
	colons := 0
	for j < len(s) && (isHex(s[j]) || s[j] == ':' || s[j] == '.') && j-i < 64 {
		if s[j] == ':' {
			colons++
		}
		j++
	}
	if colons < 2 {
		return 0, false
	}
	if colons < 7 && indexFrom(s[i:j], "::", 0) < 0 {
		return 0, false // a time (10:30:15) or a MAC address
	}
	if groups := ipv6Groups(s[i:j]); groups < 2 {
		return 0, false // ::8 and ::e are Vim's filename modifiers, not hosts
	}
	for j > i && (s[j-1] == '.' || (s[j-1] == ':' && (j-2 < i || s[j-2] != ':'))) {
		j--
	}
	if j < len(s) && (isWordByte(s[j]) || s[j] == '-') {
		return 0, false // fe80::1%eth0 is found without its zone
	}
	if !ipv6HasLongGroup(s[i:j]) {
		return 0, false // 6A:E5:D0:41:43:63:EF:65 is a fingerprint, 0:1:2:3:4:5:6:7 and b::c are examples
	}
	a, err := netip.ParseAddr(s[i:j])
	if err != nil || !a.Is6() || a.IsUnspecified() || a.IsLoopback() {
		return 0, false
	}
	return j, true
}

// zhSecretLabels name a secret in Chinese: password, key, passphrase,
// token, and 秘钥, the common misspelling of 密钥.
var zhSecretLabels = []string{"密码", "密钥", "秘钥", "口令", "令牌"}

// zhSecretAt finds the value after a Chinese secret label at i, joined by
// 是, 为, a colon or '='.
func zhSecretAt(s string, i int) (start, end int, ok bool) {
	if len(s)-i < 6 {
		return 0, 0, false
	}
	switch s[i+1] {
	case 0xAF, 0xA7, 0x8F, 0xBB: // second bytes of 密, 秘, 口, 令
	default:
		return 0, 0, false
	}
	for _, l := range zhSecretLabels {
		if len(s)-i < len(l) || s[i:i+len(l)] != l {
			continue
		}
		j := i + len(l)
		for j < len(s) && s[j] == ' ' {
			j++
		}
		switch {
		case j < len(s) && (s[j] == ':' || s[j] == '='):
			j++
		case hasPrefixAt(s, j, "是"), hasPrefixAt(s, j, "为"), hasPrefixAt(s, j, "："), hasPrefixAt(s, j, "＝"):
			j += 3
		default:
			return 0, 0, false
		}
		return secretValueAt(s, j)
	}
	return 0, 0, false
}

func hasPrefixAt(s string, j int, p string) bool { return len(s)-j >= len(p) && s[j:j+len(p)] == p }
