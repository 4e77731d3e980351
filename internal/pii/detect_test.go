package pii

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// findCases are the table cases; FuzzFind is seeded from them.
var findCases = []struct {
	name string
	text string
	want []string // "KIND value", in order
}{
	{"email", "mail john.doe@example.com now", []string{"EMAIL john.doe@example.com"}},
	{"email zh", "邮箱zhang.san+ops@mail.example.cn。", []string{"EMAIL zhang.san+ops@mail.example.cn"}},
	{"email with digits local part", "13800138000@163.com", []string{"EMAIL 13800138000@163.com"}},
	{"us phone paren and e164", "call +1 (555) 123-4567 or 555-123-4567", []string{"PHONE +1 (555) 123-4567", "PHONE 555-123-4567"}},
	{"uk de fr phones", "020 7946 0958, +44 20 7946 0958, 01 23 45 67 89, 030 12345678", []string{"PHONE 020 7946 0958", "PHONE +44 20 7946 0958", "PHONE 01 23 45 67 89", "PHONE 030 12345678"}},
	{"cn mobiles", "手机 138 0013 8000，或13900139000", []string{"PHONE 138 0013 8000", "PHONE 13900139000"}},
	{"cn mobile +86", "请拨打+86 139-1234-5678联系", []string{"PHONE +86 139-1234-5678"}},
	{"two phones in a row", "电话 13800138000 13900139000", []string{"PHONE 13800138000", "PHONE 13900139000"}},
	{"plain chinese mobile in english text", "my number is 13800138000, and 17179869184 is 2^34", []string{"PHONE 13800138000"}},
	{"card spaced", "卡号 4111 1111 1111 1111。", []string{"CARD 4111 1111 1111 1111"}},
	{"card amex dashed", "amex 3782-822463-10005 exp 12/28", []string{"CARD 3782-822463-10005"}},
	{"card invalid luhn", "card 4111 1111 1111 1112", nil},
	{"iban grouped", "IBAN DE89 3704 0044 0532 0130 00 ok", []string{"IBAN DE89 3704 0044 0532 0130 00"}},
	{"iban whole", "pay to GB82WEST12345698765432.", []string{"IBAN GB82WEST12345698765432"}},
	{"iban bad check", "GB83WEST12345698765432", nil},
	{"cn id X", "身份证11010519491231002X", []string{"CN_ID 11010519491231002X"}},
	{"cn id bad check", "身份证110105194912310021", nil},
	{"ssn dashed", "SSN 123-45-6789", []string{"SSN 123-45-6789"}},
	{"ssn labelled plain", "social security number: 123456789", []string{"SSN 123456789"}},
	{"ssn invalid area", "666-45-6789", nil},
	{"plain nine digits", "tracking 123456789", nil},
	{"ipv4 and ipv6", "ip 192.168.1.10:8080 and 2001:db8::1", []string{"IPV4 192.168.1.10", "IPV6 2001:db8::1"}},
	{"ipv6 full", "from 2001:0db8:85a3:0000:0000:8a2e:0370:7334.", []string{"IPV6 2001:0db8:85a3:0000:0000:8a2e:0370:7334"}},
	{"secrets", "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789 AKIAIOSFODNN7EXAMPLE", []string{"SECRET sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789", "SECRET AKIAIOSFODNN7EXAMPLE"}},
	{"bearer", "Authorization: Bearer abc123def456ghi789jkl", []string{"SECRET abc123def456ghi789jkl"}},
	{"github token", "token ghp_0123456789abcdefghijABCDEFGHIJ012345 leaked", []string{"SECRET ghp_0123456789abcdefghijABCDEFGHIJ012345"}},
	{"dates times versions orders", "on 2026-12-02 at 10:30:15, v1.2.3 and 10.0.19045.2965, ORD-2025-000123, 02.12.2026", nil},
	{"version four parts", "upgrade to version 2.4.1.0 today", nil},
	{"amounts and zip", "total $1,234.56 shipped to 94105-1234, qty 3", nil},
	{"mac and time", "mac 00:1A:2B:3C:4D:5E at 12:30:45", nil},
	{"order number digits", "订单号 20251202000123 已发货", nil},
	{"invoice with phone-like", "invoice 555-123-4567", nil},
	{"phone after cell #", "cell #: 555-123-4567", []string{"PHONE 555-123-4567"}},
	{"hash stuck to number", "see #555-123-4567", nil},
	{"plus count", "the table grew by +25000000 rows", nil},
	{"ean-13 product code", "product code 4114029961468", nil},
	{"jwt ending in dash", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcDEF123-", []string{"SECRET eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcDEF123-"}},
	{"order word in an earlier clause", "我想查一下订单。（备用：17419230473）", []string{"PHONE 17419230473"}},
	{"order word in the same clause", "订单号 17419230473 已发货", nil},
	{"netmask", "subnet mask 255.255.255.0", nil},
	{"product version", "Python 3.12.0.1 is out", nil},
	{"section number", "see paragraph 4.2.1.3 of the contract", nil},
	{"ipv4 cidr", "allow 10.0.0.0/8 and 203.0.113.7/32", []string{"IPV4 10.0.0.0", "IPV4 203.0.113.7"}},
	{"ssn label before hash", "SSN#078-05-1120", []string{"SSN 078-05-1120"}},
	{"password setting", "DB_PASSWORD=Xy7pQ2rs9Lm docker compose up", []string{"SECRET Xy7pQ2rs9Lm"}},
	{"secret settings without a secret", "password: please reset it; api_key: YOUR_API_KEY; secret: /etc/ssl/k2.pem; DB_PASSWORD=${DB_PASSWORD}", nil},
	{"slugs and schemes", "the sk-2024-roadmap-planning-doc and Bearer authentication-scheme-2024", nil},
	{"token in a url's user info", "https://ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789@github.com/acme/app.git", []string{"SECRET ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"}},
	{"chinese password label", "我的邮箱密码是Qwe123!@#Asd，别告诉别人", []string{"SECRET Qwe123!@#Asd"}},
	{"chinese password words", "忘记密码：请点击重置链接；密钥为空", nil},
	{"loopback", "listen on 127.0.0.1:7878 and [::1]:7878", nil},
	{"secret settings in code", `opt.Password = cfg.Password.Value(); "X-Api-Key": goodSecret`, nil},
	{"vim filename modifiers", "*::8* *::p* *::e* and ::ffff:192.0.2.1", []string{"IPV6 ::ffff:192.0.2.1"}},
	{"part number", "Part no. 555-010-2000 is back-ordered", nil},
	{"programmer's numbers", "MAX_SAFE_INTEGER is 9007199254740991, uint64 max 18446744073709551615, exit code -1073741819, int max 2147483647", nil},
	{"uuid and sha", "request 123e4567-e89b-12d3-a456-426614174000 at commit deadbeef", nil},
	{"times with fractions", "took 12:30:45.123456 on 00:1a:2b:3c:4d:5e", nil},
	{"keywords are whole words", "Refund request from 555-123-4567; our partner's line is 555-987-6543", []string{"PHONE 555-123-4567", "PHONE 555-987-6543"}},
	{"order number written as 号码", "订单号码 13800138000 已发货", nil},
	{"password in a url", "DATABASE_URL=postgres://app:Pa55word@db.example.com:5432/app and https://user:hunter2@example.com/v1", []string{"SECRET Pa55word", "SECRET hunter2"}},
	{"ipv6 with a zone", "ping fe80::1c2a:3bff:fe4d:5e6f%eth0 now", []string{"IPV6 fe80::1c2a:3bff:fe4d:5e6f"}},
	{"changelog dates and snapshots", "Date:   Tue Oct 9 00:01:09 2018 -0400 llvm-toolchain-snapshot (1:12~++20200929085817+962a247ae)", nil},
	{"number lists", "failed tests: 571 612 1056; <Buffer a0 8b 28 3f 01 00 00 00 50 32>; 36974 37078 37183", nil},
	{"id in a url path", "https://oss-fuzz.com/testcase-detail/5072358514753536", nil},
	{"versions with four parts", "Git 1.8.1.2, V8 5.0.71.47, relative to 3.6.23.1, OID 1.3.101.111", nil},
	{"small ip after an ip word", "Use DNS resolver at 8.8.8.8 or host 3.5.140.2", []string{"IPV4 8.8.8.8", "IPV4 3.5.140.2"}},
	{"fingerprints and examples", "SHA1 6A:E5:D0:41:43:63:EF:65, 0:1:2:3:4:5:6:7, b::c", nil},
	{"open parenthesis", "call 800-29-29-AMD (800-292-9263) now", []string{"PHONE 800-292-9263"}},
	{"card-like run inside a list", "LONG (4) 896<8 648 1288 1928 2568 3208 3848 4488 5128 5768 6408 7048", nil},
	{"buffer bytes", "// Prints: <Buffer 01 02 03 04 05>", nil},
	{"package versions", "dpkg (1.16.0.1) unstable; .NET 4.8.0.0", nil},
	{"full-width mobile", "手机：１３８００１３８０００，谢谢", []string{"PHONE １３８００１３８０００"}},
	{"full-width id", "身份证１１０１０５１９４９１２３１００２Ｘ。", []string{"CN_ID １１０１０５１９４９１２３１００２Ｘ"}},
	{"full-width card with ideographic spaces", "卡号：４１１１　１１１１　１１１１　１１１１", []string{"CARD ４１１１　１１１１　１１１１　１１１１"}},
	{"full-width +86", "电话＋８６　１３８　００１３　８０００", []string{"PHONE ＋８６　１３８　００１３　８０００"}},
	{"full-width look-alikes", "共１２３件，订单号：２０２５１２０２０００１２３，日期２０２６－１２－０２", nil},
	{"words", "sk-learn is a library; Bearer tokens are explained in RFC 6750", nil},
}

func show(text string, ms []Match) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Kind)+" "+text[m.Start:m.End])
	}
	return out
}

