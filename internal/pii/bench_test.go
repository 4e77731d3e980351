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
		pii  bool
	}{
		{"2KiB_no_pii", builtin, false},
		{"2KiB_with_pii", builtin, true},
		{"2KiB_no_pii_custom_kinds", custom, false},
	} {
		text := prompt2K(bc.pii)
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
