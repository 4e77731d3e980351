package config

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// reserved are top-level sections that later Keel versions will define. They
// are rejected rather than ignored, so a file written for a newer Keel never
// half-works on this one.
var reserved = []string{
	"routing",
}

// Load reads the file at path and returns its Config, defaulted and validated
// (see Parse).
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes a YAML configuration, expands ${VAR} and ${VAR:-default} in
// the fields that allow it (base_url, api_key, header values), applies
// defaults and validates. filename only labels error positions.
//
// Decoding is strict: an unknown key, a reserved section, a value of the
// wrong kind or a bare number where a duration is expected is an error. All
// problems found are returned joined (errors.Join); each is an *Error with the
// key path, line and column.
func Parse(data []byte, filename string) (*Config, error) {
	if filename == "" {
		filename = "<config>"
	}
	cfg := &Config{src: &source{file: filename, pos: map[string]pos{}}}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, syntaxError(filename, err)
	}
	d := &decoder{src: cfg.src, anchors: map[string]ast.Node{}, budget: maxValues}
	switch len(f.Docs) {
	case 0:
	case 1:
		d.decodeRoot(f.Docs[0].Body, cfg)
	default:
		p := position(f.Docs[1])
		return nil, &Error{File: filename, Line: p.line, Column: p.col, Msg: "a config file holds one YAML document, found several"}
	}
	if len(d.errs) > 0 {
		return nil, joinSorted(d.errs)
	}
	errs := append(d.refused, cfg.expandEnv(os.LookupEnv)...)
	cfg.ApplyDefaults()
	errs = append(errs, cfg.problems()...)
	if err := joinSorted(errs); err != nil {
		return nil, err
	}
	return cfg, nil
}

// syntaxError converts a go-yaml parse error into an *Error. Only the
// parser's message and position are used, never a source excerpt, so a value
// near the fault cannot leak into the message.
func syntaxError(file string, err error) error {
	type tokenError interface {
		GetMessage() string
		GetToken() *token.Token
	}
	var te tokenError
	if errors.As(err, &te) {
		e := &Error{File: file, Msg: "invalid YAML: " + te.GetMessage()}
		if tk := te.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
		return e
	}
	return &Error{File: file, Msg: "invalid YAML"}
}

// decoder fills a Config from a YAML AST by reflection over the Config types,
// checking every key and the kind of every value, and recording where each
// key path is in the file.
type decoder struct {
	src     *source
	anchors map[string]ast.Node
	errs    []error
	// refused are the values a type's UnmarshalText refused: reported
	// with Validate's problems when decoding otherwise succeeds.
	refused []error
	// budget counts down the values and merged keys decoded, so aliases
	// cannot expand a small file into an enormous one ("billion laughs").
	budget int
	// tooDeep records that the merge depth error was reported once already.
	tooDeep bool
}

// maxValues bounds the values and merged keys one file may expand to.
const maxValues = 1 << 18

// spend takes one unit of the budget and reports whether decoding may go on.
func (d *decoder) spend(n ast.Node, path string) bool {
	d.budget--
	if d.budget == -1 {
		d.fail(n, path, "file expands to more than %d values through aliases and merge keys", maxValues)
	}
	return d.budget >= 0
}

// maxMergeDepth bounds nested merge keys (<<), which could otherwise loop
// through an alias to their own mapping.
const maxMergeDepth = 16

// Both config's Duration and time.Duration (the type the policy packages'
// config structs use) are written as strings with a unit.
var (
	durationType    = reflect.TypeFor[Duration]()
	stdDurationType = reflect.TypeFor[time.Duration]()
)

