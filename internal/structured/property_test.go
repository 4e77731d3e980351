package structured

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// genInvoice renders a random valid invoice with random formatting and
// random amounts in several currencies, and returns it with its amounts.
func genInvoice(rng *rand.Rand) (string, []string) {
	sym := []string{"$", "¥", "€", "£"}
	amount := func() string {
		whole := rng.IntN(100000)
		s := fmt.Sprintf("%d", whole)
		if whole >= 1000 && rng.IntN(2) == 0 {
			s = fmt.Sprintf("%d,%03d", whole/1000, whole%1000)
		}
		s += fmt.Sprintf(".%02d", rng.IntN(100))
		if rng.IntN(3) == 0 {
			return s + " USD"
		}
		return sym[rng.IntN(len(sym))] + s
	}
	ws := func() string { return []string{"", " ", "\n  ", "\t"}[rng.IntN(4)] }
	total, unit, disc := amount(), amount(), fmt.Sprintf("-%d%%", rng.IntN(90)+1)
	var sb strings.Builder
	fmt.Fprintf(&sb, `{%s"invoice_id":%s"INV-%04d-%04d",%s"date": "2024-%02d-%02d",%s"total": %q,%s"discount": %q,%s"lines": [{"sku": "AB%05d", "qty": %d, "unit_price": %q}]%s}`,
		ws(), ws(), 2000+rng.IntN(30), rng.IntN(10000), ws(), rng.IntN(12)+1, rng.IntN(28)+1, ws(), total, ws(), disc, ws(), rng.IntN(100000), rng.IntN(9)+1, unit, ws())
	return sb.String(), []string{total, unit, disc}
}

// TestValidAnswersUnchanged is the property that a valid answer comes back
// byte for byte, with no steps, whatever its formatting.
func TestValidAnswersUnchanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	inv := mustCompile(t, invoiceSchema)
	items := mustCompile(t, itemsSchema)
	for i := range 500 {
		a, _ := genInvoice(rng)
		if vs := inv.Validate([]byte(a)); vs != nil {
			t.Fatalf("generator produced an invalid invoice %q: %v", a, vs)
		}
		if r := Repair(a, inv, Options{Input: a}); !r.Valid || r.Changed || string(r.Output) != a || len(r.Steps) != 0 {
			t.Fatalf("case %d: valid answer %q came back as %+v", i, a, r)
		}
		var list []map[string]any
		for range rng.IntN(4) + 1 {
			list = append(list, map[string]any{"name": fmt.Sprintf("item %d", rng.IntN(1000)), "price": float64(rng.IntN(100000)) / 100, "in_stock": rng.IntN(2) == 0})
		}
		b, _ := json.MarshalIndent(list, strings.Repeat(" ", rng.IntN(3)), strings.Repeat(" ", rng.IntN(4)))
		if r := Repair(string(b), items, Options{}); !r.Valid || r.Changed || string(r.Output) != string(b) || len(r.Steps) != 0 {
			t.Fatalf("case %d: valid answer %s came back as %+v", i, b, r)
		}
	}
}

// TestGuardedSpansPreserved breaks generated invoices in every lossless-
// repairable way and checks that each repaired output keeps every amount
// ("$152.37", "¥1,234.50", "-15%" …) exactly.
func TestGuardedSpansPreserved(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := mustCompile(t, invoiceSchema)
	breakers := []struct {
		name string
		f    func(string) string
	}{
		{"fence", func(a string) string { return "```json\n" + a + "\n```" }},
		{"prose", func(a string) string { return "Invoice follows. " + a + " Thanks." }},
		{"trailing commas", trailingCommaAll},
		{"single quotes", func(a string) string { return strings.ReplaceAll(a, `"`, `'`) }},
		{"bare keys", bareKeys},
		{"cut after lines", func(a string) string { return a[:strings.LastIndex(a, "]")+1] }},
		{"qty as string", qtyString},
	}
	repaired := 0
	for i := range 300 {
		a, amounts := genInvoice(rng)
		for _, b := range breakers {
			in := b.f(a)
			r := Repair(in, s, Options{Input: "Please extract the invoice. Total " + amounts[0]})
			if !r.Valid {
				t.Fatalf("case %d %s: %q not repaired: %v", i, b.name, in, r.Violations)
			}
			repaired++
			for _, amt := range amounts {
				if !strings.Contains(string(r.Output), amt) {
					t.Errorf("case %d %s: amount %q lost: %s", i, b.name, amt, r.Output)
				}
			}
		}
	}
	t.Logf("%d repaired invoices keep every amount", repaired)
}

// qtyString turns the qty number into the same number written as a string.
func qtyString(a string) string {
	i := strings.Index(a, `"qty": `) + len(`"qty": `)
	j := i + strings.IndexByte(a[i:], ',')
	return a[:i] + `"` + a[i:j] + `"` + a[j:]
}
