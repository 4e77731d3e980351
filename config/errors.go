package config

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Error is one problem in a configuration. Its message never contains the
// value of a secret field.
type Error struct {
	// File is the file name given to Load or Parse; "" for a Config built in code.
	File string
	// Line and Column locate the key (1-based); 0 when unknown.
	Line, Column int
	// Path is the key path, such as "providers[0].timeouts.connect"; "" for the whole file.
	Path string
	// Msg says what is wrong and what was expected.
	Msg string
}

// Error formats e as "file:line:col: path: msg", leaving out the parts that are unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		if e.File != "" {
			b.WriteString(e.File)
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Column)
	} else if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

type pos struct{ line, col int }

// source remembers where each key path was found in a file.
type source struct {
	file string
	pos  map[string]pos
}

func (s *source) set(path string, n ast.Node) {
	if p := position(n); p.line > 0 {
		s.pos[path] = p
	}
}

// lookup returns the position of path, or of its nearest ancestor that has one
// (a missing required key is reported where its parent is).
func (s *source) lookup(path string) (pos, bool) {
	if s == nil {
		return pos{}, false
	}
	for path != "" {
		if p, ok := s.pos[path]; ok {
			return p, true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return pos{}, false
}

// errAt builds an *Error for path, located when c came from a file.
func (c *Config) errAt(path, format string, args ...any) *Error {
	e := &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
	if c.src != nil {
		e.File = c.src.file
		if p, ok := c.src.lookup(path); ok {
			e.Line, e.Column = p.line, p.col
		}
	}
	return e
}

// position returns where a node starts: a mapping at its first key, a
// key/value pair at its key.
func position(n ast.Node) pos {
	switch t := n.(type) {
	case nil:
		return pos{}
	case *ast.DocumentNode:
		if t.Start != nil && t.Start.Position != nil {
			return pos{t.Start.Position.Line, t.Start.Position.Column}
		}
		if t.Body == nil {
			return pos{}
		}
		return position(t.Body)
	case *ast.MappingNode:
		if len(t.Values) > 0 {
			return position(t.Values[0])
		}
	case *ast.MappingValueNode:
		if t.Key != nil {
			return position(t.Key)
		}
	case *ast.AnchorNode:
		if t.Start != nil && t.Start.Position != nil {
			return pos{t.Start.Position.Line, t.Start.Position.Column}
		}
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return pos{}
	}
	return pos{tk.Position.Line, tk.Position.Column}
}
