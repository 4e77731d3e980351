package pii

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The generator of testdata/corpus.jsonl (go test -run TestCorpus -update):
// support tickets, HR notes, chat messages and log lines in English and
// Chinese with one or two values embedded in the formats people write
// them, and texts without personal data full of look-alikes (invalid Luhn
// numbers, order and invoice numbers, dates, times, versions, amounts,
// ZIP codes, hashes). The seed is fixed, so the file only changes when the
// generator does.

type corpusItem struct {
	Lang  string       `json:"lang"`
	Text  string       `json:"text"`
	Spans []corpusSpan `json:"spans"`
}

type corpusSpan struct {
	Kind  Kind `json:"kind"`
	Start int  `json:"start"`
	End   int  `json:"end"`
}

type gen struct{ r *rand.Rand }

func (g gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g gen) digits(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + g.r.IntN(10))
	}
	return string(b)
}
func (g gen) between(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }
func (g gen) alnum(n int, set string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = set[g.r.IntN(len(set))]
	}
	return string(b)
}

const (
	upperDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	alnumSet    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	urlSafe     = alnumSet + "_-"
)

// --- values ---

func (g gen) email() string {
	first := g.pick("john", "mary", "li", "wang", "zhang.wei", "anna", "peter", "chen", "liu.yang", "sarah", "o.brien", "jp", "hr-team", "support", "xiaoming", "k.tanaka")
	local := first
	switch g.r.IntN(5) {
	case 0:
		local += "." + g.pick("smith", "doe", "lee", "zhao", "garcia", "mueller")
	case 1:
		local += g.digits(g.between(2, 4))
	case 2:
		local += "_" + g.pick("work", "hk", "2024", "ops")
	case 3:
		local += "+" + g.pick("billing", "news", "test")
	}
	dom := g.pick("example.com", "example.org", "mail.example.cn", "qq.com", "163.com", "corp.example.co.uk", "example.de", "gmail.com", "outlook.com", "company.com.cn", "uni-example.edu", "example.io")
	v := local + "@" + dom
	if g.r.IntN(10) == 0 {
		v = strings.ToUpper(v[:1]) + v[1:]
	}
	return v
}

func (g gen) phone() string {
	n3 := func() string { return fmt.Sprint(g.between(2, 9)) + g.digits(2) }
	switch g.r.IntN(30) {
	case 0:
		return "(" + n3() + ") " + n3() + "-" + g.digits(4)
	case 1:
		return n3() + "-" + n3() + "-" + g.digits(4)
	case 2:
		return n3() + "." + n3() + "." + g.digits(4)
	case 3:
		return "+1 " + n3() + " " + n3() + " " + g.digits(4)
	case 4:
		return "+1-" + n3() + "-" + n3() + "-" + g.digits(4)
	case 5:
		return "1-" + n3() + "-" + n3() + "-" + g.digits(4)
	case 6:
		return "+1 (" + n3() + ") " + n3() + "-" + g.digits(4)
	case 7:
		return "020 7946 " + g.digits(4)
	case 8:
		return "07700 900" + g.digits(3)
	case 9:
		return "+44 20 7946 " + g.digits(4)
	case 10:
		return "+44 7700 900" + g.digits(3)
	case 11:
		return "030 " + g.digits(8)
	case 12:
		return "+49 " + g.pick("30", "89", "170", "151") + " " + g.digits(g.between(7, 8))
	case 13:
		return "0" + g.pick("1", "6", "7") + " " + g.digits(2) + " " + g.digits(2) + " " + g.digits(2) + " " + g.digits(2)
	case 14:
		return "+33 " + g.pick("1", "6", "7") + " " + g.digits(2) + " " + g.digits(2) + " " + g.digits(2) + " " + g.digits(2)
	case 15:
		return "+49 (0)30 " + g.digits(g.between(6, 8))
	case 16:
		return "+1" + n3() + n3() + g.digits(4)
	case 17:
		return "+1." + n3() + "." + n3() + "." + g.digits(4)
	case 18:
		area := g.pick("10", "21", "755", "571", "20")
		return "0" + area + "-" + g.digits(10-len(area))
	case 19:
		return "+86 " + g.pick("10", "21") + " " + g.digits(4) + " " + g.digits(4)
	case 20:
		return "0" + g.pick("6", "7") + "." + g.digits(2) + "." + g.digits(2) + "." + g.digits(2) + "." + g.digits(2)
	case 21:
		return "+44 (0)20 7946 " + g.digits(4)
	}
	// Chinese mobile numbers, the most common in Chinese text.
	m := "1" + g.pick("3", "5", "7", "8", "9") + g.digits(9)
	switch g.r.IntN(7) {
	case 0:
		return m[:3] + " " + m[3:7] + " " + m[7:]
	case 1:
		return m[:3] + "-" + m[3:7] + "-" + m[7:]
	case 2:
		return "+86 " + m[:3] + " " + m[3:7] + " " + m[7:]
	case 3:
		return "+86-" + m
	case 4:
		return "+86" + m
	}
	return m
}

