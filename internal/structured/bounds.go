package structured

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp/syntax"
	"runtime"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits bound the schemas a client may send (response_format.json_schema,
// a forced tool's input_schema, mesh_behavior.output_schema). A zero or
// negative field means the default in DefaultLimits. The compiler Keel uses
// (santhosh-tekuri/jsonschema/v6) costs more than linear time in the number
// of subschemas and in their nesting (its work queue is searched linearly and
// every subschema's JSON pointer is resolved from the root), so every schema is
// pre-scanned in one linear pass and rejected with a *LimitError before the
// compiler sees it. A Limits is a plain value; copies are independent.
type Limits struct {
	// MaxDepth bounds how deeply subschemas (and values inside enum, const,
	// default …) nest below the root schema; default 32.
	// Config key: structured_output.max_schema_depth.
	MaxDepth int
	// MaxBytes bounds the schema document's size; default 64 KiB.
	// Config key: structured_output.max_schema_bytes.
	MaxBytes int
	// MaxProperties bounds the members of all "properties" objects
	// together; default 1,000.
	// Config key: structured_output.max_schema_properties.
	MaxProperties int
	// MaxSubschemas bounds the number of subschemas of every kind (properties,
	// items, allOf branches, $defs, boolean schemas …); default 1,500. One
	// nested d > 1 levels deep counts 1 + (d-1)/16: the compiler's cost per
	// subschema grows with its JSON pointer (measured CPU: 1,000 flat
	// properties 12-20 ms; 30 trees of 32 nested properties 25-60 ms, the 23
	// this weighting admits 19-29 ms), and in total with the square of the
	// count.
	// Config key: structured_output.max_schema_subschemas.
	MaxSubschemas int
	// MaxRefs bounds the $ref, $dynamicRef and $recursiveRef keywords;
	// default 100. Every reference must be local ("#…"): Keel never loads a
	// URL or a file named by a client.
	// Config key: structured_output.max_schema_refs.
	MaxRefs int
	// MaxEnumValues bounds the members of all "enum" arrays together;
	// default 10,000.
	// Config key: structured_output.max_schema_enum_values.
	MaxEnumValues int
	// MaxPatternSize bounds the estimated size, in regexp program
	// instructions, of all "pattern" values and "patternProperties" keys
	// together; default 10,000. A counted repetition multiplies: a{1000} is
	// 1,000 instructions in 7 bytes, and Go's regexp compiler takes 0.2-0.4 µs
	// per instruction (the compiler compiles each pattern twice: once to
	// check the schema against its meta-schema).
	// Config key: structured_output.max_schema_pattern_size.
	MaxPatternSize int
	// MaxExpansion bounds how many subschemas one validation may apply when
	// every $ref is followed (a reference used twice counts twice); default
	// 20,000. Ten levels of "allOf": ten $refs to the next level is 110 bytes
	// of $refs per level and 10^10 subschema applications per validated
	// answer.
	// Config key: structured_output.max_schema_expansion.
	MaxExpansion int
	// MaxConcurrentCompiles bounds how many distinct schemas compile at
	// once through one Compiler (one mesh); callers beyond it wait (under
	// their context). Default: half of GOMAXPROCS, at least one, so a flood of
	// distinct schemas leaves the other cores to the traffic.
	// Config key: structured_output.max_concurrent_schema_compiles.
	MaxConcurrentCompiles int
}

// DefaultLimits returns the limits applied when none are set.
func DefaultLimits() Limits {
	return Limits{
		MaxDepth:              32,
		MaxBytes:              64 << 10,
		MaxProperties:         1000,
		MaxSubschemas:         1500,
		MaxRefs:               100,
		MaxEnumValues:         10000,
		MaxPatternSize:        10000,
		MaxExpansion:          20000,
		MaxConcurrentCompiles: max(1, runtime.GOMAXPROCS(0)/2),
	}
}

// withDefaults fills zero and negative fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	pick := func(v, def int) int {
		if v <= 0 {
			return def
		}
		return v
	}
	return Limits{
		MaxDepth:              pick(l.MaxDepth, d.MaxDepth),
		MaxBytes:              pick(l.MaxBytes, d.MaxBytes),
		MaxProperties:         pick(l.MaxProperties, d.MaxProperties),
		MaxSubschemas:         pick(l.MaxSubschemas, d.MaxSubschemas),
		MaxRefs:               pick(l.MaxRefs, d.MaxRefs),
		MaxEnumValues:         pick(l.MaxEnumValues, d.MaxEnumValues),
		MaxPatternSize:        pick(l.MaxPatternSize, d.MaxPatternSize),
		MaxExpansion:          pick(l.MaxExpansion, d.MaxExpansion),
		MaxConcurrentCompiles: pick(l.MaxConcurrentCompiles, d.MaxConcurrentCompiles),
	}
}

