package pii

// Numbers: a token is a run of digit groups joined by short separators
// (space, '-', '.', parentheses), with an optional leading '+' or '(' and,
// for the Chinese ID, a final X. The token is classified whole; if that
// fails, the longest classifiable runs of groups cut at spaces are tried,
// so "13800138000 13900139000" gives two phones.

const maxGroups = 12

type numToken struct {
	s      string
	start  int // of the token, with its '+' or '('
	ng     int
	gs, ge [maxGroups]int  // digit group [gs, ge)
	sep    [maxGroups]byte // separator before group k (k ≥ 1): ' ', '-', '.', 'p' (has a parenthesis)
	cut    [maxGroups]bool // the token may be cut before group k (separator of spaces only)
	hasX   bool            // the last group ends with X (Chinese ID)
}

// numberAt classifies the number token at i and returns the end of the
// token (> i) even when nothing was found, so its groups are not rescanned.
func numberAt(s string, i int, out []cand) ([]cand, int) {
	n := len(s)
	if identBefore(s, i) {
		return out, skipIdent(s, i)
	}
	var t numToken
	t.s = s
	t.start = i
	j := i
	if s[j] == '+' || s[j] == '(' {
		if j+1 >= n || !isDigit(s[j+1]) {
			return out, i + 1
		}
		j++
	}
	for {
		st := j
		for j < n && isDigit(s[j]) {
			j++
		}
		t.gs[t.ng], t.ge[t.ng] = st, j
		t.ng++
		if j < n && (s[j] == 'X' || s[j] == 'x') && (j+1 == n || !isWordByte(s[j+1])) {
			t.hasX = true
			j++
			break
		}
		if t.ng == maxGroups {
			break
		}
		k := j
		spaces, dashes, dots, parens := 0, 0, 0, 0
	sep:
		for k < n && k-j < 3 {
			switch s[k] {
			case ' ':
				spaces++
			case '-':
				dashes++
			case '.':
				dots++
			case '(', ')':
				parens++
			default:
				break sep
			}
			k++
		}
		if k == j || k >= n || !isDigit(s[k]) || dashes > 1 || dots > 1 || parens > 1 ||
			(dots > 0 && spaces+dashes+parens > 0) {
			break
		}
		switch {
		case parens > 0:
			t.sep[t.ng] = 'p'
		case dots > 0:
			t.sep[t.ng] = '.'
		case dashes > 0:
			t.sep[t.ng] = '-'
		default:
			t.sep[t.ng] = ' '
			t.cut[t.ng] = true
		}
		j = k
	}
	if s[t.start] == '(' {
		closed := false
		for k := 1; k < t.ng; k++ {
			closed = closed || t.sep[k] == 'p'
		}
		if !closed {
			t.start++ // "(800-292-9263" : the parenthesis is the text's, not the number's
		}
	}
	// The token continues as an identifier or an address: not a number.
	if j < n {
		c := s[j]
		if isWordByte(c) || c == '@' || ((c == '-' || c == '.' || c == '_') && j+1 < n && isAlnum(s[j+1])) || (c == '/' && j+1 < n && isAlpha(s[j+1])) {
			return out, skipIdent(s, j)
		}
	}
	if t.hasX && t.ng > 3 {
		return out, j
	}
	// Whole token, else the longest runs cut at spaces; a token shaped like
	// a card (groups of four) that fails the checks is not cut.
	if t.cardShaped() {
		if k, rank, ok := t.classify(0, t.ng-1); ok {
			out = append(out, cand{Match{k, t.start, j}, rank})
		} else if l := t.ng - 1; t.cut[l] && t.ge[l]-t.gs[l] != 4 {
			if k, rank, ok := t.classify(0, l-1); ok && rank == rankChecksum {
				out = append(out, cand{Match{k, t.start, t.ge[l-1]}, rank}) // 4111 1111 1111 1111 12/28
			}
		}
		return out, j
	}
	for a := 0; a < t.ng; {
		found := false
		for b := t.ng - 1; b >= a; b-- {
			if b < t.ng-1 && !t.cut[b+1] {
				continue
			}
			if a > 0 && !t.cut[a] {
				break
			}
			if k, rank, ok := t.classify(a, b); ok {
				st := t.gs[a]
				if a == 0 {
					st = t.start
				}
				out = append(out, cand{Match{k, st, t.ge[b] + xlen(&t, b)}, rank})
				a = b + 1
				found = true
				break
			}
		}
		if !found {
			a++
		}
	}
	return out, j
}