func luhnComplete(body string) string {
	for c := byte('0'); c <= '9'; c++ {
		if luhn([]byte(body + string(c))) {
			return body + string(c)
		}
	}
	panic("unreachable")
}

func (g gen) cardDigits() string {
	var p string
	n := 16
	switch g.r.IntN(9) {
	case 7:
		p, n = g.pick("36", "38", "300", "305"), 14 // Diners Club
	case 8:
		p = g.pick("50", "56", "67") // Maestro
	case 0, 1:
		p = "4"
	case 2:
		p = fmt.Sprint(g.between(51, 55))
	case 3:
		p, n = g.pick("34", "37"), 15
	case 4:
		p = "6011"
	case 5:
		p = "62"
		if g.r.IntN(2) == 0 {
			n = 19
		}
	case 6:
		p = fmt.Sprint(g.between(3528, 3589))
	}
	return luhnComplete(p + g.digits(n-1-len(p)))
}

func groupCard(d, sep string) string {
	if len(d) == 15 || len(d) == 14 {
		return d[:4] + sep + d[4:10] + sep + d[10:]
	}
	var parts []string
	for i := 0; i < len(d); i += 4 {
		parts = append(parts, d[i:min(i+4, len(d))])
	}
	return strings.Join(parts, sep)
}

func (g gen) card() string {
	d := g.cardDigits()
	switch g.r.IntN(3) {
	case 0:
		return d
	case 1:
		return groupCard(d, " ")
	}
	return groupCard(d, "-")
}

// ibanBBAN gives a BBAN of the right length for a few countries.
func (g gen) iban() string {
	cc := g.pick("DE", "GB", "FR", "ES", "IT", "NL", "CH", "BE", "AT", "PL")
	var bban string
	switch cc {
	case "GB":
		bban = g.pick("WEST", "BARC", "NWBK", "HSBC") + g.digits(14)
	case "NL":
		bban = g.pick("ABNA", "INGB", "RABO") + g.digits(10)
	case "IT":
		bban = string(rune('A'+g.r.IntN(26))) + g.digits(22)
	default:
		bban = g.digits(ibanLength[cc] - 4)
	}
	check := 98 - mod97(bban+cc+"00")
	v := fmt.Sprintf("%s%02d%s", cc, check, bban)
	if g.r.IntN(2) == 0 {
		var parts []string
		for i := 0; i < len(v); i += 4 {
			parts = append(parts, v[i:min(i+4, len(v))])
		}
		return strings.Join(parts, " ")
	}
	return v
}

func mod97(s string) int {
	rem := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			rem = (rem*100 + int(c-'A') + 10) % 97
		} else {
			rem = (rem*10 + int(c-'0')) % 97
		}
	}
	return rem
}

func cnIDCheck(d17 string) byte {
	weights := [17]int{7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2}
	sum := 0
	for i := 0; i < 17; i++ {
		sum += int(d17[i]-'0') * weights[i]
	}
	return "10X98765432"[sum%11]
}

func (g gen) cnID() string {
	region := g.pick("110105", "310101", "440305", "330106", "510107", "420102", "320102", "610113", "210202", "370202")
	d17 := fmt.Sprintf("%s%04d%02d%02d%s", region, g.between(1950, 2006), g.between(1, 12), g.between(1, 28), g.digits(3))
	v := d17 + string(cnIDCheck(d17))
	if v[17] == 'X' && g.r.IntN(4) == 0 {
		v = v[:17] + "x"
	}
	if g.r.IntN(8) == 0 {
		v = v[:6] + " " + v[6:14] + " " + v[14:]
	}
	return v
}

func (g gen) ssnParts() (string, string, string) {
	area := g.between(1, 899)
	for area == 666 {
		area = g.between(1, 899)
	}
	return fmt.Sprintf("%03d", area), fmt.Sprintf("%02d", g.between(1, 99)), fmt.Sprintf("%04d", g.between(1, 9999))
}