// ErrSchemaLimit is matched (errors.Is) by every *LimitError.
var ErrSchemaLimit = errors.New("output schema exceeds a limit")

// LimitError reports a schema rejected by one of the Limits before it was
// compiled (or, for MaxExpansion, before it was used). It is not ErrSchema:
// the schema may be valid, only too costly.
type LimitError struct {
	// Limit is the config key a user would change, e.g.
	// "structured_output.max_schema_depth".
	Limit string
	// What names the measured quantity, e.g. "schema nesting depth".
	What string
	// Max is the limit in force; Got the measured value, counted up to the
	// first excess where the scan stops there (so often Max+1).
	Max, Got int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s exceeds %d (%s)", e.What, e.Max, e.Limit)
}

// Is reports whether target is ErrSchemaLimit.
func (e *LimitError) Is(target error) bool { return target == ErrSchemaLimit }

const keyPrefix = "structured_output."

func limitErr(key, what string, maxV, got int) *LimitError {
	return &LimitError{Limit: keyPrefix + key, What: what, Max: maxV, Got: got}
}

// valKind says what a JSON value is, from the keyword that holds it.
type valKind uint8

const (
	kSchema      valKind = iota // a schema: an object or a boolean
	kSchemaMap                  // an object whose members are schemas ($defs, dependentSchemas …)
	kProps                      // "properties": a schema map whose members count as properties
	kPatternMap                 // "patternProperties": keys are patterns, members schemas
	kSchemaArray                // an array of schemas (allOf, anyOf, oneOf, prefixItems)
	kItems                      // "items": a schema, or (before 2020-12) an array of schemas
	kDeps                       // "dependencies": members are schemas or arrays of names
	kEnum                       // "enum": an array whose members count as enum values
	kData                       // anything else: const, default, examples, unknown keywords
)

// keywordKind is the kind of the value under a schema keyword.
func keywordKind(k string) valKind {
	switch k {
	case "properties":
		return kProps
	case "patternProperties":
		return kPatternMap
	case "$defs", "definitions", "dependentSchemas":
		return kSchemaMap
	case "allOf", "anyOf", "oneOf", "prefixItems":
		return kSchemaArray
	case "items":
		return kItems
	case "dependencies":
		return kDeps
	case "enum":
		return kEnum
	case "not", "if", "then", "else", "additionalItems", "additionalProperties", "contains",
		"propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema":
		return kSchema
	}
	return kData
}

