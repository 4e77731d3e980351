package structured

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrSchema reports a schema that is not valid JSON, not a valid draft
// 2020-12 JSON Schema, or that references a document outside itself. Errors
// returned by Compile wrap it, except a *LimitError (ErrSchemaLimit) and, from
// Compiler.Compile, the context's error.
var ErrSchema = errors.New("invalid output schema")

// Schema is a compiled JSON Schema (draft 2020-12 unless the document's
// $schema names another draft). A Schema is immutable and safe for concurrent
// use by any number of goroutines.
type Schema struct {
	raw  json.RawMessage
	sch  *jsonschema.Schema
	root rootKind
}

// rootKind says which JSON container the schema's root accepts; extraction
// uses it to choose between '{' and '['.
type rootKind uint8

const (
	rootAny rootKind = iota
	rootObject
	rootArray
)

// Raw returns the schema document as given to Compile. The caller must not
// modify the returned bytes.
func (s *Schema) Raw() json.RawMessage { return s.raw }

// Compile compiles a JSON Schema under DefaultLimits without a deadline,
// through a Compiler of the package's own (made at initialisation, so it
// serves every testing/synctest bubble; its limits never change: a mesh
// compiles through the Compiler its config sizes). Compiled
// schemas are cached, so compiling the same schema on every request costs
// one linear scan, one hash and one map lookup. The schema may not reference
// external documents: every $ref must resolve inside it (a gateway does not
// fetch URLs named by a client). Compile is safe for concurrent use.
func Compile(schema json.RawMessage) (*Schema, error) {
	return defaultCompiler.Compile(context.Background(), schema)
}

// noLoader refuses every external document.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema %q not allowed", url)
}

const schemaURL = "keel:///output-schema.json"

func compile(schema json.RawMessage) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("%w: parsing: %v", ErrSchema, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	return &Schema{raw: schema, sch: sch, root: rootOf(sch)}, nil
}

func rootOf(sch *jsonschema.Schema) rootKind {
	for range 16 { // follow a chain of root $refs, bounded
		if sch.Types != nil && !sch.Types.IsEmpty() {
			obj, arr := false, false
			for _, t := range sch.Types.ToStrings() {
				obj = obj || t == "object"
				arr = arr || t == "array"
			}
			switch {
			case obj && !arr:
				return rootObject
			case arr && !obj:
				return rootArray
			}
			return rootAny
		}
		if sch.Ref == nil {
			break
		}
		sch = sch.Ref
	}
	return rootAny
}

// Violation is one reason a document does not satisfy a schema.
type Violation struct {
	// Pointer is the RFC 6901 JSON pointer of the offending value; "" is the
	// whole document.
	Pointer string `json:"pointer"`
	// Keyword is the schema keyword that failed ("type", "required",
	// "enum" …), or "syntax" when the document is not JSON, or "truncated"
	// when a cut answer could not be closed losslessly.
	Keyword string `json:"keyword"`
	// Message is a short English explanation.
	Message string `json:"message"`

	kind jsonschema.ErrorKind // the validator's error kind, nil for syntax and truncation
	path []string             // Pointer as reference tokens
}

// String renders "pointer: message", with "(root)" for the empty pointer.
func (v Violation) String() string {
	p := v.Pointer
	if p == "" {
		p = "(root)"
	}
	return p + ": " + v.Message
}

// Validate checks doc against the schema and returns the violations, or nil
// when doc is valid. A document that is not exactly one JSON value yields a
// single "syntax" violation. Validate is safe for concurrent use.
func (s *Schema) Validate(doc []byte) []Violation {
	_, vs := s.validate(doc)
	return vs
}

