package structured

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Generators of hostile (and of big but reasonable) schemas, shared by the
// table test and BenchmarkHostileSchemas.

// nested is the reproduction: {"type":"object","properties":{"a":
// repeated d times around a string schema, which sits d levels deep.
func nested(d int) string {
	return strings.Repeat(`{"type":"object","properties":{"a":`, d) + `{"type":"string"}` + strings.Repeat(`}}`, d)
}

// nestedItems is d arrays of arrays of strings.
func nestedItems(d int) string {
	return strings.Repeat(`{"type":"array","items":`, d) + `{"type":"string"}` + strings.Repeat(`}`, d)
}

// wide is one object with n string properties.
func wide(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"field_%d":{"type":"string"}`, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

// forest is n side-by-side properties each holding nested(d).
func forest(n, d int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"t%d":%s`, i, nested(d))
	}
	b.WriteString(`}}`)
	return b.String()
}

// joined joins n copies of item (with %d replaced by the index) with commas.
func joined(n int, item string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if strings.Contains(item, "%d") {
			fmt.Fprintf(&b, item, i)
		} else {
			b.WriteString(item)
		}
	}
	return b.String()
}

// refChain is $defs d0 → d1 → … → dn, a string.
func refChain(n int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range n {
		fmt.Fprintf(&b, `"d%d":{"$ref":"#/$defs/d%d"},`, i, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"string"}}}`, n)
	return b.String()
}

// fanOut is the "billion laughs" of JSON Schema: each of levels $defs is an
// allOf of width $refs to the next, so one validation applies width^levels
// subschemas from a few hundred bytes.
func fanOut(levels, width int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/l0","$defs":{`)
	for l := range levels {
		fmt.Fprintf(&b, `"l%d":{"allOf":[%s]},`, l, joined(width, fmt.Sprintf(`{"$ref":"#/$defs/l%d"}`, l+1)))
	}
	fmt.Fprintf(&b, `"l%d":{"type":"string"}}}`, levels)
	return b.String()
}

// hostileCase is a schema and what must become of it: compiled (limit ""),
// rejected by the named limit, or rejected as invalid (limit "invalid", or
// "invalid: <a substring of the error>").
type hostileCase struct {
	name   string
	schema string
	limit  string // config key without the structured_output. prefix
}