// prescan checks raw against lim in one pass over its bytes and returns the
// document with the whitespace between tokens removed (the cache key's
// canonical form: formatting does not defeat the cache). Recursion is bounded
// by lim.MaxDepth. Syntax errors it notices wrap ErrSchema; the compiler's
// parser reports the rest.
func prescan(raw []byte, lim Limits) ([]byte, error) {
	if len(raw) > lim.MaxBytes {
		// Scan the first MaxBytes only: a limit broken there (the nesting of
		// a deep schema) says more than the size does, at bounded cost.
		s := &scanner{data: raw[:lim.MaxBytes], lim: lim, out: make([]byte, 0, lim.MaxBytes)}
		s.value(kSchema, 0, "")
		if le := (*LimitError)(nil); errors.As(s.err, &le) {
			return nil, le
		}
		return nil, limitErr("max_schema_bytes", "schema size in bytes", lim.MaxBytes, len(raw))
	}
	s := &scanner{data: raw, lim: lim, out: make([]byte, 0, len(raw))}
	s.value(kSchema, 0, "")
	if s.err == nil {
		s.ws()
		if s.pos < len(s.data) {
			s.syntax("trailing data after the schema")
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	return s.out, nil
}

type scanner struct {
	data []byte
	pos  int
	lim  Limits
	out  []byte
	err  error

	props, subschemas, refs, enums, patterns int // subschemas in sixteenths
}

func (s *scanner) syntax(msg string) {
	if s.err == nil {
		s.err = fmt.Errorf("%w: parsing: %s at byte %d", ErrSchema, msg, s.pos)
	}
}

func (s *scanner) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans one value of kind k nested depth levels below the root
// schema. keyword is the schema keyword holding a string value ("$ref",
// "pattern" …), "" otherwise.
func (s *scanner) value(k valKind, depth int, keyword string) {
	s.ws()
	if s.err != nil {
		return
	}
	if s.pos >= len(s.data) {
		s.syntax("unexpected end")
		return
	}
	c := s.data[s.pos]
	if k == kItems && c != '[' {
		k = kSchema // "items": one schema
	}
	if k == kSchema && (c == '{' || c == 't' || c == 'f') {
		// In sixteenths: a subschema d > 1 levels deep weighs 1 + (d-1)/16.
		if s.subschemas += 16 + max(depth-1, 0); s.subschemas > 16*s.lim.MaxSubschemas {
			s.fail(limitErr("max_schema_subschemas", "schema subschema count (weighted by depth)", s.lim.MaxSubschemas, (s.subschemas+15)/16))
			return
		}
	}
	switch c {
	case '{':
		if depth > s.lim.MaxDepth {
			s.fail(limitErr("max_schema_depth", "schema nesting depth", s.lim.MaxDepth, depth))
			return
		}
		s.object(k, depth)
	case '[':
		if depth > s.lim.MaxDepth {
			s.fail(limitErr("max_schema_depth", "schema nesting depth", s.lim.MaxDepth, depth))
			return
		}
		s.array(k, depth)
	case '"':
		start := s.pos
		s.str()
		if s.err == nil && k == kData && keyword != "" {
			s.keywordString(keyword, s.data[start:s.pos])
		}
	default:
		start := s.pos
		for s.pos < len(s.data) && strings.IndexByte("+-.0123456789eEtruefalsn", s.data[s.pos]) >= 0 {
			s.pos++
		}
		if s.pos == start {
			s.syntax(fmt.Sprintf("unexpected %q", c))
			return
		}
		s.out = append(s.out, s.data[start:s.pos]...)
	}
}

// str copies one string token to out.
func (s *scanner) str() {
	start := s.pos
	s.pos++ // opening quote
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '\\':
			s.pos += 2
			continue
		case '"':
			s.pos++
			s.out = append(s.out, s.data[start:s.pos]...)
			return
		}
		s.pos++
	}
	s.pos = len(s.data)
	s.syntax("unterminated string")
}

// unquote decodes a string token; the fast path skips escapes.
func unquote(tok []byte) (string, bool) {
	if len(tok) >= 2 && !strings.ContainsRune(string(tok), '\\') {
		return string(tok[1 : len(tok)-1]), true
	}
	var v string
	if err := json.Unmarshal(tok, &v); err != nil {
		return "", false
	}
	return v, true
}

// keywordString checks a string-valued schema keyword.
func (s *scanner) keywordString(keyword string, tok []byte) {
	switch keyword {
	case "$ref", "$dynamicRef", "$recursiveRef":
		if s.refs++; s.refs > s.lim.MaxRefs {
			s.fail(limitErr("max_schema_refs", "schema $ref count", s.lim.MaxRefs, s.refs))
			return
		}
		ref, ok := unquote(tok)
		if !ok {
			s.syntax("invalid string")
			return
		}
		if !strings.HasPrefix(ref, "#") {
			s.fail(fmt.Errorf("%w: %s %q is not a local reference: only references inside the schema (\"#…\") are allowed, Keel never loads a URL or a file", ErrSchema, keyword, ref))
		}
	case "pattern":
		s.pattern(tok)
	}
}

// pattern adds the estimated program size of a "pattern" value.
func (s *scanner) pattern(tok []byte) {
	p, ok := unquote(tok)
	if !ok {
		s.syntax("invalid string")
		return
	}
	s.patternSize(p)
}

// patternSize adds one regular expression's estimated program size.
func (s *scanner) patternSize(p string) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return // the compiler reports an invalid pattern
	}
	s.patterns = satAdd(s.patterns, progSize(re))
	if s.patterns > s.lim.MaxPatternSize {
		s.fail(limitErr("max_schema_pattern_size", "schema regular expression size", s.lim.MaxPatternSize, s.patterns))
	}
}

func satAdd(a, b int) int {
	if a > math.MaxInt32 || b > math.MaxInt32 {
		return math.MaxInt32 + 1
	}
	return a + b
}

func satMul(a, b int) int {
	if a != 0 && b > math.MaxInt32/a {
		return math.MaxInt32 + 1
	}
	return a * b
}