func (g gen) ipv4() string {
	return fmt.Sprintf("%d.%d.%d.%d", g.pick4(), g.between(0, 255), g.between(0, 255), g.between(1, 254))
}
func (g gen) pick4() int {
	return []int{10, 172, 192, 203, 8, 34, 52, 100, 185, 45}[g.r.IntN(10)]
}

func (g gen) ipv6() string {
	h := func() string { return fmt.Sprintf("%x", g.r.IntN(0x10000)) }
	switch g.r.IntN(5) {
	case 4:
		return "2001:db8:" + h() + "::" + h() + ":" + h()
	case 0:
		return "2001:db8::" + h()
	case 1:
		return "fe80::" + h() + ":" + h() + ":" + h() + ":" + h()
	case 2:
		return fmt.Sprintf("2001:0db8:%04x:%04x:%04x:%04x:%04x:%04x", g.r.IntN(0x10000), g.r.IntN(0x10000), g.r.IntN(0x10000), g.r.IntN(0x10000), g.r.IntN(0x10000), g.r.IntN(0x10000))
	}
	return "2606:4700:" + h() + "::" + h()
}

func (g gen) secret() string {
	switch g.r.IntN(9) {
	case 0:
		return "sk-ant-api03-" + g.alnum(g.between(80, 95), urlSafe) + "AA"
	case 1:
		return "sk-proj-" + g.alnum(g.between(48, 120), urlSafe) + "9"
	case 2:
		return "sk-" + g.alnum(48, alnumSet)
	case 3:
		return g.pick("AKIA", "ASIA") + g.alnum(16, upperDigits)
	case 4:
		return g.pick("ghp_", "gho_", "ghs_") + g.alnum(36, alnumSet)
	case 5:
		return "xoxb-" + g.digits(12) + "-" + g.digits(13) + "-" + g.alnum(24, alnumSet)
	case 6:
		return "AIza" + g.alnum(35, urlSafe)
	case 7:
		return "glpat-" + g.alnum(20, urlSafe)
	}
	return "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + g.alnum(g.between(30, 60), urlSafe) + "." + g.alnum(43, urlSafe)
}

// --- sentences ---

// slot marks where a value goes in a template.
const slot = "{}"

