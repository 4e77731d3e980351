package structured

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Real-shaped answers and their schemas: a risk assessment, an invoice with
// currency amounts, and a list of items.
const (
	riskSchema = `{
  "type": "object",
  "properties": {
    "risk_level": {"type": "string", "enum": ["low", "medium", "high"]},
    "summary": {"type": "string"},
    "mitigation_steps": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "confidence_score": {"type": "number", "minimum": 0, "maximum": 1}
  },
  "required": ["risk_level", "mitigation_steps", "confidence_score"]
}`
	riskAnswer = `{"risk_level": "high", "summary": "Vendor INV-2024-0001 is 45 days overdue. Exposure is $152.37 per unit.", "mitigation_steps": ["Escalate to finance.", "Freeze new orders."], "confidence_score": 0.82}`

	invoiceSchema = `{
  "type": "object",
  "properties": {
    "invoice_id": {"type": "string", "pattern": "^INV-[0-9]{4}-[0-9]{4}$"},
    "date": {"type": "string", "format": "date"},
    "total": {"type": "string"},
    "discount": {"type": "string"},
    "lines": {
      "type": "array", "minItems": 1,
      "items": {
        "type": "object",
        "properties": {
          "sku": {"type": "string"},
          "qty": {"type": "integer"},
          "unit_price": {"type": "string"}
        },
        "required": ["sku", "qty", "unit_price"]
      }
    },
    "paid": {"type": "boolean"}
  },
  "required": ["invoice_id", "date", "total", "lines"]
}`
	invoiceAnswer = "{\"invoice_id\": \"INV-2024-0001\",\n \"date\": \"2024-03-01\",\n \"total\": \"$152.37\",\n \"discount\": \"-15%\",\n \"lines\": [{\"sku\": \"AB12345\", \"qty\": 2, \"unit_price\": \"$50.00\"},\n  {\"sku\": \"CD67890\", \"qty\": 1, \"unit_price\": \"¥1,234.50\"}],\n \"paid\": false\n}"

	itemsSchema = `{
  "type": "array", "minItems": 1,
  "items": {
    "type": "object",
    "properties": {
      "name": {"type": "string"},
      "price": {"type": "number"},
      "in_stock": {"type": "boolean"}
    },
    "required": ["name", "price"]
  }
}`
	itemsAnswer = `[{"name": "Apple", "price": 0.99, "in_stock": true}, {"name": "Pear", "price": 1.25, "in_stock": false}]`
)

// riskDerive is the declared derivation rule of the risk assessment.
var riskDerive = []Derivation{{Field: "confidence_score", From: "risk_level", Table: map[string]any{"low": 0.9, "medium": 0.6, "high": 0.3}}}

func mustCompile(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := Compile(json.RawMessage(schema))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

// diff renders a mismatch as (-got +want) lines; "" when equal.
func diff(got, want string) string {
	if got == want {
		return ""
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var sb strings.Builder
	sb.WriteString("(-got +want):\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl == wl {
			fmt.Fprintf(&sb, " %s\n", gl)
			continue
		}
		if i < len(g) {
			fmt.Fprintf(&sb, "-%s\n", gl)
		}
		if i < len(w) {
			fmt.Fprintf(&sb, "+%s\n", wl)
		}
	}
	return sb.String()
}

// diffJSON marshals got and want (indented) and diffs them.
func diffJSON(got, want any) string {
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	return diff(string(g), string(w))
}

func decode(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	return v
}

// checkNoInvention is the corpus oracle, independent of the golden file:
// every value of a repaired document comes from the original answer base.
// Members and items must exist in base at the same path; scalars must be
// equal (a number may come from the same number written as a string, the
// coerce step); a string may be a prefix of base's only when the repair
// closed a cut string; a missing member may appear only with the value a
// declared derivation gives it.
func checkNoInvention(t testing.TB, out, base any, derive []Derivation, closedString bool, path string) {
	t.Helper()
	switch o := out.(type) {
	case map[string]any:
		b, ok := base.(map[string]any)
		if !ok {
			t.Errorf("%s: repaired object where the answer had %T", path, base)
			return
		}
		for k, v := range o {
			if derived(derive, k, o, v) {
				continue // filled by a declared rule
			}
			bv, ok := b[k]
			if !ok {
				t.Errorf("%s/%s: member %q is not in the answer and no rule derives it", path, k, k)
				continue
			}
			checkNoInvention(t, v, bv, derive, closedString, path+"/"+k)
		}
	case []any:
		b, ok := base.([]any)
		if !ok || len(o) > len(b) {
			t.Errorf("%s: repaired array %v does not come from %v", path, o, base)
			return
		}
		for i := range o {
			checkNoInvention(t, o[i], b[i], derive, closedString, fmt.Sprintf("%s/%d", path, i))
		}
	case string:
		b, ok := base.(string)
		if !ok || (o != b && !(closedString && strings.HasPrefix(b, o))) {
			t.Errorf("%s: repaired string %q does not come from %#v", path, o, base)
		}
	case json.Number:
		switch b := base.(type) {
		case json.Number:
			if o != b {
				t.Errorf("%s: repaired number %s, answer had %s", path, o, b)
			}
		case string:
			if string(o) != b {
				t.Errorf("%s: repaired number %s from string %q", path, o, b)
			}
		default:
			t.Errorf("%s: repaired number %s from %#v", path, o, base)
		}
	default:
		if !reflect.DeepEqual(out, base) && fmt.Sprint(out) != fmt.Sprint(base) {
			t.Errorf("%s: repaired %#v, answer had %#v", path, out, base)
		}
	}
}

func derived(rules []Derivation, field string, obj map[string]any, v any) bool {
	for _, d := range rules {
		if d.Field != field {
			continue
		}
		key, ok := scalarKey(obj[d.From])
		if !ok {
			continue
		}
		want, ok := d.Table[key]
		if ok && fmt.Sprint(want) == fmt.Sprint(v) {
			return true
		}
	}
	return false
}
