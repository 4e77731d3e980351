package anthropic

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// checkGolden compares got with the golden file at path, or rewrites the file
// when -update is set.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-got +want):\n%s", path, diff(got, want))
	}
}

// diff is a small line diff (longest common subsequence); for one-line
// documents it points at the first differing byte.
func diff(got, want []byte) string {
	a := strings.Split(string(got), "\n")
	b := strings.Split(string(want), "\n")
	if len(a) == 1 && len(b) == 1 {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		lo := max(0, i-40)
		return fmt.Sprintf("first difference at byte %d:\n-%q\n+%q", i, got[lo:min(len(got), i+40)], want[lo:min(len(want), i+40)])
	}
	if len(a)*len(b) > 4_000_000 {
		return fmt.Sprintf("-%d lines\n+%d lines (too long to diff)", len(a), len(b))
	}
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i++
			j++
		case j == len(b) || (i < len(a) && lcs[i+1][j] >= lcs[i][j+1]):
			fmt.Fprintf(&sb, "%4d -%s\n", i+1, a[i])
			i++
		default:
			fmt.Fprintf(&sb, "%4d +%s\n", j+1, b[j])
			j++
		}
	}
	return sb.String()
}

// dump renders a canonical value as indented JSON for golden files and
// diffs: zero struct fields are left out, raw JSON is shown as a string,
// enum-like numbers by name; nil and empty slices stay distinct (absent / []).
func dump(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(readable(reflect.ValueOf(v))); err != nil {
		t.Fatalf("dumping %T: %v", v, err)
	}
	return buf.Bytes()
}

// inputs lists the input files of a testdata directory with their base names.
func inputs(t *testing.T, dir, ext string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no %s files in testdata/%s: %v", ext, dir, err)
	}
	m := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m[strings.TrimSuffix(filepath.Base(p), ext)] = b
	}
	return m
}

// mustEqual fails when got and want are not reflect.DeepEqual, showing an
// indented JSON diff (or both Go values when the JSON forms agree).
func mustEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	g, w := dump(t, got), dump(t, want)
	if bytes.Equal(g, w) {
		t.Errorf("%s (-got +want):\n-%#v\n+%#v", what, got, want)
		return
	}
	t.Errorf("%s (-got +want):\n%s", what, diff(g, w))
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func readable(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	if v.Kind() != reflect.Struct && v.Kind() != reflect.String && v.Kind() != reflect.Pointer && v.CanInterface() {
		if s, ok := v.Interface().(fmt.Stringer); ok {
			return s.String()
		}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return readable(v.Elem())
	case reflect.Struct:
		m := map[string]any{}
		for i := range v.NumField() {
			if f := v.Field(i); v.Type().Field(i).IsExported() && !f.IsZero() {
				m[v.Type().Field(i).Name] = readable(f)
			}
		}
		return m
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		if v.Type() == rawMessageType || v.Type().Elem().Kind() == reflect.Uint8 {
			return string(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = readable(v.Index(i))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		m := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			m[fmt.Sprint(it.Key().Interface())] = readable(it.Value())
		}
		return m
	}
	return v.Interface()
}