func TestFind(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range findCases {
		t.Run(tc.name, func(t *testing.T) {
			got := show(tc.text, d.Find(tc.text))
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("Find(%q) (-got +want):\n-%q\n+%q", tc.text, got, tc.want)
			}
		})
	}
}

func TestFindCustomKinds(t *testing.T) {
	d, err := New(Config{
		Patterns:     []Pattern{{Name: "EMPLOYEE_ID", Regex: `\bEMP-\d{6}\b`}},
		Dictionaries: []Dictionary{{Name: "PROJECT", Words: []string{"Project Falcon", "猎鹰计划"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	text := "EMP-004211 works on project falcon (猎鹰计划), not projectfalconry; mail a@b.io"
	got := show(text, d.Find(text))
	want := []string{"EMPLOYEE_ID EMP-004211", "PROJECT project falcon", "PROJECT 猎鹰计划", "EMAIL a@b.io"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("(-got +want):\n-%q\n+%q", got, want)
	}
}

func TestFindOverlapKeepsChecksumThenLonger(t *testing.T) {
	d, err := New(Config{Patterns: []Pattern{
		{Name: "DIGITS4", Regex: `\d{4} \d{4} \d{4} \d{4} \d{2}`}, // longer than the card, no checksum
		{Name: "LOCAL", Regex: `[a-z]+\.[a-z]+`},                  // inside the e-mail
	}})
	if err != nil {
		t.Fatal(err)
	}
	text := "4111 1111 1111 1111 12 and john.doe@example.com"
	got := show(text, d.Find(text))
	want := []string{"CARD 4111 1111 1111 1111", "EMAIL john.doe@example.com"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("(-got +want):\n-%q\n+%q", got, want)
	}
}

// TestFindConcurrent: one Detector used by many goroutines (run with -race).
func TestFindConcurrent(t *testing.T) {
	d, err := New(Config{Dictionaries: []Dictionary{{Name: "PROJECT", Words: []string{"falcon"}}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []string)
	for range 8 {
		go func() {
			var got []string
			for _, tc := range findCases {
				text := tc.text + " falcon"
				got = append(got, show(text, d.Find(text))...)
			}
			done <- got
		}()
	}
	first := <-done
	for range 7 {
		if got := <-done; strings.Join(got, "|") != strings.Join(first, "|") {
			t.Fatalf("goroutines disagree:\n%q\n%q", got, first)
		}
	}
}

func TestFindPEMPrivateKey(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	key := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n-----END RSA PRIVATE KEY-----"
	text := "deploy key:\n" + key + "\nthanks"
	got := show(text, d.Find(text))
	if want := []string{"SECRET " + key}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("(-got +want):\n-%q\n+%q", got, want)
	}
	// A header without its end is not a key, and the search for the end is bounded.
	long := strings.Repeat("-----BEGIN RSA PRIVATE KEY----- "+strings.Repeat("x", 40), 2000)
	if got := d.Find(long); len(got) != 0 {
		t.Errorf("headers without an end: %v", got[:1])
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"empty name", Config{Patterns: []Pattern{{Regex: "x"}}}},
		{"lower-case name", Config{Patterns: []Pattern{{Name: "employee_id", Regex: "x"}}}},
		{"name with a space", Config{Dictionaries: []Dictionary{{Name: "MY KIND", Words: []string{"y"}}}}},
		{"name starting with a digit", Config{Patterns: []Pattern{{Name: "1X", Regex: "x"}}}},
		{"bad regex", Config{Patterns: []Pattern{{Name: "X", Regex: "("}}}},
		{"empty regex", Config{Patterns: []Pattern{{Name: "X"}}}},
		{"matches empty", Config{Patterns: []Pattern{{Name: "X", Regex: "a*"}}}},
		{"built-in name", Config{Patterns: []Pattern{{Name: "EMAIL", Regex: "x"}}}},
		{"duplicate", Config{Patterns: []Pattern{{Name: "X", Regex: "x"}}, Dictionaries: []Dictionary{{Name: "X", Words: []string{"y"}}}}},
		{"no words", Config{Dictionaries: []Dictionary{{Name: "X"}}}},
		{"empty word", Config{Dictionaries: []Dictionary{{Name: "X", Words: []string{" "}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); !errors.Is(err, ErrConfig) {
				t.Errorf("New: %v, want ErrConfig", err)
			}
		})
	}
}

func TestValidators(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
		f    func([]byte) bool
		v    string
	}{
		{"luhn ok", true, luhn, "4111111111111111"},
		{"luhn bad", false, luhn, "4111111111111112"},
		{"iban ok", true, ibanValid, "DE89370400440532013000"},
		{"iban wrong length", false, ibanValid, "DE8937040044053201300"},
		{"cn id ok", true, cnIDValid, "11010519491231002X"},
		{"cn id bad date", false, cnIDValid, "110105194902300020"},
		{"cn id no such province", false, cnIDValid, "191010194912310020"},
		{"ssn ok", true, ssnValid, "123456789"},
		{"ssn 9xx", false, ssnValid, "923456789"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f([]byte(tc.v)); got != tc.ok {
				t.Errorf("%s(%s) = %v, want %v", tc.name, tc.v, got, tc.ok)
			}
		})
	}
}

func ExampleDetector_Find() {
	d, _ := New(Config{})
	text := "Refund to card 4111 1111 1111 1111, reply to li.lei@example.cn"
	for _, m := range d.Find(text) {
		fmt.Println(m.Kind, text[m.Start:m.End])
	}
	// Output:
	// CARD 4111 1111 1111 1111
	// EMAIL li.lei@example.cn
}
