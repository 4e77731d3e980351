package pii

import (
	"fmt"
	"strings"
	"testing"
)

// prompt2K repeats natural text (a support ticket, a log excerpt, Chinese
// chat) to 2 KiB; withPII adds one value of each built-in kind.
func prompt2K(withPII bool) string {
	parts := []string{
		"Hi team, after upgrading to v1.2.3 on 2026-12-02 the export job fails at 10:30:15 with error code 502. ",
		"Order ORD-2025-000123 was shipped on 02.12.2026; the invoice total was $1,234.56 for 3 items. ",
		"我们在版本 10.0.19045.2965 上复现了这个问题，订单号 20251202000123，请尽快处理，谢谢！",
		"log: GET /api/v2/items?page=4&limit=50 200 12ms build 4.18.0-rc2 node worker-7 heap 512MB. ",
		"Can you summarise the attached meeting notes and list the action items by owner and due date? ",
	}
	if withPII {
		parts = append(parts,
			"Contact me at li.lei@example.cn or +86 138 0013 8000, card 4111 1111 1111 1111. ",
			"IBAN DE89 3704 0044 0532 0130 00, 身份证 11010519491231002X, SSN 123-45-6789, host 10.1.2.3. ",
			"key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789 and Bearer abc123def456ghi789jkl. ",
		)
	}
	var b strings.Builder
	for b.Len() < 2048 {
		for _, p := range parts {
			b.WriteString(p)
		}
	}
	return b.String()[:2048]
}

// promptZH2K is Chinese text (a support chat with look-alikes) to 2 KiB,
// cut on a character boundary.
func promptZH2K() string {
	parts := "您好，我在 12 月 2 日下的订单 20251202000123 还没有发货，版本 10.0.19045.2965 的客户端一直报错 502。" +
		"麻烦帮我查一下物流，快递单号 SF1234567890123，金额 ¥1,234.56，谢谢！请在今天 10:30 之前回复我。" +
		"另外，会员积分 +500 什么时候到账？发票抬头是上海某某科技有限公司，税号 91310000MA1FL0XX12。"
	var b strings.Builder
	for b.Len() < 2048 {
		b.WriteString(parts)
	}
	t := b.String()
	n := 2048
	for t[n]&0xC0 == 0x80 {
		n--
	}
	return t[:n]
}

func BenchmarkFind(b *testing.B) {
	builtin, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	custom, err := New(Config{
		Patterns:     []Pattern{{Name: "EMPLOYEE_ID", Regex: `EMP-\d{6}`}}, // \bEMP-\d{6}\b costs ~10× more: no literal prefix
		Dictionaries: []Dictionary{{Name: "PROJECT", Words: []string{"Project Falcon", "猎鹰计划", "Bluebird"}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		d    *Detector
		text string
	}{
		{"2KiB_no_pii", builtin, prompt2K(false)},
		{"2KiB_with_pii", builtin, prompt2K(true)},
		{"2KiB_zh_no_pii", builtin, promptZH2K()},
		{"2KiB_no_pii_custom_kinds", custom, prompt2K(false)},
	} {
		text := bc.text
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				bc.d.Find(text)
			}
		})
	}
}

// BenchmarkFindManyValues: a pasted CSV of 20,000 customer rows (1.3 MB,
// 40,000 values) — the cost stays linear in the number of values.
func BenchmarkFindManyValues(b *testing.B) {
	d, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&sb, "%d,customer%d@example.com,+1 415 555 %04d,ok\n", i, i, i%10000)
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if n := len(d.Find(text)); n != 40000 {
			b.Fatalf("found %d values, want 40000", n)
		}
	}
}