func (t *numToken) cardShaped() bool {
	if t.ng < 4 || t.hasX {
		return false
	}
	for k := 0; k < t.ng; k++ {
		if t.ge[k]-t.gs[k] != 4 && !(k == t.ng-1 && t.ge[k]-t.gs[k] >= 1) || k > 0 && t.sep[k] != t.sep[1] {
			return false
		}
	}
	return true
}

func xlen(t *numToken, b int) int {
	if t.hasX && b == t.ng-1 {
		return 1
	}
	return 0
}

// identBefore: the number at i continues a word, an identifier, a time or
// a path: ORD-2025-000123, build_17, 13:48:07, /testcase-detail/5072358514753536.
func identBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	p := s[i-1]
	if isWordByte(p) || p == '+' || p == '~' || (p == '.' || p == ':') && i > 1 && isDigit(s[i-2]) {
		return true // abc123, ~+20200929 (a snapshot version), 1.5, 13:48:07
	}
	return (p == '-' || p == '_' || p == '/') && i > 1 && (isAlnum(s[i-2]) || s[i-2] == '-')
}

// skipIdent returns the end of the identifier-like run at i.
func skipIdent(s string, i int) int {
	for i < len(s) {
		c := s[i]
		if isWordByte(c) || ((c == '-' || c == '.' || c == '/') && i+1 < len(s) && isAlnum(s[i+1])) {
			i++
			continue
		}
		break
	}
	return i
}

// classify decides what groups [a, b] are.
func (t *numToken) classify(a, b int) (Kind, int8, bool) {
	var d [24]byte
	nd := 0
	for g := a; g <= b; g++ {
		l := t.ge[g] - t.gs[g]
		if nd+l > len(d) {
			return "", 0, false
		}
		copy(d[nd:], t.s[t.gs[g]:t.ge[g]])
		nd += l
	}
	ng := b - a + 1
	plus := a == 0 && t.s[t.start] == '+'
	paren := (a == 0 && t.s[t.start] == '(') || (a > 0 && t.gs[a] > 0 && t.s[t.gs[a]-1] == '(')
	x := t.hasX && b == t.ng-1
	glen := func(k int) int { return t.ge[a+k] - t.gs[a+k] }
	sep := func(k int) byte { return t.sep[a+k] } // separator before group a+k, k ≥ 1
	same := func(want ...byte) bool {
		if ng == 1 {
			return true
		}
		first := sep(1)
		okFirst := false
		for _, w := range want {
			if first == w {
				okFirst = true
			}
		}
		if !okFirst {
			return false
		}
		for k := 2; k < ng; k++ {
			if sep(k) != first {
				return false
			}
		}
		return true
	}
	start := t.gs[a]
	if a == 0 {
		start = t.start
	}

	if x {
		if nd != 17 || plus || paren {
			return "", 0, false
		}
		d[17] = 'X'
		if (ng == 1 || (ng == 3 && glen(0) == 6 && glen(1) == 8 && same(' '))) && cnIDValid(d[:18]) {
			return CNID, rankChecksum, true
		}
		return "", 0, false
	}

	dotted := ng > 1 && same('.')
	if dotted && ng == 4 && !plus && !paren {
		for k := 0; k < 4; k++ {
			l := glen(k)
			g := t.s[t.gs[a+k]:t.ge[a+k]]
			if l > 3 || (l > 1 && g[0] == '0') || num([]byte(g)) > 255 {
				return "", 0, false
			}
		}
		if keywordBefore(t.s, start, versionWords) >= 0 || t.s[t.gs[a]:t.ge[a]] == "255" || t.s[t.gs[a]:t.ge[a]] == "0" || t.s[t.gs[a]:t.ge[a]] == "127" {
			return "", 0, false // a version, a section, a netmask, 0.x.x.x or loopback
		}
		if glen(0) == 1 && (glen(1) == 1 || glen(2) == 1 && glen(3) == 1) && keywordBefore(t.s, start, ipWords) < 0 {
			return "", 0, false // 1.8.1.2, 5.0.71.47, 1.16.0.1, 2.2.1.3: versions and sections unless the text says IP
		}
		return IPv4, rankPlain, true
	}
	if dateShape(t, a, b) {
		return "", 0, false
	}

	if nd == 18 && !plus && !paren && (ng == 1 || (ng == 3 && glen(0) == 6 && glen(1) == 8 && same(' '))) && cnIDValid(d[:18]) {
		return CNID, rankChecksum, true
	}
	if nd >= 13 && nd <= 19 && !plus && !paren && same(' ', '-') && (a == 0 || ng == 1) && cardGroups(ng, glen) && luhn(d[:nd]) && cardIIN(d[:nd]) {
		return Card, rankChecksum, true
	}
	if nd < 8 {
		return "", 0, false
	}
	if nd == 9 && !plus && !paren && ((ng == 3 && glen(0) == 3 && glen(1) == 2 && same('-', ' ')) || ng == 1) && ssnValid(d[:9]) {
		// SSN: dashed, or spaced or plain where the text says so, and
		// nothing nearer says it is an order or a ticket.
		labelled := keywordBefore(t.s, start, ssnWords)
		dashed := ng == 3 && sep(1) == '-'
		neg := negBefore(t.s, start)
		if dashed && neg < start-10 {
			neg = -1 // a dashed SSN is vetoed only by a word right before it
		}
		if (labelled >= 0 || dashed) && labelled >= neg {
			return SSN, rankPlain, true
		}
	}
	shape, needLabel, weak := phoneShape(t, a, ng, d[:nd], plus, paren, dotted, glen, same)
	if weak && (a > 0 || b < t.ng-1) {
		return "", 0, false // a weak shape cut out of a longer number
	}
	if !shape {
		return "", 0, false
	}
	if plus && !needLabel {
		return Phone, rankPlain, true
	}
	label := keywordBefore(t.s, start, phoneWords)
	if needLabel && label < 0 {
		return "", 0, false
	}
	if neg := negBefore(t.s, start); neg >= 0 && neg > label {
		return "", 0, false
	}
	return Phone, rankPlain, true
}