// validate parses and validates doc, returning the parsed value (nil on a
// syntax error) and the violations.
func (s *Schema) validate(doc []byte) (any, []Violation) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, []Violation{syntaxViolation(err)}
	}
	if s == nil {
		return v, nil
	}
	err = s.sch.Validate(v)
	if err == nil {
		return v, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return v, []Violation{{Keyword: "schema", Message: err.Error()}}
	}
	var out []Violation
	collect(ve, &out)
	// The validator walks maps; sort for a stable report.
	slices.SortStableFunc(out, func(a, b Violation) int {
		return cmp.Or(strings.Compare(a.Pointer, b.Pointer), strings.Compare(a.Keyword, b.Keyword), strings.Compare(a.Message, b.Message))
	})
	return v, out
}

func syntaxViolation(err error) Violation {
	msg := err.Error()
	if msg == "EOF" {
		msg = "empty document"
	}
	return Violation{Keyword: "syntax", Message: "not valid JSON: " + msg}
}

// collect appends the leaves of a validation error tree: the inner nodes
// ("allOf failed", "validation failed") only group their causes.
func collect(e *jsonschema.ValidationError, out *[]Violation) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collect(c, out)
		}
		return
	}
	leaf := &jsonschema.ValidationError{SchemaURL: e.SchemaURL, InstanceLocation: e.InstanceLocation, ErrorKind: e.ErrorKind}
	msg := ""
	if u := leaf.BasicOutput(); u != nil && u.Error != nil {
		msg = u.Error.String()
	}
	kw := ""
	if p := e.ErrorKind.KeywordPath(); len(p) > 0 {
		kw = p[len(p)-1]
	}
	*out = append(*out, Violation{Pointer: pointer(e.InstanceLocation), Keyword: kw, Message: msg, kind: e.ErrorKind, path: e.InstanceLocation})
}

// pointer renders reference tokens as an RFC 6901 JSON pointer.
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return ""
	}
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(escapeToken(t))
	}
	return sb.String()
}

func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(t)
}

// schemasAt returns the subschemas that constrain the value at path, with
// $ref and allOf expanded. ok is false when the location is not described
// unambiguously (anyOf, oneOf, if/then, dynamic references, no schema at
// all): callers that need certainty then refuse to act.
func (s *Schema) schemasAt(path []string) (out []*jsonschema.Schema, ok bool) {
	if s == nil {
		return nil, false
	}
	cur, ok := expand(s.sch, nil, 0)
	if !ok {
		return nil, false
	}
	for _, tok := range path {
		var next []*jsonschema.Schema
		for _, sch := range cur {
			child := childSchema(sch, tok)
			if child == nil {
				continue
			}
			if next, ok = expand(child, next, 0); !ok {
				return nil, false
			}
		}
		if len(next) == 0 {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

func expand(sch *jsonschema.Schema, out []*jsonschema.Schema, depth int) ([]*jsonschema.Schema, bool) {
	if depth > 32 {
		return nil, false
	}
	if sch.AnyOf != nil || sch.OneOf != nil || sch.If != nil || sch.DynamicRef != nil || sch.RecursiveRef != nil {
		return nil, false
	}
	out = append(out, sch)
	var ok bool
	if sch.Ref != nil {
		if out, ok = expand(sch.Ref, out, depth+1); !ok {
			return nil, false
		}
	}
	for _, a := range sch.AllOf {
		if out, ok = expand(a, out, depth+1); !ok {
			return nil, false
		}
	}
	return out, true
}

// childSchema returns the subschema for member or item tok, or nil.
func childSchema(sch *jsonschema.Schema, tok string) *jsonschema.Schema {
	if c, ok := sch.Properties[tok]; ok {
		return c
	}
	for re, c := range sch.PatternProperties {
		if re.MatchString(tok) {
			return c
		}
	}
	if c, ok := sch.AdditionalProperties.(*jsonschema.Schema); ok {
		return c
	}
	if i, err := strconv.Atoi(tok); err == nil && i >= 0 {
		if i < len(sch.PrefixItems) {
			return sch.PrefixItems[i]
		}
		if sch.Items2020 != nil {
			return sch.Items2020
		}
		if c, ok := sch.Items.(*jsonschema.Schema); ok {
			return c
		}
	}
	return nil
}
