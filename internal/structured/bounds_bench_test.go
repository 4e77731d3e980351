package structured

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// compileFresh is Compiler.Compile without the cache: the cost a schema never
// seen before puts on a core.
func compileFresh(raw []byte, lim Limits) error {
	canon, err := prescan(raw, lim)
	if err != nil {
		return err
	}
	return compileCounted(canon, raw, lim).err
}

// worstCases are schemas at the edge of every limit, the costliest the
// defaults let through, and bodies up to the 10 MiB request cap.
func worstCases() []hostileCase {
	const tenMiB = 10 << 20
	longNames := `{"type":"object","properties":{` + joined(1000, `"a_rather_long_property_name_number_%d":{"type":"string"}`) + `}}`
	return []hostileCase{
		{"edge 1000 properties", wide(1000), ""},
		{"edge 1000 long-named properties", longNames, ""},
		{"edge allOf of 1499 empty schemas", `{"allOf":[` + joined(1499, `{}`) + `]}`, ""},
		{"edge allOf of 1499 true", `{"allOf":[` + joined(1499, `true`) + `]}`, ""},
		{"edge 64 KiB of description", `{"description":"` + strings.Repeat("x", 65000) + `"}`, ""},
		{"edge enum of 1000 depth-30 arrays", `{"enum":[` + joined(1000, strings.Repeat("[", 30)+strings.Repeat("]", 30)) + `]}`, ""},
		{"edge 99 refs to a 190-subschema def", `{"$defs":{"d":` + wide(189) + `},"properties":{` + joined(99, `"p%d":{"$ref":"#/$defs/d"}`) + `}}`, ""},
		{"edge fan-out under additionalProperties of 990 names", `{"allOf":[{"properties":{` + joined(990, `"p%d":{}`) + `}},{"additionalProperties":{"$ref":"#/$defs/l0"}}],"$defs":` + strings.TrimPrefix(fanOut(3, 10), `{"$ref":"#/$defs/l0","$defs":`), "max_schema_expansion"},
		{"body 10 MiB deep", nested(tenMiB / 38), "max_schema_depth"},
		{"body 10 MiB string", `{"description":"` + strings.Repeat("x", tenMiB) + `"}`, "max_schema_bytes"},
		{"body 10 MiB of properties", wide(tenMiB / 28), "max_schema_properties"},
		{"body 10 MiB enum", `{"enum":[` + joined(tenMiB/6, `%d`) + `]}`, "max_schema_bytes"},
	}
}

// reportCPU reports the process CPU time per op since start as cpu-ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkHostileSchemas compiles every hostile case uncached. Targets:
// a schema the limits admit compiles in ≤ 50 ms, one they refuse is refused
// in ≤ 5 ms. cpu-ns/op is the process's CPU time per op: on a shared machine
// it is the figure to hold to the targets.
func BenchmarkHostileSchemas(b *testing.B) {
	lim := DefaultLimits()
	for _, tc := range append(hostileCases(), worstCases()...) {
		raw := []byte(tc.schema)
		b.Run(strings.ReplaceAll(tc.name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				err := compileFresh(raw, lim)
				if (err == nil) != (tc.limit == "") {
					b.Fatalf("err = %.200v, want limit %q", err, tc.limit)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkHostileValidate validates answers against schemas the limits
// admit — the fan-out near the default expansion limit — and, compiled
// without the limits, a recursive schema whose cost doubles with each level
// of the answer (refused by max_schema_expansion).
func BenchmarkHostileValidate(b *testing.B) {
	fan := mustCompile(b, fanOut(3, 10))
	near := mustCompile(b, fanOut(4, 8)) // 9,362 applications
	// The doubling recursion is refused by Compiler.Compile; compile it
	// directly to measure what the refusal prevents.
	rec, err := compile(json.RawMessage(`{"$defs":{"n":{"allOf":[{"$ref":"#/$defs/x"},{"$ref":"#/$defs/x"}]},"x":{"type":"object","properties":{"c":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`))
	if err != nil {
		b.Fatal(err)
	}
	deep := func(d int) []byte {
		return []byte(strings.Repeat(`{"c":`, d) + `{}` + strings.Repeat(`}`, d))
	}
	cases := []struct {
		name string
		s    *Schema
		doc  []byte
	}{
		{"fan-out_2222/valid", fan, []byte(`"x"`)},
		{"fan-out_2222/invalid", fan, []byte(`1`)},
		{"fan-out_9362/valid", near, []byte(`"x"`)},
		{"fan-out_9362/invalid", near, []byte(`1`)},
	}
	for _, d := range []int{8, 12, 16} {
		cases = append(cases, struct {
			name string
			s    *Schema
			doc  []byte
		}{fmt.Sprintf("recursive_2^d/depth_%d", d), rec, deep(d)})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				c.s.Validate(c.doc)
			}
			reportCPU(b, cpu)
		})
	}
}
