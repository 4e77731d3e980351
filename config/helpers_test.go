package config

import (
	"fmt"
	"reflect"
	"strings"
)

// diff lists the leaf fields where got and want differ, as (-got +want).
// It reads strings through reflection, so Secret values are compared and
// shown in clear (test values are fake).
func diff(got, want any) string {
	var b strings.Builder
	diffValue(&b, "", reflect.ValueOf(got), reflect.ValueOf(want))
	return b.String()
}

func diffValue(b *strings.Builder, path string, g, w reflect.Value) {
	if g.IsValid() != w.IsValid() {
		fmt.Fprintf(b, "%s: -%v +%v\n", path, g, w)
		return
	}
	if !g.IsValid() {
		return
	}
	switch g.Kind() {
	case reflect.Pointer:
		if g.IsNil() || w.IsNil() {
			if g.IsNil() != w.IsNil() {
				fmt.Fprintf(b, "%s: -nil=%v +nil=%v\n", path, g.IsNil(), w.IsNil())
			}
			return
		}
		diffValue(b, path, g.Elem(), w.Elem())
	case reflect.Struct:
		for i := range g.NumField() {
			if !g.Type().Field(i).IsExported() {
				continue
			}
			diffValue(b, path+"."+g.Type().Field(i).Name, g.Field(i), w.Field(i))
		}
	case reflect.Slice:
		if g.Len() != w.Len() {
			fmt.Fprintf(b, "%s: -len %d +len %d\n", path, g.Len(), w.Len())
		}
		for i := range min(g.Len(), w.Len()) {
			diffValue(b, fmt.Sprintf("%s[%d]", path, i), g.Index(i), w.Index(i))
		}
	case reflect.Map:
		keys := map[string]bool{}
		for _, k := range g.MapKeys() {
			keys[k.String()] = true
		}
		for _, k := range w.MapKeys() {
			keys[k.String()] = true
		}
		for _, k := range sortedKeys(keys) {
			kv := reflect.ValueOf(k).Convert(g.Type().Key())
			diffValue(b, fmt.Sprintf("%s[%q]", path, k), g.MapIndex(kv), w.MapIndex(kv))
		}
		if g.IsNil() != w.IsNil() && g.Len() == 0 && w.Len() == 0 {
			fmt.Fprintf(b, "%s: -nil=%v +nil=%v\n", path, g.IsNil(), w.IsNil())
		}
	case reflect.Func:
		// A clock or callback of a policy config; never set by a file.
		if g.IsNil() != w.IsNil() {
			fmt.Fprintf(b, "%s: -nil=%v +nil=%v\n", path, g.IsNil(), w.IsNil())
		}
	case reflect.String:
		if g.String() != w.String() {
			fmt.Fprintf(b, "%s: -%q +%q\n", path, g.String(), w.String())
		}
	default:
		if g.Interface() != w.Interface() {
			fmt.Fprintf(b, "%s: -%v +%v\n", path, g.Interface(), w.Interface())
		}
	}
}