// progSize estimates the instructions regexp.Compile emits for re: counted
// repetitions are expanded, as the compiler does.
func progSize(re *syntax.Regexp) int {
	n := 1
	switch re.Op {
	case syntax.OpLiteral:
		n = len(re.Rune)
	case syntax.OpRepeat:
		count := re.Max
		if count < re.Min {
			count = re.Min + 1 // {n,}: n copies and a star
		}
		n = satAdd(satMul(max(count, 1), progSize(re.Sub[0])), 1)
	default:
		for _, sub := range re.Sub {
			n = satAdd(n, progSize(sub))
		}
	}
	return n
}

func (s *scanner) object(k valKind, depth int) {
	s.out = append(s.out, '{')
	s.pos++
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.out = append(s.out, '}')
		return
	}
	for s.err == nil {
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			s.syntax("expected a member name")
			return
		}
		start := s.pos
		s.str()
		if s.err != nil {
			return
		}
		name, ok := unquote(s.data[start:s.pos])
		if !ok {
			s.syntax("invalid member name")
			return
		}
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			s.syntax("expected ':'")
			return
		}
		s.pos++
		s.out = append(s.out, ':')
		switch k {
		case kSchema:
			kk := keywordKind(name)
			d := depth // keyword containers ($defs, allOf …) add no level
			if kk == kSchema || kk == kItems || kk == kData || kk == kEnum {
				d = depth + 1
			}
			s.value(kk, d, name)
		case kProps:
			if s.props++; s.props > s.lim.MaxProperties {
				s.fail(limitErr("max_schema_properties", "schema property count", s.lim.MaxProperties, s.props))
				return
			}
			s.value(kSchema, depth+1, "")
		case kPatternMap:
			s.patternSize(name)
			s.value(kSchema, depth+1, "")
		case kSchemaMap:
			s.value(kSchema, depth+1, "")
		case kDeps:
			s.value(kSchema, depth+1, "") // a schema, or an array of names (scanned as data)
		default:
			s.value(kData, depth+1, "")
		}
		if s.err != nil {
			return
		}
		s.ws()
		if s.pos >= len(s.data) {
			s.syntax("unexpected end in an object")
			return
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.out = append(s.out, ',')
		case '}':
			s.pos++
			s.out = append(s.out, '}')
			return
		default:
			s.syntax("expected ',' or '}'")
			return
		}
	}
}

func (s *scanner) array(k valKind, depth int) {
	s.out = append(s.out, '[')
	s.pos++
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.out = append(s.out, ']')
		return
	}
	elem, d := kData, depth+1
	switch k {
	case kSchemaArray, kItems:
		elem = kSchema
		if k == kSchemaArray {
			d = depth + 1
		} else {
			d = depth // "items" already took its level
		}
	}
	for s.err == nil {
		if k == kEnum {
			if s.enums++; s.enums > s.lim.MaxEnumValues {
				s.fail(limitErr("max_schema_enum_values", "schema enum value count", s.lim.MaxEnumValues, s.enums))
				return
			}
		}
		s.value(elem, d, "")
		if s.err != nil {
			return
		}
		s.ws()
		if s.pos >= len(s.data) {
			s.syntax("unexpected end in an array")
			return
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.out = append(s.out, ',')
		case ']':
			s.pos++
			s.out = append(s.out, ']')
			return
		default:
			s.syntax("expected ',' or ']'")
			return
		}
	}
}

// expansion counts the subschemas one validation applies when every
// reference is followed, with recursion cut at the first repeat on the path
// (recursive schemas descend into the instance, whose size bounds them). It
// stops counting past limit. The count is exact for schemas without cycles;
// memoised, it costs one visit per subschema.
func expansion(root *jsonschema.Schema, limit int) int {
	memo := map[*jsonschema.Schema]int{}
	onPath := map[*jsonschema.Schema]bool{}
	var visit func(*jsonschema.Schema) int
	visit = func(sch *jsonschema.Schema) int {
		if sch == nil {
			return 0
		}
		if onPath[sch] {
			return 1
		}
		if n, ok := memo[sch]; ok {
			return n
		}
		onPath[sch] = true
		n := 1
		add := func(c *jsonschema.Schema) {
			if n <= limit {
				n = satAdd(n, visit(c))
			}
		}
		forEachChild(sch, add)
		delete(onPath, sch)
		memo[sch] = n
		return n
	}
	return visit(root)
}