func hostileCases() []hostileCase {
	return []hostileCase{
		// Nesting.
		{"deep 32 (at the limit)", nested(32), ""},
		{"deep 33", nested(33), "max_schema_depth"},
		{"deep 400", nested(400), "max_schema_depth"},
		{"deep 3000", nested(3000), "max_schema_depth"},
		{"deep 100k (3.5 MB body)", nested(100_000), "max_schema_depth"},
		{"deep arrays of items 33", nestedItems(33), "max_schema_depth"},
		{"deep arrays of items 3000", nestedItems(3000), "max_schema_depth"},
		{"deep data in enum", `{"enum":[` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `]}`, "max_schema_depth"},
		{"deep allOf", strings.Repeat(`{"allOf":[`, 40) + `{}` + strings.Repeat(`]}`, 40), "max_schema_depth"},
		// Width.
		{"wide 100k properties", wide(100_000), "max_schema_properties"},
		{"wide 1001 properties", `{"properties":{` + joined(1001, `"%d":{}`) + `}}`, "max_schema_properties"},
		{"allOf of 1501 empty schemas", `{"allOf":[` + joined(1501, `{}`) + `]}`, "max_schema_subschemas"},
		{"allOf of 1501 true", `{"allOf":[` + joined(1501, `true`) + `]}`, "max_schema_subschemas"},
		// A depth-31 tree under the root weighs 32 + (0+1+…+31)/16 = 63.
		{"allOf of 24 depth-31 item trees", `{"allOf":[` + joined(24, nestedItems(31)) + `]}`, "max_schema_subschemas"},
		{"allOf of 23 depth-31 item trees", `{"allOf":[` + joined(23, nestedItems(31)) + `]}`, ""},
		{"24 depth-31 property trees", forest(24, 31), "max_schema_subschemas"},
		{"23 depth-31 property trees", forest(23, 31), ""},
		{"enum of 10001 values", `{"enum":[` + joined(10001, `%d`) + `]}`, "max_schema_enum_values"},
		{"enum of 10000 values", `{"enum":[` + joined(10000, `%d`) + `]}`, ""},
		// References.
		{"101 refs", `{"$defs":{"s":{"type":"string"}},"properties":{` + joined(101, `"p%d":{"$ref":"#/$defs/s"}`) + `}}`, "max_schema_refs"},
		{"ref chain 99", refChain(99), ""},
		{"ref cycle", `{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`, ""},
		{"self ref", `{"$ref":"#"}`, ""},
		{"allOf fan-out 10×10 (10^10 applications)", fanOut(10, 9), "max_schema_expansion"},
		{"allOf fan-out 4×10 (22,222 applications)", fanOut(4, 10), "max_schema_expansion"},
		{"allOf fan-out 3×10 (2,222 applications)", fanOut(3, 10), ""},
		{"remote ref https", `{"$ref":"https://evil.example/schema.json"}`, "invalid: not a local reference"},
		{"remote ref file", `{"properties":{"a":{"$ref":"file:///etc/passwd"}}}`, "invalid: not a local reference"},
		{"relative ref", `{"$ref":"other.json#/a"}`, "invalid: not a local reference"},
		{"remote dynamicRef", `{"$dynamicRef":"http://169.254.169.254/latest"}`, "invalid: not a local reference"},
		{"remote ref in items", `{"type":"array","items":{"type":"object","properties":{"a":{"$ref":"https://evil.example/s"}}}}`, "invalid: not a local reference"},
		{"remote ref in a draft-07 items array", `{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"$ref":"https://evil.example/s"}]}`, "invalid: not a local reference"},
		{"remote ref in $defs", `{"$defs":{"x":{"additionalProperties":{"$ref":"//evil.example/s"}}}}`, "invalid: not a local reference"},
		{"remote ref in dependencies", `{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"a":{"$ref":"https://evil.example/s"}}}`, "invalid: not a local reference"},
		{"refs inside items count", `{"$defs":{"s":{"type":"string"}},"items":{"properties":{` + joined(101, `"p%d":{"$ref":"#/$defs/s"}`) + `}}}`, "max_schema_refs"},
		{"escaped remote ref", `{"$r\u0065f":"https://evil.example/s"}`, "invalid: not a local reference"},
		{"remote $schema", `{"$schema":"https://evil.example/meta","type":"object"}`, "invalid"},
		{"remote ref behind an $id", `{"$id":"https://evil.example/","$ref":"s.json"}`, "invalid: not a local reference"},
		{"property named $ref", `{"type":"object","properties":{"$ref":{"type":"string"}}}`, ""},
		{"$ref-shaped const", `{"const":{"$ref":"https://evil.example/s"}}`, ""},
		{"recursion doubling per level", `{"$defs":{"n":{"allOf":[{"$ref":"#/$defs/x"},{"$ref":"#/$defs/x"}]},"x":{"type":"object","properties":{"c":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`, "max_schema_expansion"},
		{"recursion through anyOf twice", `{"anyOf":[{"properties":{"c":{"$ref":"#"}}},{"properties":{"c":{"$ref":"#"}}}]}`, "max_schema_expansion"},
		{"recursion through a property and a matching pattern", `{"properties":{"c":{"$ref":"#"}},"patternProperties":{"^c$":{"$ref":"#"}}}`, "max_schema_expansion"},
		{"recursion through items and contains", `{"type":"array","items":{"$ref":"#"},"contains":{"$ref":"#"}}`, "max_schema_expansion"},
		{"binary tree", `{"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer"},"left":{"$ref":"#/$defs/t"},"right":{"$ref":"#/$defs/t"}}}},"$ref":"#/$defs/t"}`, ""},
		{"any JSON value", `{"$defs":{"v":{"anyOf":[{"type":"string"},{"type":"number"},{"type":"array","items":{"$ref":"#/$defs/v"}},{"type":"object","additionalProperties":{"$ref":"#/$defs/v"}}]}},"$ref":"#/$defs/v"}`, ""},
		{"mutual recursion", `{"$defs":{"a":{"properties":{"b":{"$ref":"#/$defs/b"}}},"b":{"properties":{"a":{"$ref":"#/$defs/a"}},"items":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`, ""},
		// Patterns.
		{"giant pattern a{1000}×11", `{"type":"string","pattern":"` + strings.Repeat("a{1000}", 11) + `"}`, "max_schema_pattern_size"},
		{"giant patternProperties key", `{"patternProperties":{"` + strings.Repeat("[a-z]{1,1000}", 11) + `":{}}}`, "max_schema_pattern_size"},
		{"pattern a{1000}×9", `{"type":"string","pattern":"` + strings.Repeat("a{1000}", 9) + `"}`, ""},
		{"nested repetition", `{"type":"string","pattern":"((a{100}){100}){100}"}`, "invalid"},
		// Size.
		{"65 KiB of description", `{"description":"` + strings.Repeat("x", 65<<10) + `"}`, "max_schema_bytes"},
		// Malformed.
		{"truncated", `{"type":"object","properties":{`, "invalid"},
		{"not a schema", `{"type":12}`, "invalid"},
		// Big but reasonable.
		{"depth 20", nested(20), ""},
		{"500 properties", wide(500), ""},
		{"recursive tree", `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name"]}},"$ref":"#/$defs/node"}`, ""},
		{"draft-07 items array", `{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"},{"type":"number"}],"additionalItems":false}`, ""},
	}
}