var templates = map[Kind]map[string][]string{
	Email: {
		"en": {
			"Please send the signed contract to {} by Friday.",
			"Customer Jane Miller ({}) reports login failures since the 3.2.0 update.",
			"[2026-11-30 10:22:01] WARN smtp: bounce for <{}> after 3 retries",
			"hey, new email is {} — the old one is dead",
			"HR note: employee #4471 changed her contact address to {} on 2026-10-01.",
			"Can you cc {} on ticket T-20931? Thanks!",
			"From: {}\nSubject: Refund for order ORD-2025-000123",
			"mailto:{}",
			"Reach out to {}, they handle invoices over $5,000.",
			"The form rejects {} with error 422, can you check the validator?",
		},
		"zh": {
			"请把合同发到我的邮箱{}，谢谢。",
			"客户邮箱：{}，问题：升级到 2.4.1 后无法登录。",
			"新员工入职，工作邮箱 {} 已开通，工号 20251104。",
			"你好，我的邮箱是{}，订单号 ORD-2025-000877 还没发货。",
			"麻烦抄送一下 {} ，她负责 12 月的报销。",
			"日志：2026-12-01 08:15:22 发送邮件至 {} 失败（重试 3 次）",
		},
	},
	Phone: {
		"en": {
			"Call me back at {} after 5pm.",
			"Customer phone: {}. Prefers SMS.",
			"HR: emergency contact for employee 3391 is her husband, {}.",
			"You can reach our London desk on {} between 9 and 17.",
			"my number changed, it's {} now",
			"Delivery failed — driver tried {} twice on 2026-12-01.",
			"Tel. {} | Fax: n/a",
			"cell #: {}",
			"Tel: {} ext. 204",
			"Please text {} when the package (order ORD-2025-004512) arrives.",
			"Whatsapp {} if the 10:30 meeting moves.",
			"The caller left {} as a callback number and ticket T-88120.",
		},
		"zh": {
			"我的手机号是{}，有问题随时联系。",
			"客户电话：{}，要求今天下午 3 点前回电。",
			"请拨打{}联系张经理。",
			"收件人：王芳，电话 {}，地址：北京市海淀区中关村大街 27 号。",
			"紧急联系人李强 {}（配偶）。",
			"司机说打了{}两次都没人接，快递单号 SF1234567890123。",
			"麻烦加一下微信，手机同号 {}",
		},
	},
	Card: {
		"en": {
			"Please refund the $49.99 to my card {}.",
			"Card number: {} exp 09/28 — charged twice on 2026-11-28.",
			"I paid with {} but order ORD-2025-000431 still says unpaid.",
			"payment failed for card {} (code 05, do not honor)",
			"Can you update the card on file to {}? The old one expired.",
			"my visa is {} lol don't tell anyone",
		},
		"zh": {
			"我的银行卡号是{}，请退款到这张卡。",
			"信用卡 {} 在 11 月 28 日被重复扣款 299 元。",
			"支付失败：卡号{}，错误码 51。",
			"请把尾款打到卡号 {} ，户名张伟。",
			"退款卡号：{}（招商银行）",
		},
	},
	IBAN: {
		"en": {
			"Please wire the deposit to IBAN {} by 15 December.",
			"Supplier bank details changed: new IBAN {}, BIC DEUTDEFF.",
			"Salary account for employee 5521: {}",
			"Refund to {} please, reference INV-2025-0042.",
			"payment to {} bounced, amount EUR 1,250.00",
		},
		"zh": {
			"请汇款至 IBAN：{}，金额 2,000 欧元。",
			"供应商的新账户是{}，请更新付款信息。",
			"退款账户 {}（德国）。",
			"员工 2291 的工资账户改为 {}。",
		},
	},
	CNID: {
		"en": {
			"Passenger ID (PRC resident card): {}",
			"Please verify the ID number {} for the new hire.",
			"KYC failed for id {} — name mismatch.",
		},
		"zh": {
			"我的身份证号是{}，请帮我查一下订单。",
			"身份证号码：{}，姓名：李娜。",
			"入职资料：身份证 {}，学历本科。",
			"乘车人 王建国 {} 已购票。",
			"请核实证件号{}是否与本人一致。",
			"办理人身份证号 {} ，手续费 20 元已收。",
		},
	},
	SSN: {
		"en": {
			"SSN: {}",
			"Employee's social security number is {}, please add it to payroll.",
			"W-2 shows SSN {} but the name is misspelled.",
			"my ssn {} got rejected on the form",
			"Applicant: Robert Hill, DOB 1984-03-12, SSN {}.",
		},
		"zh": {
			"美国员工的社会安全号（SSN）是 {}。",
			"SSN：{}，请核对。",
		},
	},
	IPv4: {
		"en": {
			"Failed login from {} at 03:12 UTC, 5 attempts.",
			"The app server is at {}:8443, the DB at port 5432.",
			"block {} in the WAF please",
			"2026-12-02T10:00:01Z ERROR upstream {} timed out after 30s",
			"Whitelist {}/32 for the partner.",
		},
		"zh": {
			"来自 {} 的异常登录，已封禁。",
			"服务器地址是{}，端口 22。",
			"请把 {} 加入白名单。",
		},
	},
	IPv6: {
		"en": {
			"Client address {} was rate-limited at 10:30.",
			"curl -g 'http://[{}]:8080/health' times out",
			"ping6 {} fails from the bastion",
			"Add {} to the allow list.",
		},
		"zh": {
			"来自 {} 的请求被限流。",
			"服务器 IPv6 地址：{}",
		},
	},
	Secret: {
		"en": {
			"Here is my key {} — why do I get 401?",
			"export OPENAI_API_KEY={}",
			"curl -H \"Authorization: Bearer {}\" https://api.example.com/v1/models",
			"config.yaml: api_key: {}",
			"I accidentally committed {} to the repo, how do I rotate it?",
			"{\"api_key\": \"{}\", \"model\": \"gpt-4o\", \"max_tokens\": 1024}",
			"ANTHROPIC_API_KEY='{}' python app.py --retries 3",
			"DB_PASSWORD={} docker compose up fails with auth error",
			"my wifi password: {} — can you tell me if it's strong?",
			"client_secret: \"{}\"",
		},
		"zh": {
			"我的密钥是{}，为什么一直报 401？",
			"请帮我看看这个配置：api_key: {}",
			"不小心把 {} 提交到了 GitHub，怎么办？",
			"数据库配置 password={}，连不上。",
			"服务器 root 密码：{}，用完记得改。",
		},
	},
}