// forEachChild calls f with every subschema sch refers to, references
// included.
func forEachChild(sch *jsonschema.Schema, f func(*jsonschema.Schema)) {
	one := func(c *jsonschema.Schema) {
		if c != nil {
			f(c)
		}
	}
	anySchema := func(v any) {
		switch v := v.(type) {
		case *jsonschema.Schema:
			one(v)
		case []*jsonschema.Schema:
			for _, c := range v {
				one(c)
			}
		}
	}
	one(sch.Ref)
	one(sch.RecursiveRef)
	if sch.DynamicRef != nil {
		one(sch.DynamicRef.Ref)
	}
	one(sch.Not)
	for _, list := range [][]*jsonschema.Schema{sch.AllOf, sch.AnyOf, sch.OneOf, sch.PrefixItems} {
		for _, c := range list {
			one(c)
		}
	}
	one(sch.If)
	one(sch.Then)
	one(sch.Else)
	one(sch.PropertyNames)
	for _, c := range sch.Properties {
		one(c)
	}
	for _, c := range sch.PatternProperties {
		one(c)
	}
	anySchema(sch.AdditionalProperties)
	for _, v := range sch.Dependencies {
		anySchema(v)
	}
	for _, c := range sch.DependentSchemas {
		one(c)
	}
	one(sch.UnevaluatedProperties)
	one(sch.Contains)
	anySchema(sch.Items)
	anySchema(sch.AdditionalItems)
	one(sch.Items2020)
	one(sch.UnevaluatedItems)
	one(sch.ContentSchema)
}

// checkExpansion refuses a schema whose validation may apply more than
// lim.MaxExpansion subschemas: counted with recursion cut (expansion), then
// walked location by location, which also sees recursion that multiplies
// (recursionGrows).
func checkExpansion(root *jsonschema.Schema, lim Limits) error {
	const key, what = "max_schema_expansion", "schema expansion through $ref (subschemas applied per validation)"
	if n := expansion(root, lim.MaxExpansion); n > lim.MaxExpansion {
		return limitErr(key, what, lim.MaxExpansion, n)
	}
	switch grows, work := recursionGrows(root, lim.MaxExpansion); {
	case grows:
		return limitErr(key, "schema expansion through recursion (growing with each level of the answer)", lim.MaxExpansion, lim.MaxExpansion+1)
	case work > lim.MaxExpansion:
		return limitErr(key, what, lim.MaxExpansion, work)
	}
	return nil
}

// recursionGrows reports whether validating an answer against root can
// apply subschemas a number of times that grows geometrically with the
// answer's nesting: a recursive schema that applies its own recursion more
// than once at one location, such as
//
//	{"$defs":{"n":{"allOf":[{"$ref":"#/$defs/x"},{"$ref":"#/$defs/x"}]},
//	  "x":{"properties":{"c":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}
//
// (2^d applications for an answer nested d deep; measured 0.6 s at d = 16).
// expansion cannot see it: it cuts recursion. The check walks instance
// locations abstractly: a location holds a multiset of subschemas; its
// children (each property name the schemas list, each prefix index, and one
// "any other" member and item) hold the subschemas their keywords apply
// there. A location whose set of subschemas repeats one on its own path with
// a larger multiplicity grows without bound. An exactly repeated location is
// visited once. work counts the subschemas applied at the locations walked:
// an answer holding every listed location applies at least as many. The walk
// stops once work exceeds budget.
func recursionGrows(root *jsonschema.Schema, budget int) (grows bool, work int) {
	w := &growthWalk{ids: map[*jsonschema.Schema]int{}, seen: map[string]bool{}, onPath: map[string]int{}, budget: budget}
	grows = w.walk(multiset{w.id(root): 1})
	return grows && w.work <= budget, w.work
}

// multiset maps subschema ids to multiplicities.
type multiset map[int]int

type growthWalk struct {
	ids    map[*jsonschema.Schema]int
	nodes  []*jsonschema.Schema
	seen   map[string]bool // locations (exact multisets) walked
	onPath map[string]int  // support → total multiplicity, for the locations on the path
	budget int
	work   int
}

func (w *growthWalk) id(s *jsonschema.Schema) int {
	if i, ok := w.ids[s]; ok {
		return i
	}
	w.ids[s] = len(w.nodes)
	w.nodes = append(w.nodes, s)
	return len(w.nodes) - 1
}

// keys renders the multiset exactly and its support.
func (m multiset) keys() (exact, support string, total int) {
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var e, s strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&e, "%d*%d,", id, m[id])
		fmt.Fprintf(&s, "%d,", id)
		total = satAdd(total, m[id])
	}
	return e.String(), s.String(), total
}