func (d *decoder) fail(n ast.Node, path, format string, args ...any) {
	p := position(n)
	d.errs = append(d.errs, &Error{File: d.src.file, Line: p.line, Column: p.col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) decodeRoot(body ast.Node, cfg *Config) {
	n := d.resolve(body, "")
	if n == nil || isNull(n) {
		return
	}
	d.decodeStruct(n, reflect.ValueOf(cfg).Elem(), "")
}

// resolve strips anchors (recording them), tags and explicit-key markers,
// and replaces an alias by the node it names. It returns nil for a missing
// node or an unknown alias (after recording the error).
func (d *decoder) resolve(n ast.Node, path string) ast.Node {
	for range 64 {
		switch t := n.(type) {
		case nil:
			return nil
		case *ast.AnchorNode:
			if t.Name != nil {
				d.anchors[t.Name.GetToken().Value] = t.Value
			}
			n = t.Value
		case *ast.TagNode:
			n = t.Value
		case *ast.MappingKeyNode:
			n = t.Value
		case *ast.CommentNode, *ast.CommentGroupNode:
			return nil
		case *ast.AliasNode:
			name := ""
			if t.Value != nil {
				name = t.Value.GetToken().Value
			}
			target, ok := d.anchors[name]
			if !ok {
				d.fail(t, path, "alias *%s names no anchor defined before it", name)
				return nil
			}
			n = target
		default:
			return n
		}
	}
	d.fail(n, path, "aliases nested too deeply")
	return nil
}

// skip records the anchors inside a subtree that is not decoded, so aliases
// to them elsewhere still resolve.
func (d *decoder) skip(n ast.Node) {
	if n == nil {
		return
	}
	ast.Walk(anchorVisitor(d.anchors), n)
}

type anchorVisitor map[string]ast.Node

func (v anchorVisitor) Visit(n ast.Node) ast.Visitor {
	if a, ok := n.(*ast.AnchorNode); ok && a.Name != nil {
		v[a.Name.GetToken().Value] = a.Value
	}
	return v
}

type entry struct {
	key     string
	keyNode ast.Node
	value   ast.Node
}

// entries lists a mapping's key/value pairs with merge keys (<<) applied:
// explicit keys win over merged ones, and earlier merged mappings over later.
func (d *decoder) entries(n ast.Node, path string, depth int) ([]entry, bool) {
	var mvs []*ast.MappingValueNode
	switch t := n.(type) {
	case *ast.MappingNode:
		mvs = t.Values
	case *ast.MappingValueNode:
		mvs = []*ast.MappingValueNode{t}
	default:
		return nil, false
	}
	var explicit, merged []entry
	for _, mv := range mvs {
		if mv.Key == nil {
			continue
		}
		if !d.spend(mv, path) {
			return nil, true
		}
		if mv.Key.IsMergeKey() {
			if depth >= maxMergeDepth {
				if !d.tooDeep {
					d.fail(mv.Key, path, "merge keys (<<) nested more than %d deep", maxMergeDepth)
				}
				d.tooDeep = true
				continue
			}
			merged = append(merged, d.mergeEntries(mv.Value, path, depth)...)
			continue
		}
		k := d.resolve(mv.Key, path)
		key, ok := scalarText(k)
		if !ok {
			d.fail(mv.Key, path, "expected a plain key, got %s", describe(k))
			d.skip(mv.Value)
			continue
		}
		explicit = append(explicit, entry{key: key, keyNode: mv.Key, value: mv.Value})
	}
	if len(merged) == 0 {
		return explicit, true
	}
	seen := map[string]bool{}
	for _, e := range explicit {
		seen[e.key] = true
	}
	out := explicit
	for _, e := range merged {
		if !seen[e.key] {
			seen[e.key] = true
			out = append(out, e)
		}
	}
	return out, true
}

func (d *decoder) mergeEntries(v ast.Node, path string, depth int) []entry {
	n := d.resolve(v, path)
	if seq, ok := n.(*ast.SequenceNode); ok {
		var out []entry
		for _, item := range seq.Values {
			out = append(out, d.mergeEntries(item, path, depth)...)
		}
		return out
	}
	es, ok := d.entries(n, path, depth+1)
	if !ok {
		d.fail(v, path, "merge key (<<) expects a mapping or a list of mappings, got %s", describe(n))
	}
	return es
}

func (d *decoder) decodeStruct(n ast.Node, v reflect.Value, path string) {
	es, ok := d.entries(n, path, 0)
	if !ok {
		d.fail(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	t := v.Type()
	for _, e := range es {
		sub := join(path, e.key)
		d.src.set(sub, e.keyNode)
		idx := fieldIndex(t, e.key)
		if idx == nil {
			d.skip(e.value)
			if path == "" && isReserved(e.key) {
				d.fail(e.keyNode, sub, "section reserved for a later Keel version, not supported yet")
				continue
			}
			msg := "unknown key"
			if s := suggest(e.key, yamlKeys(t)); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.fail(e.keyNode, sub, "%s", msg)
			continue
		}
		d.decodeValue(e.value, v.FieldByIndex(idx), sub)
	}
}

func (d *decoder) decodeValue(raw ast.Node, v reflect.Value, path string) {
	if !d.spend(raw, path) {
		return
	}
	n := d.resolve(raw, path)
	if n == nil || isNull(n) {
		return // absent: keep the zero value, which means the default
	}
	if v.Type() == durationType || v.Type() == stdDurationType {
		d.decodeDuration(n, v, path)
		return
	}
	if tu, ok := textUnmarshaler(v); ok {
		d.decodeText(n, tu, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decodeValue(raw, p.Elem(), path)
		v.Set(p)
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.fail(n, path, "expected true or false, got %s", describeValue(n))
			return
		}
		v.SetBool(b.Value)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.String:
		s, ok := scalarText(n)
		if !ok {
			d.fail(n, path, "expected a string, got %s", describe(n))
			d.skip(n)
			return
		}
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		d.decodeInt(n, v, path)
	case reflect.Float64:
		d.decodeFloat(n, v, path)
	default:
		// Unreachable for the Config types; a new field kind must be added above.
		d.fail(n, path, "unsupported field kind %s", v.Kind())
	}
}

// textUnmarshaler is v's UnmarshalText, when v is a string type that has
// one (a typed mode or policy name).
func textUnmarshaler(v reflect.Value) (encoding.TextUnmarshaler, bool) {
	if v.Kind() != reflect.String || !v.CanAddr() {
		return nil, false
	}
	tu, ok := v.Addr().Interface().(encoding.TextUnmarshaler)
	return tu, ok
}

// decodeDuration decodes a string with a unit into a Duration or a
// time.Duration.
func (d *decoder) decodeDuration(n ast.Node, v reflect.Value, path string) {
	s, ok := n.(*ast.StringNode)
	if !ok {
		d.fail(n, path, "expected a duration with a unit such as \"30s\" or \"300ms\", got %s", describeValue(n))
		return
	}
	dur, err := ParseDuration(s.Value)
	if err != nil {
		d.fail(n, path, "%v", err)
		return
	}
	v.SetInt(int64(dur))
}

// decodeText decodes a scalar into a typed value (a mode, a policy name)
// with the type's own UnmarshalText, whose error lists the allowed values.
// A value it refuses is a problem like those Validate finds (the field
// keeps its default), so it is reported with them, not alone.
func (d *decoder) decodeText(n ast.Node, tu encoding.TextUnmarshaler, path string) {
	s, ok := scalarText(n)
	if !ok {
		d.fail(n, path, "expected a string, got %s", describe(n))
		d.skip(n)
		return
	}
	if err := tu.UnmarshalText([]byte(s)); err != nil {
		p, _ := d.src.lookup(path) // at the key, as Validate reports
		d.refused = append(d.refused, &Error{File: d.src.file, Line: p.line, Column: p.col, Path: path, Msg: err.Error()})
	}
}

func (d *decoder) decodeSlice(n ast.Node, v reflect.Value, path string) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.fail(n, path, "expected a list, got %s", describe(n))
		d.skip(n)
		return
	}
	s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	for i, item := range seq.Values {
		sub := fmt.Sprintf("%s[%d]", path, i)
		d.src.set(sub, item)
		d.decodeValue(item, s.Index(i), sub)
	}
	v.Set(s)
}

func (d *decoder) decodeMap(n ast.Node, v reflect.Value, path string) {
	es, ok := d.entries(n, path, 0)
	if !ok {
		d.fail(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(es))
	for _, e := range es {
		sub := join(path, e.key)
		d.src.set(sub, e.keyNode)
		ev := reflect.New(v.Type().Elem()).Elem()
		d.decodeValue(e.value, ev, sub)
		m.SetMapIndex(reflect.ValueOf(e.key).Convert(v.Type().Key()), ev)
	}
	v.Set(m)
}

func (d *decoder) decodeInt(n ast.Node, v reflect.Value, path string) {
	in, ok := n.(*ast.IntegerNode)
	if s, isStr := n.(*ast.StringNode); isStr && s.Token != nil && s.Token.Type == token.StringType && isDigits(strings.TrimPrefix(s.Value, "-")) {
		// go-yaml keeps an integer too large for 64 bits as a string.
		d.fail(n, path, "integer out of range")
		return
	}
	if !ok {
		d.fail(n, path, "expected an integer, got %s", describeValue(n))
		return
	}
	var i int64
	switch x := in.Value.(type) {
	case int64:
		i = x
	case uint64:
		if x > math.MaxInt64 {
			d.fail(n, path, "integer out of range")
			return
		}
		i = int64(x)
	}
	if v.OverflowInt(i) {
		d.fail(n, path, "integer out of range")
		return
	}
	v.SetInt(i)
}

func (d *decoder) decodeFloat(n ast.Node, v reflect.Value, path string) {
	switch x := n.(type) {
	case *ast.FloatNode:
		v.SetFloat(x.Value)
	case *ast.IntegerNode:
		switch i := x.Value.(type) {
		case int64:
			v.SetFloat(float64(i))
		case uint64:
			v.SetFloat(float64(i))
		}
	case *ast.NanNode, *ast.InfinityNode:
		d.fail(n, path, "expected a finite number, got %s", n.GetToken().Value)
	default:
		d.fail(n, path, "expected a number, got %s", describeValue(n))
	}
}

// scalarText returns the text of a scalar node: the decoded value of a
// string, the source text of a number or boolean.
func scalarText(n ast.Node) (string, bool) {
	switch t := n.(type) {
	case *ast.StringNode:
		return t.Value, true
	case *ast.LiteralNode:
		if t.Value == nil {
			return "", true
		}
		return t.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return t.GetToken().Value, true
	}
	return "", false
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func isNull(n ast.Node) bool {
	_, ok := n.(*ast.NullNode)
	return ok
}

// describe names a node's kind for "expected X, got Y" messages. It never
// includes the value, which may be a secret.
func describe(n ast.Node) string {
	switch n.(type) {
	case nil:
		return "nothing"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.NullNode:
		return "null"
	}
	return "a " + n.Type().String()
}

// describeValue is describe plus the value itself for numbers and booleans,
// which are never secrets, and for short strings in non-secret fields (the
// only callers: numeric and duration fields).
func describeValue(n ast.Node) string {
	switch t := n.(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return describe(n) + " " + t.GetToken().Value
	case *ast.StringNode:
		if len(t.Value) <= 32 && !strings.ContainsAny(t.Value, "\n\r") {
			return "the string " + strconv.Quote(t.Value)
		}
	}
	return describe(n)
}

// yamlField is one key of a struct type: its name and the index path of
// the field it decodes into.
type yamlField struct {
	name  string
	index []int
	typ   reflect.Type
}

// fieldCache memoises yamlFields by struct type (reflect.Type → []yamlField).
// The decoder looks up every mapping key it meets (fieldIndex), and
// rebuilding the list by reflection each time (struct tags parsed, slices
// allocated) was about 30 % of Parse's CPU time on testdata/full.yaml
// (BenchmarkParse); the rest is go-yaml's lexer and parser.
var fieldCache sync.Map

// yamlFields lists the keys of struct type t in field order: each exported
// field under its yaml tag's name, except that a field tagged ",inline"
// contributes its own struct's keys and a field tagged "-" (a clock, a
// callback: not configuration) none. The result is shared: callers must not
// modify it.
func yamlFields(t reflect.Type) []yamlField {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]yamlField)
	}
	fs, _ := fieldCache.LoadOrStore(t, buildYAMLFields(t))
	return fs.([]yamlField)
}

func buildYAMLFields(t reflect.Type) []yamlField {
	var out []yamlField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case name == "" && f.Type.Kind() == reflect.Struct && slices.Contains(strings.Split(opts, ","), "inline"):
			for _, sub := range yamlFields(f.Type) {
				sub.index = append([]int{i}, sub.index...)
				out = append(out, sub)
			}
		default:
			out = append(out, yamlField{name: name, index: []int{i}, typ: f.Type})
		}
	}
	return out
}