// labelledSSN and plainCN give the formats that need their label.
func (g gen) value(k Kind, lang string) (tmplOverride, v string) {
	switch k {
	case Email:
		return "", g.email()
	case Phone:
		return "", g.phone()
	case Card:
		return "", g.card()
	case IBAN:
		return "", g.iban()
	case CNID:
		return "", g.cnID()
	case SSN:
		a, b, c := g.ssnParts()
		if g.r.IntN(4) == 0 {
			return g.pick("SSN {}", "social security no. {}", "SSN: {} (on file)", "社会安全号 {}"), strings.Join([]string{a, b, c}, g.pick(" ", ""))
		}
		return "", a + "-" + b + "-" + c
	case IPv4:
		return "", g.ipv4()
	case IPv6:
		return "", g.ipv6()
	case Secret:
		s := g.secret()
		if lang == "en" && g.r.IntN(6) == 0 {
			return "Authorization: Bearer {}", g.alnum(g.between(24, 40), alnumSet) + g.digits(2)
		}
		return "", s
	}
	panic(k)
}

var allKinds = []Kind{Email, Phone, Card, IBAN, CNID, SSN, IPv4, IPv6, Secret}

func fill(tmpl string, vals ...corpusValue) (string, []corpusSpan) {
	var b strings.Builder
	var spans []corpusSpan
	rest := tmpl
	for _, v := range vals {
		i := strings.Index(rest, slot)
		b.WriteString(rest[:i])
		spans = append(spans, corpusSpan{v.kind, b.Len(), b.Len() + len(v.v)})
		b.WriteString(v.v)
		rest = rest[i+len(slot):]
	}
	b.WriteString(rest)
	return b.String(), spans
}

// fullwidth writes v's digits, '+', '-', X and spaces in full width.
func fullwidth(v string) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune('０' + r - '0')
		case r == '+':
			b.WriteRune('＋')
		case r == '-':
			b.WriteRune('－')
		case r == 'X' || r == 'x':
			b.WriteRune('Ｘ')
		case r == ' ':
			b.WriteRune('　')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

type corpusValue struct {
	kind Kind
	v    string
}

