package jsonx

import (
	"strings"
	"testing"
)

var testNames = []string{"model", "messages", "role", "content", "type", "text", "max_tokens",
	"a", "ab", "chat.completion", "chat.completion.chunk", "model_context_window_exceeded"}

func TestNamesLookup(t *testing.T) {
	tbl := NewNames(testNames...)
	for _, s := range testNames {
		got, ok := tbl.Lookup([]byte(s))
		if !ok || got != s {
			t.Errorf("Lookup(%q) = %q, %v; want %q, true", s, got, ok, s)
		}
	}
	for _, s := range []string{"", "b", "Model", "mode", "models", "chat.completion.", "max_token\x00", "tex", strings.Repeat("m", 70),
		"chat.compXetion.chunk", "model_context_XXndow_exceeded", "\x00\x00\x00", "\x00\x00\x00\x00\x00\x00\x00\x00\x00"} {
		if got, ok := tbl.Lookup([]byte(s)); ok || got != "" {
			t.Errorf("Lookup(%q) = %q, %v; want \"\", false", s, got, ok)
		}
	}
}

// A full table (namesSlots/2 names) still finds every name and stops on a
// miss.
func TestNamesFull(t *testing.T) {
	var names []string
	for i := 0; i < namesSlots/2; i++ {
		names = append(names, string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	tbl := NewNames(names...)
	for _, s := range names {
		if got, ok := tbl.Lookup([]byte(s)); !ok || got != s {
			t.Fatalf("Lookup(%q) = %q, %v", s, got, ok)
		}
	}
	if _, ok := tbl.Lookup([]byte("zz")); ok {
		t.Fatal(`Lookup("zz") found a name not in the table`)
	}
}

func TestNamesLookupAllocatesNothing(t *testing.T) {
	tbl := NewNames(testNames...)
	hit, miss := []byte("messages"), []byte("unknown_member")
	if n := testing.AllocsPerRun(100, func() {
		tbl.Lookup(hit)
		tbl.Lookup(miss)
	}); n != 0 {
		t.Fatalf("Lookup allocates %v times per run, want 0", n)
	}
}

func TestNewNamesRejects(t *testing.T) {
	tooMany := make([]string, namesSlots/2+1)
	for i := range tooMany {
		tooMany[i] = string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	for name, names := range map[string][]string{
		"empty":     {"a", ""},
		"too long":  {strings.Repeat("x", 64)},
		"duplicate": {"model", "role", "model"},
		"too many":  tooMany,
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewNames(%s) did not panic", name)
				}
			}()
			NewNames(names...)
		}()
	}
}

// FuzzNamesLookup checks Lookup against a map of the same names.
func FuzzNamesLookup(f *testing.F) {
	for _, s := range testNames {
		f.Add([]byte(s))
	}
	f.Add([]byte(""))
	f.Add([]byte("unknown"))
	f.Add([]byte("chat.compXetion.chunk"))
	tbl := NewNames(testNames...)
	want := map[string]bool{}
	for _, s := range testNames {
		want[s] = true
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := tbl.Lookup(raw)
		if ok != want[string(raw)] || (ok && got != string(raw)) || (!ok && got != "") {
			t.Fatalf("Lookup(%q) = %q, %v", raw, got, ok)
		}
	})
}