func TestHostileSchemas(t *testing.T) {
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewCompiler(Limits{}).Compile(context.Background(), json.RawMessage(tc.schema))
			var le *LimitError
			switch tc.limit {
			case "":
				if err != nil {
					t.Fatalf("rejected (%d bytes): %.300v", len(tc.schema), err)
				}
			case "invalid", "invalid: not a local reference":
				msg := strings.TrimPrefix(strings.TrimPrefix(tc.limit, "invalid"), ": ")
				if err == nil || !errors.Is(err, ErrSchema) || errors.As(err, &le) || !strings.Contains(err.Error(), msg) {
					t.Fatalf("err = %.300v, want ErrSchema (%q) and no *LimitError", err, msg)
				}
			default:
				if !errors.As(err, &le) {
					t.Fatalf("err = %.300v, want *LimitError %s", err, tc.limit)
				}
				if want := "structured_output." + tc.limit; le.Limit != want || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v (limit %s), want limit %s", err, le.Limit, want)
				}
				if !errors.Is(err, ErrSchemaLimit) || errors.Is(err, ErrSchema) {
					t.Errorf("errors.Is: ErrSchemaLimit %v, ErrSchema %v; want true, false", errors.Is(err, ErrSchemaLimit), errors.Is(err, ErrSchema))
				}
				if le.Got <= le.Max {
					t.Errorf("Got %d ≤ Max %d", le.Got, le.Max)
				}
			}
		})
	}
}

func TestLimitErrorMessage(t *testing.T) {
	_, err := Compile(json.RawMessage(nested(3000)))
	if got, want := fmt.Sprint(err), "schema nesting depth exceeds 32 (structured_output.max_schema_depth)"; got != want {
		t.Errorf("(-got +want)\n-%s\n+%s", got, want)
	}
	var le *LimitError
	if !errors.As(err, &le) || le.Max != 32 || le.Got != 33 {
		t.Errorf("LimitError %+v, want Max 32 Got 33", le)
	}
}

// A reference cycle compiles; validating against it reports the cycle at
// once instead of looping.
func TestRefCycleValidates(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if vs := s.Validate([]byte(`{"x":1}`)); len(vs) != 1 || !strings.Contains(vs[0].Message, "cycle") {
		t.Errorf("violations %v, want one reporting the reference cycle", vs)
	}
}

