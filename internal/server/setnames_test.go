package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSetNamesCanonical: every header name this package's code sets as a
// constant (but on w.Header() itself) is in canonical form, so that
// headerSet.Set can store it as it is (http.Header.Set canonicalised it).
func TestSetNamesCanonical(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(node ast.Node) bool {
			call, ok := node.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Set" {
				return true
			}
			if recv, ok := sel.X.(*ast.CallExpr); ok {
				if f, ok := recv.Fun.(*ast.SelectorExpr); ok && f.Sel.Name == "Header" {
					return true // w.Header().Set: http.Header's own Set canonicalises
				}
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			k, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			n++
			if c := http.CanonicalHeaderKey(k); c != k {
				t.Errorf("%s: header %q is set by a name not canonical (%q)", fset.Position(lit.Pos()), k, c)
			}
			return true
		})
	}
	if n < 20 {
		t.Fatalf("found %d constant header names set, want the package's (20 or more)", n)
	}
}