// negatives: texts without personal data, with look-alikes.
func (g gen) negative(lang string) string {
	bad16 := func() string { // a card-shaped number that fails Luhn
		d := g.cardDigits()
		last := (int(d[len(d)-1]-'0') + g.between(1, 9)) % 10
		d = d[:len(d)-1] + fmt.Sprint(last)
		if g.r.IntN(2) == 0 {
			return groupCard(d, " ")
		}
		return d
	}
	badIBAN := func() string {
		v := strings.ReplaceAll(g.iban(), " ", "")
		c := (int(v[2]-'0')*10 + int(v[3]-'0') + g.between(1, 90)) % 97
		if c < 2 {
			c += 2
		}
		return fmt.Sprintf("%s%02d%s", v[:2], c, v[4:])
	}
	badCNID := func() string {
		v := g.cnID()
		c := cnIDCheck(v[:17])
		for _, o := range "0123456789X" {
			if byte(o) != c {
				if g.r.IntN(3) == 0 {
					return v[:17] + string(o)
				}
			}
		}
		return v[:17] + map[bool]string{true: "1", false: "0"}[c == '0']
	}
	date := func() string {
		y, m, d := g.between(2019, 2027), g.between(1, 12), g.between(1, 28)
		return g.pick(fmt.Sprintf("%d-%02d-%02d", y, m, d), fmt.Sprintf("%02d/%02d/%d", m, d, y), fmt.Sprintf("%02d.%02d.%d", d, m, y), fmt.Sprintf("%d/%d/%d", y, m, d), fmt.Sprintf("%d-%02d-%02d %02d:%02d:%02d", y, m, d, g.between(0, 23), g.between(0, 59), g.between(0, 59)))
	}
	version := func() string {
		return g.pick(fmt.Sprintf("v%d.%d.%d", g.between(0, 12), g.between(0, 30), g.between(0, 99)), fmt.Sprintf("%d.%d.%d", g.between(0, 12), g.between(0, 30), g.between(0, 99)),
			fmt.Sprintf("10.0.%d.%d", g.between(19041, 26100), g.between(1, 5000)), fmt.Sprintf("version %d.%d.%d.%d", g.between(1, 9), g.between(0, 9), g.between(0, 9), g.between(0, 99)),
			fmt.Sprintf("%d.%d.%d-rc%d", g.between(1, 5), g.between(0, 20), g.between(0, 9), g.between(1, 4)))
	}
	order := func() string {
		return g.pick("ORD-"+fmt.Sprint(g.between(2019, 2026))+"-"+g.digits(6), "#"+g.digits(6), "INV-"+g.digits(4)+"-"+g.digits(4), "PO"+g.digits(8), "SF"+g.digits(13), "1Z"+g.alnum(16, upperDigits), "T-"+g.digits(5))
	}
	amount := func() string {
		return g.pick(fmt.Sprintf("$%d,%03d.%02d", g.between(1, 99), g.between(0, 999), g.between(0, 99)), fmt.Sprintf("¥%d,%03d.00", g.between(1, 99), g.between(0, 999)), fmt.Sprintf("€ %d,%02d", g.between(1, 999), g.between(0, 99)), fmt.Sprintf("%d.%02d USD", g.between(1, 9999), g.between(0, 99)))
	}
	zip := func() string {
		return g.pick(g.digits(5), g.digits(5)+"-"+g.digits(4), "SW1A 1AA", "100080", "200120", "10115")
	}
	hash := func() string { return g.alnum(7, "0123456789abcdef") }
	uuid := func() string {
		h := "0123456789abcdef"
		return g.alnum(8, h) + "-" + g.alnum(4, h) + "-4" + g.alnum(3, h) + "-a" + g.alnum(3, h) + "-" + g.alnum(12, h)
	}
	plainLong := func() string { return fmt.Sprint(g.between(1, 9)) + g.digits(g.between(7, 13)) } // ids, timestamps, account numbers
	time := func() string { return fmt.Sprintf("%02d:%02d", g.between(0, 23), g.between(0, 59)) }

	if lang == "en" {
		switch g.r.IntN(33) {
		case 24:
			return fmt.Sprintf("The table grew by +%d rows overnight.", g.between(10000000, 99999999))
		case 25:
			return fmt.Sprintf("Meet at %d.%04d, %d.%04d near the north gate.", g.between(20, 50), g.between(0, 9999), g.between(100, 130), g.between(0, 9999))
		case 26:
			return fmt.Sprintf("Total: %d %03d %03d,%02d € incl. VAT.", g.between(1, 99), g.between(0, 999), g.between(0, 999), g.between(0, 99))
		case 27:
			return "Routing number " + g.digits(9) + " belongs to a bank in New York."
		case 28:
			return "Timestamp " + fmt.Sprintf("%d-%02d-%02dT%02d:%02d:%02d+08:00", g.between(2020, 2026), g.between(1, 12), g.between(1, 28), g.between(0, 23), g.between(0, 59), g.between(0, 59)) + " is in Beijing time."
		case 29:
			return "Reach the desk on ext. " + g.digits(4) + ", hours 9-17, Mon-Fri."
		case 30:
			return "The pointer 0x" + g.alnum(12, "0123456789abcdef") + " is freed twice in std::vector<int>::iterator code."
		case 32:
			return g.pick("password: please use the reset link we sent", "api_key: YOUR_API_KEY", "token: <paste your token here>", "DB_PASSWORD=${DB_PASSWORD}", "secret: /etc/ssl/private/server2.key", "password=********", "Set OPENAI_API_KEY=sk-... in your shell first.", "the sk-2024-roadmap-planning-doc is in the shared drive", "Use Bearer authentication-scheme-2024 as described.") + " (step " + fmt.Sprint(g.between(1, 9)) + ")"
		case 31:
			return fmt.Sprintf("Score %d.%d / 100, rank %d of %d.", g.between(50, 99), g.between(0, 9), g.between(1, 2000), g.between(2000, 50000))
		case 0:
			return "Order " + order() + " was shipped on " + date() + ", total " + amount() + "."
		case 1:
			return "After upgrading to " + version() + " on " + date() + " the export job fails at " + time() + "."
		case 2:
			return "The card number " + bad16() + " was rejected as invalid — is the form validating Luhn?"
		case 3:
			return "Invoice " + order() + " for " + amount() + " is due " + date() + "."
		case 4:
			return "Ship to 1 Market St, San Francisco, CA " + zip() + " before " + date() + "."
		case 5:
			return "commit " + hash() + " bumps the lib to " + version() + " and fixes #" + g.digits(4) + "."
		case 6:
			return fmt.Sprintf("[%s] INFO request_id=%s latency=%dms status=200 bytes=%d", date(), uuid(), g.between(3, 900), g.between(100, 99999))
		case 7:
			return "Windows build " + version() + " crashes when the RAM is above " + fmt.Sprint(g.between(8, 64)) + " GB."
		case 8:
			return "Tracking number " + order() + ", estimated delivery " + date() + " between " + time() + " and " + time() + "."
		case 9:
			return "We sold " + fmt.Sprintf("%d,%03d", g.between(1, 999), g.between(0, 999)) + " units in Q" + fmt.Sprint(g.between(1, 4)) + ", up " + fmt.Sprint(g.between(1, 40)) + "% on " + fmt.Sprint(g.between(2019, 2025)) + "."
		case 10:
			return "The IBAN " + badIBAN() + " fails validation — did the customer mistype a digit?"
		case 11:
			return "Please reconcile batch " + plainLong() + " with ledger entry " + plainLong() + "."
		case 12:
			return "Meeting moved to " + date() + " " + time() + "; room 1203, dial-in code " + g.digits(6) + "#."
		case 13:
			return "Section " + fmt.Sprintf("%d.%d.%d", g.between(1, 9), g.between(1, 9), g.between(1, 9)) + " of the spec says the timeout is " + fmt.Sprint(g.between(5, 120)) + "s."
		case 14:
			return "AWS account " + g.digits(12) + " hit the limit of " + fmt.Sprint(g.between(100, 5000)) + " requests/s at " + time() + "."
		case 15:
			return "The unix timestamp " + fmt.Sprint(g.between(1600000000, 1800000000)) + " is " + date() + " in UTC."
		case 16:
			return "Use sk-learn " + version() + " and the Bearer token flow described in RFC 6750."
		case 17:
			return "pip install numpy==" + fmt.Sprintf("%d.%d.%d", g.between(1, 2), g.between(0, 26), g.between(0, 9)) + " fails on Python 3.12 with error 0x80070005."
		case 18:
			return fmt.Sprintf("Temperature %d.%d°C, humidity %d%%, pressure %d hPa at %s.", g.between(-10, 40), g.between(0, 9), g.between(10, 99), g.between(950, 1050), time())
		case 19:
			return "Ticket " + order() + ": customer wants a refund of " + amount() + " for the " + date() + " stay."
		case 20:
			return "Gas meter reading " + g.digits(5) + "." + g.digits(1) + " m³ on " + date() + ", next due " + date() + "."
		case 21:
			return "ISBN 978-" + g.digits(1) + "-" + g.digits(3) + "-" + g.digits(5) + "-" + g.digits(1) + " is out of stock until " + date() + "."
		case 22:
			return "The product code " + fmt.Sprint(g.between(1, 9)) + g.digits(12) + " has a wrong check digit."
		}
		return "Summarise the " + fmt.Sprint(g.between(2, 40)) + " page report from " + date() + " in " + fmt.Sprint(g.between(3, 10)) + " bullet points."
	}
	switch g.r.IntN(26) {
	case 20:
		return fmt.Sprintf("坐标 %d.%04d, %d.%04d，集合时间 %s。", g.between(20, 50), g.between(0, 9999), g.between(100, 130), g.between(0, 9999), time())
	case 21:
		return "请翻译第 " + fmt.Sprintf("%d.%d.%d.%d", g.between(1, 9), g.between(1, 9), g.between(1, 9), g.between(1, 9)) + " 条的内容。"
	case 22:
		return "编号 " + g.digits(4) + " " + g.digits(4) + " " + g.digits(4) + " 的设备已经报废。"
	case 23:
		return "会员积分 +" + fmt.Sprint(g.between(100, 99999)) + "，有效期至 " + date() + "。"
	case 25:
		return g.pick("忘记密码：请点击登录页的重置链接。", "密钥为空时接口返回 401。", "令牌过期时间是 3600 秒。", "密码长度至少 8 位，必须包含数字。")
	case 24:
		return "这个版本号 " + version() + " 和 " + version() + " 哪个更新？"
	case 0:
		return "订单号 " + plainLong() + " 已于 " + date() + " 发货，金额 " + amount() + "。"
	case 1:
		return "升级到 " + version() + " 之后，导出任务在 " + time() + " 失败。"
	case 2:
		return "卡号 " + bad16() + " 校验不通过，麻烦确认一下是不是输错了。"
	case 3:
		return "发票号码 " + g.digits(8) + "，开票日期 " + date() + "，合计 " + amount() + "。"
	case 4:
		return "邮编 " + zip() + "，请在 " + date() + " 前寄出。"
	case 5:
		return "身份证号 " + badCNID() + " 校验失败，请重新上传证件照片。"
	case 6:
		return fmt.Sprintf("%s 系统日志：请求 %s 耗时 %dms，状态码 %d。", date(), uuid(), g.between(3, 900), g.pick2(200, 502))
	case 7:
		return "快递单号 SF" + g.digits(12) + "，预计 " + date() + " " + time() + " 送达。"
	case 8:
		return fmt.Sprintf("今年第 %d 季度销量 %d,%03d 台，同比增长 %d%%。", g.between(1, 4), g.between(1, 999), g.between(0, 999), g.between(1, 50))
	case 9:
		return "工单 " + order() + "：客户要求退款 " + amount() + "。"
	case 10:
		return "版本 " + version() + " 修复了 #" + g.digits(4) + " 号问题，提交 " + hash() + "。"
	case 11:
		return fmt.Sprintf("会议改到 %s %s，会议号 %s %s %s。", date(), time(), g.digits(3), g.digits(3), g.digits(3))
	case 12:
		return "这个 IBAN " + badIBAN() + " 校验不通过。"
	case 13:
		return fmt.Sprintf("%d年%d月%d日 %s，气温 %d.%d 度。", g.between(2019, 2026), g.between(1, 12), g.between(1, 28), time(), g.between(-10, 40), g.between(0, 9))
	case 14:
		return "批次号 " + plainLong() + "，共 " + fmt.Sprint(g.between(1, 500)) + " 件，单价 " + amount() + "。"
	case 15:
		return "请把第 " + fmt.Sprintf("%d.%d.%d", g.between(1, 9), g.between(1, 9), g.between(1, 9)) + " 节翻译成英文，字数约 " + fmt.Sprint(g.between(200, 3000)) + " 字。"
	case 16:
		return "商品编码 " + fmt.Sprint(g.between(1, 9)) + g.digits(12) + "，库存 " + fmt.Sprint(g.between(0, 999)) + " 件。"
	case 17:
		return "时间戳 " + fmt.Sprint(g.between(1600000000, 1800000000)) + " 对应北京时间 " + date() + "。"
	case 18:
		return "合同编号 HT-" + g.digits(4) + "-" + g.digits(4) + "，有效期至 " + date() + "。"
	}
	return "帮我总结一下这份 " + fmt.Sprint(g.between(2, 40)) + " 页的报告，" + date() + " 之前要。"
}

