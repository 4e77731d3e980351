package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/golden"
)

// checkGolden is golden.Check; diff is golden.Diff over bytes.
func checkGolden(t *testing.T, path string, got []byte) { t.Helper(); golden.Check(t, path, got) }

func diff(got, want []byte) string { return golden.Diff(string(got), string(want)) }

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