// cardGroups: a card number is written whole, in groups of four (the last
// may be shorter), or 4-6-5 (American Express) or 4-6-4 (Diners Club).
func cardGroups(ng int, glen func(int) int) bool {
	if ng == 1 {
		return true
	}
	if ng == 3 && glen(0) == 4 && glen(1) == 6 && (glen(2) == 5 || glen(2) == 4) {
		return true
	}
	for k := 0; k < ng; k++ {
		if glen(k) != 4 && (k < ng-1 || glen(k) > 4) {
			return false
		}
	}
	return true
}

func phoneShape(t *numToken, a, ng int, d []byte, plus, paren, dotted bool, glen func(int) int, same func(...byte) bool) (ok, needLabel, weak bool) {
	nd := len(d)
	if plus {
		// E.164: 8 to 15 digits; without separators at least 10, since
		// "+25000000 rows" is a count.
		return nd >= 8 && nd <= 15 && d[0] != '0' && (ng > 1 || nd >= 10), false, false
	}
	if dotted {
		// 555.123.4567 (US) or 01.23.45.67.89 (France).
		if ng == 3 && glen(0) == 3 && glen(1) == 3 && glen(2) == 4 && d[0] >= '2' {
			return true, false, false
		}
		if ng == 5 && nd == 10 && d[0] == '0' {
			for k := 0; k < 5; k++ {
				if glen(k) != 2 {
					return false, false, false
				}
			}
			return true, false, false
		}
		return false, false, false
	}
	// International with 00 instead of +.
	if nd >= 10 && nd <= 17 && d[0] == '0' && d[1] == '0' && d[2] != '0' && ng >= 2 && glen(0) == 4 {
		return true, false, false
	}
	cnMobile := func(m []byte) bool { return len(m) == 11 && m[0] == '1' && m[1] >= '3' && m[1] <= '9' }
	// Chinese mobile: 13800138000, 138 0013 8000, 138-0013-8000, 86 138...
	if cnMobile(d) && !paren && ng == 1 {
		// Plain, in Chinese text or after a label; in English text and code
		// an 11-digit number such as 17179869184 is a number.
		return true, !nonASCIINear(t.s, t.start, t.ge[a]), false
	}
	if cnMobile(d) && !paren && same(' ', '-') && ((ng == 3 && glen(0) == 3 && glen(1) == 4) || (ng == 2 && glen(0) == 3)) {
		return true, false, false
	}
	if nd == 13 && d[0] == '8' && d[1] == '6' && cnMobile(d[2:]) && (ng == 1 || (ng == 2 && glen(0) == 2) || (ng == 4 && glen(0) == 2 && glen(1) == 3 && glen(2) == 4)) {
		return true, false, false
	}
	// North America: (555) 123-4567, 555-123-4567, 555 123 4567, 1-555-123-4567.
	if ng == 3 && glen(0) == 3 && glen(1) == 3 && glen(2) == 4 && d[0] >= '2' {
		spaced := !paren && t.sep[a+1] == ' '
		return paren || t.sep[a+1] == 'p' || same('-', ' '), spaced, spaced // 555 123 4567 needs a label: "failed tests: 571 612 1056"
	}
	if ng == 4 && d[0] == '1' && glen(0) == 1 && glen(1) == 3 && glen(2) == 3 && glen(3) == 4 && d[1] >= '2' {
		return true, false, false
	}
	// National numbers with a trunk 0 (UK, DE, FR, …), written in groups.
	if d[0] == '0' && d[1] != '0' && nd >= 10 && nd <= 12 && ng >= 2 && ng <= 5 && glen(0) >= 2 && glen(0) <= 5 && !hexByteBefore(t.s, t.start) {
		return true, false, true
	}
	// Plain digits where the text says it is a phone number.
	if ng == 1 && (nd == 10 && d[0] >= '2' || nd == 11 && d[0] == '0' || nd == 11 && d[0] == '1') {
		return true, true, true
	}
	return false, false, false
}