func (g gen) pick2(a, b int) int {
	if g.r.IntN(2) == 0 {
		return a
	}
	return b
}

// generateCorpus makes n positive items (each kind in turn, EN and ZH, a
// fifth of them with a second value) and m items without personal data.
func generateCorpus(n, m int) []corpusItem {
	g := gen{rand.New(rand.NewPCG(18, 1))}
	var items []corpusItem
	for i := 0; i < n; i++ {
		k := allKinds[i%len(allKinds)]
		lang := []string{"en", "zh"}[(i/len(allKinds))%2]
		over, v := g.value(k, lang)
		if lang == "zh" && (k == Phone || k == CNID || k == Card) && g.r.IntN(12) == 0 {
			v = fullwidth(v) // typed with the input method in full-width mode
		}
		tmpl := over
		if tmpl == "" {
			ts := templates[k][lang]
			tmpl = ts[g.r.IntN(len(ts))]
		}
		vals := []corpusValue{{k, v}}
		if g.r.IntN(5) == 0 && over == "" {
			k2 := allKinds[g.r.IntN(len(allKinds))]
			if over2, v2 := g.value(k2, lang); k2 != k && over2 == "" {
				tmpl += map[string]string{"en": " (alt: " + slot + ")", "zh": "（备用：" + slot + "）"}[lang]
				vals = append(vals, corpusValue{k2, v2})
			}
		}
		text, spans := fill(tmpl, vals...)
		items = append(items, corpusItem{Lang: lang, Text: text, Spans: spans})
	}
	for i := 0; i < m; i++ {
		lang := []string{"en", "zh"}[i%2]
		items = append(items, corpusItem{Lang: lang, Text: g.negative(lang), Spans: []corpusSpan{}})
	}
	return items
}