// A Compiler applies its own limits, whatever other Compilers apply: two
// meshes (or a mesh and its reload) never change each other's.
func TestCompilerLimits(t *testing.T) {
	c := NewCompiler(Limits{MaxDepth: 5})
	if got := c.Limits(); got.MaxDepth != 5 || got.MaxBytes != DefaultLimits().MaxBytes {
		t.Errorf("Limits %+v, want MaxDepth 5 and the other defaults", got)
	}
	other := NewCompiler(Limits{MaxDepth: 100})
	if _, err := other.Compile(context.Background(), json.RawMessage(nested(6))); err != nil {
		t.Errorf("depth 6 under MaxDepth 100: %v", err)
	}
	if _, err := c.Compile(context.Background(), json.RawMessage(nested(5))); err != nil {
		t.Errorf("depth 5: %v", err)
	}
	_, err := c.Compile(context.Background(), json.RawMessage(nested(6)))
	if got, want := fmt.Sprint(err), "schema nesting depth exceeds 5 (structured_output.max_schema_depth)"; got != want {
		t.Errorf("(-got +want)\n-%s\n+%s", got, want)
	}
	if _, err := Compile(json.RawMessage(nested(6))); err != nil {
		t.Errorf("Compile (the defaults) after a Compiler with MaxDepth 5: %v", err)
	}
	// A cached schema is held to the limits of the call, not of its compile.
	if _, err := NewCompiler(Limits{}).Compile(context.Background(), json.RawMessage(fanOut(3, 10))); err != nil {
		t.Fatal(err)
	}
	var le *LimitError
	if _, err := NewCompiler(Limits{MaxExpansion: 1000}).Compile(context.Background(), json.RawMessage(fanOut(3, 10))); !errors.As(err, &le) || le.Limit != "structured_output.max_schema_expansion" || le.Max != 1000 {
		t.Errorf("cached fan-out under MaxExpansion 1000: %v (%+v), want the expansion limit at 1000", err, le)
	}
}

func TestCanonicalCacheKey(t *testing.T) {
	a := mustCompile(t, `{"type":"object","properties":{"n":{"type":"integer"}}}`)
	b := mustCompile(t, "{ \"type\" : \"object\",\n  \"properties\": {\"n\": {\"type\": \"integer\"}} }")
	if a.sch != b.sch {
		t.Error("two formattings of one schema compiled twice; want one compiled form")
	}
	if !strings.Contains(string(b.Raw()), "\n") {
		t.Errorf("Raw %q: want the caller's own text", b.Raw())
	}
}

func TestCompileDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewCompiler(Limits{}).Compile(ctx, json.RawMessage(riskSchema)); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// runs makes the schemas of tests that need a cache miss unique per run
// (-count).
var runs atomic.Int64

// With every compile slot of a Compiler taken, a caller with a new schema
// waits under its context and gives up when it ends; the abandoned compile
// does not poison the cache, and once a slot frees the schema compiles.
// Another Compiler's slots are its own: it compiles meanwhile.
func TestCompileSlotsWaitUnderContext(t *testing.T) {
	c := NewCompiler(Limits{MaxConcurrentCompiles: 2})
	held := holdAllSlots(t, c)
	if held != 2 {
		t.Errorf("held %d slots, want 2", held)
	}
	schema := json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"slot_test":{"type":"boolean"}},"$comment":"%d"}`, runs.Add(1)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Compile(ctx, schema)
	other := json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"other":{"type":"boolean"}},"$comment":"%d"}`, runs.Add(1)))
	if _, err := NewCompiler(Limits{MaxConcurrentCompiles: 2}).Compile(context.Background(), other); err != nil {
		t.Errorf("another Compiler while the first's slots are taken: %v", err)
	}
	for range held {
		c.releaseSlot()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v with every slot taken, want context.DeadlineExceeded", err)
	}
	if _, err := c.Compile(context.Background(), schema); err != nil {
		t.Fatalf("after the slots freed: %v", err)
	}
}

// holdAllSlots takes every free compile slot of c and returns how many it
// took.
func holdAllSlots(t *testing.T, c *Compiler) int {
	t.Helper()
	n := 0
	for {
		select {
		case <-c.slots:
			n++
		default:
			return n
		}
	}
}

// MaxConcurrentCompiles sizes a Compiler's slots, at least one and at most
// maxCompileSlots.
func TestCompilerSlots(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		want int
	}{
		{"one", 1, 1},
		{"three", 3, 3},
		{"default", 0, DefaultLimits().MaxConcurrentCompiles},
		{"capped", 10000, maxCompileSlots},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCompiler(Limits{MaxConcurrentCompiles: tc.n})
			if got := holdAllSlots(t, c); got != tc.want {
				t.Errorf("%d slots, want %d", got, tc.want)
			}
		})
	}
}