// closure adds the in-place applicators ($ref, allOf, anyOf, oneOf, not,
// if/then/else, dependent schemas) to the location's multiset; a cycle of
// them is cut (the validator reports it as an error).
func (w *growthWalk) closure(m multiset) (multiset, bool) {
	out := multiset{}
	onStack := map[*jsonschema.Schema]bool{}
	var add func(s *jsonschema.Schema, n int) bool
	add = func(s *jsonschema.Schema, n int) bool {
		if s == nil || onStack[s] {
			return true
		}
		if w.work++; w.work > w.budget {
			return false
		}
		id := w.id(s)
		out[id] = satAdd(out[id], n)
		onStack[s] = true
		defer delete(onStack, s)
		inPlace := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
		if s.DynamicRef != nil {
			inPlace = append(inPlace, s.DynamicRef.Ref)
		}
		inPlace = append(inPlace, s.AllOf...)
		inPlace = append(inPlace, s.AnyOf...)
		inPlace = append(inPlace, s.OneOf...)
		for _, c := range s.DependentSchemas {
			inPlace = append(inPlace, c)
		}
		for _, v := range s.Dependencies {
			if c, ok := v.(*jsonschema.Schema); ok {
				inPlace = append(inPlace, c)
			}
		}
		for _, c := range inPlace {
			if !add(c, n) {
				return false
			}
		}
		return true
	}
	for id, n := range m {
		if !add(w.nodes[id], n) {
			return nil, false
		}
	}
	return out, true
}

// walk explores the location holding m; it reports growth (or an exhausted
// budget).
func (w *growthWalk) walk(m multiset) bool {
	exact, support, total := m.keys()
	if w.seen[exact] {
		return false
	}
	w.seen[exact] = true
	if prev, ok := w.onPath[support]; ok && total > prev {
		return true
	}
	prev, had := w.onPath[support]
	w.onPath[support] = total
	defer func() {
		if had {
			w.onPath[support] = prev
		} else {
			delete(w.onPath, support)
		}
	}()
	c, ok := w.closure(m)
	if !ok {
		return true
	}
	for _, child := range w.children(c) {
		if w.walk(child) {
			return true
		}
	}
	return false
}

// children returns the multisets of the child locations of a location
// holding c: each listed property name, one other name, each prefix index
// and one other index.
func (w *growthWalk) children(c multiset) []multiset {
	names := map[string]bool{}
	prefix := 0
	for id := range c {
		s := w.nodes[id]
		for name := range s.Properties {
			names[name] = true
		}
		prefix = max(prefix, len(s.PrefixItems))
		if items, ok := s.Items.([]*jsonschema.Schema); ok {
			prefix = max(prefix, len(items))
		}
	}
	var out []multiset
	addTo := func(m multiset, s *jsonschema.Schema, n int) {
		if s != nil {
			id := w.id(s)
			m[id] = satAdd(m[id], n)
		}
	}
	member := func(name string, other bool) multiset {
		m := multiset{}
		for id, n := range c {
			s := w.nodes[id]
			listed := false
			if p, ok := s.Properties[name]; ok && !other {
				addTo(m, p, n)
				listed = true
			}
			for re, p := range s.PatternProperties {
				if other || re.MatchString(name) {
					addTo(m, p, n)
					listed = true
				}
			}
			if ap, ok := s.AdditionalProperties.(*jsonschema.Schema); ok && (other || !listed) {
				addTo(m, ap, n)
			}
			addTo(m, s.UnevaluatedProperties, n)
		}
		return m
	}
	item := func(i int, other bool) multiset {
		m := multiset{}
		for id, n := range c {
			s := w.nodes[id]
			switch items := s.Items.(type) {
			case *jsonschema.Schema:
				addTo(m, items, n)
			case []*jsonschema.Schema:
				if !other && i < len(items) {
					addTo(m, items[i], n)
				} else if ai, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
					addTo(m, ai, n)
				}
			}
			if !other && i < len(s.PrefixItems) {
				addTo(m, s.PrefixItems[i], n)
			} else {
				addTo(m, s.Items2020, n)
			}
			addTo(m, s.Contains, n)
			addTo(m, s.UnevaluatedItems, n)
		}
		return m
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		out = append(out, member(name, false))
	}
	out = append(out, member("", true))
	for i := range prefix {
		out = append(out, item(i, false))
	}
	out = append(out, item(0, true))
	return slices.DeleteFunc(out, func(m multiset) bool { return len(m) == 0 })
}