// nonASCIINear: a byte of a non-ASCII character within 9 bytes before
// start or after end (three Chinese characters).
func nonASCIINear(s string, start, end int) bool {
	for j := max(0, start-9); j < start; j++ {
		if s[j] >= 0x80 {
			return true
		}
	}
	for j := end; j < min(len(s), end+9); j++ {
		if s[j] >= 0x80 {
			return true
		}
	}
	return false
}

// hexByteBefore: the word before i is two hex digits, as in a dump
// (<Buffer a0 8b 28 3f 01 00 00 00 50 32>).
func hexByteBefore(s string, i int) bool {
	return i >= 4 && s[i-1] == ' ' && isHex(s[i-2]) && isHex(s[i-3]) && (s[i-4] == ' ' || s[i-4] == '<') && !(isDigit(s[i-2]) && isDigit(s[i-3]))
}

// dateShape: the first three groups of [a, b] read as a date (2026-12-02,
// 02.12.2026, 12-02-2026) or a date and time.
func dateShape(t *numToken, a, b int) bool {
	if b-a < 1 {
		return false
	}
	g := func(k int) []byte { return []byte(t.s[t.gs[a+k]:t.ge[a+k]]) }
	l0, l1 := len(g(0)), len(g(1))
	if t.sep[a+1] == 'p' {
		return false
	}
	if l0 == 4 && l1 <= 2 {
		y, m := num(g(0)), num(g(1))
		if y >= 1900 && y <= 2100 && m >= 1 && m <= 12 {
			return b-a < 2 || len(g(2)) <= 2
		}
	}
	if b-a >= 2 && l0 <= 2 && l1 <= 2 && len(g(2)) == 4 {
		y := num(g(2))
		return y >= 1900 && y <= 2100 && num(g(0)) <= 31 && num(g(1)) <= 31
	}
	return false
}