// fieldIndex returns the index path of key's field in t, or nil.
func fieldIndex(t reflect.Type, key string) []int {
	for _, f := range yamlFields(t) {
		if f.name == key {
			return f.index
		}
	}
	return nil
}

func yamlKeys(t reflect.Type) []string {
	var keys []string
	for _, f := range yamlFields(t) {
		keys = append(keys, f.name)
	}
	return keys
}

func isReserved(key string) bool {
	for _, r := range reserved {
		if key == r {
			return true
		}
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest returns the candidate closest to key by edit distance (case
// folded, '-' read as '_'), if it is close enough to be a likely typo.
func suggest(key string, candidates []string) string {
	k := strings.ReplaceAll(strings.ToLower(key), "-", "_")
	best, bestD := "", -1
	for _, c := range candidates {
		dist := editDistance(k, c)
		if bestD < 0 || dist < bestD {
			best, bestD = c, dist
		}
	}
	limit := 2
	if len(k) <= 4 {
		limit = 1
	}
	if bestD < 0 || bestD > limit {
		// A prefix or suffix relation ("timeout" vs "timeouts", "key" vs "api_key") still helps.
		for _, c := range candidates {
			if len(k) >= 3 && (strings.HasPrefix(c, k) || strings.HasSuffix(c, k) || strings.HasPrefix(k, c)) {
				return c
			}
		}
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, over bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