// The flights' locks and the default Compiler's slots were made outside
// any testing/synctest bubble, so a compile in one bubble can wait for, or
// be waited for by, a compile anywhere; a Compiler made outside a bubble
// serves inside it and outside.
func TestCompileNotBoundToABubble(t *testing.T) {
	var lock chan struct{}
	c := NewCompiler(Limits{MaxConcurrentCompiles: 1})
	synctest.Test(t, func(t *testing.T) {
		if _, err := Compile(json.RawMessage(fmt.Sprintf(`{"$comment":"bubble %d"}`, runs.Add(1)))); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compile(context.Background(), json.RawMessage(fmt.Sprintf(`{"$comment":"bubble %d"}`, runs.Add(1)))); err != nil {
			t.Fatal(err)
		}
		key := [32]byte{1, byte(runs.Add(1))}
		_, _, f, lead := cache.get(key)
		if !lead || f == nil {
			t.Fatalf("lead %v, flight %v: want a new flight", lead, f)
		}
		lock = f.lock
		cache.finish(key, f, compiled{err: errAbandoned}, true)
	})
	// Outside the bubble: these panic on a channel made inside one.
	select {
	case lock <- struct{}{}:
		<-lock
	default:
		t.Error("a free flight lock is full")
	}
	if n := holdAllSlots(t, c); n != 1 {
		t.Errorf("%d slots free after the bubble, want 1", n)
	}
	c.releaseSlot()
	if _, err := c.Compile(context.Background(), json.RawMessage(fmt.Sprintf(`{"$comment":"outside %d"}`, runs.Add(1)))); err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(json.RawMessage(fmt.Sprintf(`{"$comment":"outside %d"}`, runs.Add(1)))); err != nil {
		t.Fatal(err)
	}
}

// A flood of one new schema compiles it once.
func TestCompileSharedFlight(t *testing.T) {
	schema := json.RawMessage(fmt.Sprintf(`{"$comment":"%d","allOf":[%s]}`, runs.Add(1), forest(40, 20)))
	before := compiles.Load()
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Go(func() { _, errs[i] = Compile(schema) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := compiles.Load() - before; n != 1 {
		t.Errorf("%d compiles for 50 concurrent callers of one schema, want 1", n)
	}
}

func TestCacheBounded(t *testing.T) {
	for i := range maxCacheEntries + 100 {
		if _, err := Compile(json.RawMessage(fmt.Sprintf(`{"const":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := cache.len(); n > maxCacheEntries {
		t.Errorf("%d cached schemas, want ≤ %d", n, maxCacheEntries)
	}
	big := `{"description":"` + strings.Repeat("x", 60<<10) + `","const":%d}`
	for i := range maxCacheBytes/len(big) + 10 {
		if _, err := Compile(json.RawMessage(fmt.Sprintf(big, i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, b := cache.len(); b > maxCacheBytes {
		t.Errorf("%d cached schema bytes, want ≤ %d", b, maxCacheBytes)
	}
}

// Many callers, few schemas, some giving up part way: every caller gets its
// schema or its context's error, and afterwards no flight is left open and
// every flight lock is back in the pool.
func TestCompileFlightsSettle(t *testing.T) {
	base := runs.Add(1)
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Go(func() {
			schema := json.RawMessage(fmt.Sprintf(`{"$comment":"settle %d %d","allOf":[%s]}`, base, i%5, forest(10, 10)))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if i%3 == 0 {
				go cancel()
			}
			s, err := defaultCompiler.Compile(ctx, schema)
			switch {
			case err == nil && s == nil:
				errs[i] = errors.New("nil schema and nil error")
			case err != nil && !errors.Is(err, context.Canceled):
				errs[i] = err
			case err != nil && i%3 != 0:
				errs[i] = fmt.Errorf("caller %d never cancelled: %w", i, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	cache.mu.Lock()
	open := len(cache.flights)
	cache.mu.Unlock()
	if open != 0 || len(flightLocks) != maxFlights {
		t.Errorf("%d flights open, %d of %d locks in the pool; want 0 and all", open, len(flightLocks), maxFlights)
	}
}