var (
	phoneWords = newKeywords("phone", "telephone", "tel", "call", "calling", "caller", "callback", "reach", "dial", "ring", "text", "my number", "number is", "mobile", "cell", "cellphone", "fax", "whatsapp", "sms", "text me", "contact", "reach me", "电话", "手机", "联系", "致电", "拨打", "传真", "微信")
	ssnWords   = newKeywords("ssn", "social security", "社会安全", "社保号")
	// notPIIWords name numbers that are not about a person.
	notPIIWords = newKeywords("order", "invoice", "ticket", "tracking", "ref", "reference", "case", "build", "version", "id:", "sku", "订单", "发票", "单号", "工单", "编号", "版本", "快递", "金额", "¥", "$", "€", "£", "amount", "total", "price", "qty", "batch", "serial", "lot", "barcode", "part", "model", "item", "buffer", "bytes", "hex", "dump", "型号", "批次", "序列号", "流水号", "条码")
	// ipWords say a dotted number with small first parts is an address.
	ipWords = newKeywords("ip", "ips", "ipv4", "address", "addr", "host", "server", "dns", "resolver", "nameserver", "ping", "connect", "listen", "gateway", "proxy", "peer", "client", "remote", "upstream", "block", "allow", "whitelist", "allowlist", "地址", "服务器", "来自", "主机", "网关")
	// versionWords name dotted numbers that are versions or sections.
	versionWords = newKeywords("version", "ver.", "build", "release", "firmware", "python", "node", "java", "golang", "go ", "ios", "android", "windows", "macos", "ubuntu", "debian", "kernel", "chrome", "firefox", "rust", "php", "ruby",
		"section", "paragraph", "chapter", "clause", "article", "step", "item", "rule", "§", "版本", "章节", "条款", "第")
)

// negBefore is the end of the nearest notPIIWords keyword in the same
// clause before i (a '#' stuck to the number, as in #100234, counts), or -1.
func negBefore(s string, i int) int {
	if i > 0 && s[i-1] == '#' {
		return i - 1
	}
	from := i
	for from > 0 && i-from < window && !clauseEnd(s, from-1) {
		from--
	}
	return keywordIn(s, from, i, notPIIWords)
}

// clauseEnd: s[j] ends a clause (, ; ! ? newline, or the last byte of
// the Chinese 。，；！？、（ ）).
func clauseEnd(s string, j int) bool {
	switch s[j] {
	case ',', ';', '!', '?', '\n', '(', ')':
		return true
	}
	if j >= 2 && s[j-2] == 0xE3 && s[j-1] == 0x80 && (s[j] == 0x82 || s[j] == 0x81) { // 。、
		return true
	}
	if j >= 2 && s[j-2] == 0xEF && s[j-1] == 0xBC && (s[j] == 0x8C || s[j] == 0x9B || s[j] == 0x81 || s[j] == 0x9F || s[j] == 0x88 || s[j] == 0x89) { // ，；！？（）
		return true
	}
	return false
}

const window = 24 // bytes before a number searched for a keyword

// keywordBefore returns the end offset of the nearest keyword that ends in
// the window before i (ASCII case-insensitive, ASCII words not inside a
// longer word), or -1.
func keywordBefore(s string, i int, kw *keywords) int {
	return keywordIn(s, max(0, i-window), i, kw)
}

// keywords is a list of lowercase words and the set of their first bytes.
type keywords struct {
	words []string
	first [256]bool
}

func newKeywords(words ...string) *keywords {
	kw := &keywords{words: words}
	for _, w := range words {
		kw.first[w[0]] = true
	}
	return kw
}

// keywordIn returns the end of the keyword of kw that starts last in
// s[from:i] and ends by i, or -1. An ASCII keyword is a whole word: "ref"
// is not found in "refund", nor "part" in "partner".
func keywordIn(s string, from, i int, kw *keywords) int {
	for j := i - 1; j >= from; j-- {
		c := s[j]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if !kw.first[c] || (isAlpha(c) && j > 0 && isAlpha(s[j-1])) {
			continue
		}
		for _, w := range kw.words {
			e := j + len(w)
			if w[0] == c && e <= i && equalFold(s[j:e], w) && !(isAlpha(w[len(w)-1]) && e < len(s) && isAlpha(s[e])) {
				return e
			}
		}
	}
	return -1
}

func equalFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x := a[i]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != b[i] {
			return false
		}
	}
	return true
}
