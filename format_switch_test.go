package keel_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoFormatSwitchOutsideWire: what differs between wire formats lives
// in the codec table (internal/wire); every other package of Keel asks
// wire.For(format) instead of comparing a format with llm.FormatAnthropic,
// llm.FormatOpenAI or llm.FormatResponses (issue 15). Naming a format (a route, a default) is
// fine; deciding by one is not. Two places are exempt by design:
// internal/llm, which defines the formats, and sim, the simulated
// providers, whose behaviour differs per API on purpose (STYLE rule 19:
// each simulated behaviour is the real provider's).
func TestNoFormatSwitchOutsideWire(t *testing.T) {
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		switch {
		case path == "internal/wire", path == "internal/llm", path == "sim",
			strings.HasPrefix(path, "."+string(filepath.Separator)), path != "." && strings.HasPrefix(d.Name(), "."), d.Name() == "testdata":
			return filepath.SkipDir
		}
		dirs = append(dirs, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	isFormat := func(e ast.Expr) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && x.Name == "llm" && (sel.Sel.Name == "FormatAnthropic" || sel.Sel.Name == "FormatOpenAI" || sel.Sel.Name == "FormatResponses")
	}
	files := 0
	for _, dir := range dirs {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, name, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			files++
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BinaryExpr:
					if (n.Op == token.EQL || n.Op == token.NEQ) && (isFormat(n.X) || isFormat(n.Y)) {
						t.Errorf("%s: a format comparison; use wire.For(format)", fset.Position(n.Pos()))
					}
				case *ast.CaseClause:
					for _, e := range n.List {
						if isFormat(e) {
							t.Errorf("%s: a switch on the format; use wire.For(format)", fset.Position(e.Pos()))
						}
					}
				}
				return true
			})
		}
	}
	if files < 100 {
		t.Fatalf("walked only %d files: the directory list is wrong", files)
	}
}
