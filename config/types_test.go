package config

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Duration
		wantErr string
	}{
		{name: "ms", in: "300ms", want: Duration(300 * time.Millisecond)},
		{name: "compound", in: "1h30m", want: Duration(90 * time.Minute)},
		{name: "spaces trimmed", in: " 5s ", want: Duration(5 * time.Second)},
		{name: "zero with unit", in: "0s", want: 0},
		{name: "negative parses", in: "-2s", want: Duration(-2 * time.Second)},
		{name: "bare number", in: "30", wantErr: `expected a duration with a unit such as "30s" or "300ms", got "30" (add a unit: ns, us, ms, s, m, h)`},
		{name: "bare zero", in: "0", wantErr: `expected a duration with a unit such as "30s" or "300ms", got "0" (add a unit: ns, us, ms, s, m, h)`},
		{name: "bare float", in: "1.5", wantErr: `expected a duration with a unit such as "30s" or "300ms", got "1.5" (add a unit: ns, us, ms, s, m, h)`},
		{name: "unknown unit", in: "5 parsecs", wantErr: `expected a duration such as "30s" or "300ms", got "5 parsecs"`},
		{name: "empty", in: "", wantErr: `expected a duration such as "30s" or "300ms", got an empty string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("ParseDuration(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestDurationEncoding(t *testing.T) {
	type doc struct {
		D Duration `json:"d" yaml:"d"`
	}
	j, err := json.Marshal(doc{D: Duration(1500 * time.Millisecond)})
	if err != nil || string(j) != `{"d":"1.5s"}` {
		t.Errorf("json.Marshal = %s, %v", j, err)
	}
	var back doc
	if err := json.Unmarshal(j, &back); err != nil || back.D != Duration(1500*time.Millisecond) {
		t.Errorf("json.Unmarshal = %v, %v", back.D, err)
	}
	if err := json.Unmarshal([]byte(`{"d":"10"}`), &back); err == nil || !strings.Contains(err.Error(), "add a unit") {
		t.Errorf("json.Unmarshal of a bare number string: error %v, want one asking for a unit", err)
	}
	y, err := yaml.Marshal(doc{D: Duration(2 * time.Minute)})
	if err != nil || string(y) != "d: 2m0s\n" {
		t.Errorf("yaml.Marshal = %q, %v", y, err)
	}
	if got := Duration(3 * time.Second).Std(); got != 3*time.Second {
		t.Errorf("Std() = %v", got)
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "alpha", "EMPTY": "", "URL": "http://h:1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "no reference", in: "plain $ text", want: "plain $ text"},
		{name: "whole value", in: "${A}", want: "alpha"},
		{name: "embedded twice", in: "x-${A}-${A}-y", want: "x-alpha-alpha-y"},
		{name: "default when unset", in: "${NOPE:-fallback}", want: "fallback"},
		{name: "default when empty", in: "${EMPTY:-fallback}", want: "fallback"},
		{name: "set wins over default", in: "${A:-fallback}", want: "alpha"},
		{name: "empty default", in: "${NOPE:-}", want: ""},
		{name: "default with colon and slashes", in: "${NOPE:-http://127.0.0.1:8000/v1}", want: "http://127.0.0.1:8000/v1"},
		{name: "set but empty without default", in: "<${EMPTY}>", want: "<>"},
		{name: "escaped", in: "$${A} ${A}", want: "${A} alpha"},
		{name: "dollar not followed by brace", in: "p$ss$A", want: "p$ss$A"},
		{name: "unset", in: "${NOPE}", wantErr: "environment variable NOPE is not set (write ${NOPE:-default} to give a default)"},
		{name: "empty name", in: "${}", wantErr: "invalid variable reference: expected ${NAME} or ${NAME:-default} with NAME made of letters, digits and '_'"},
		{name: "bad name", in: "${A-B}", wantErr: "invalid variable reference: expected ${NAME} or ${NAME:-default} with NAME made of letters, digits and '_'"},
		{name: "unterminated", in: "${A", wantErr: "unterminated ${ (write $${ for a literal ${)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := expand(tt.in, lookup)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("expand(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestExpandNotTextual checks that a value containing YAML syntax cannot
// change the structure: expansion happens on decoded strings.
func TestExpandNotTextual(t *testing.T) {
	t.Setenv("KEEL_TEST_TRICKY", "x\"\n    api_key_env: EVIL\n  - name: injected")
	c, err := Parse([]byte("providers:\n  - name: a\n    type: openai\n    api_key: ${KEEL_TEST_TRICKY}\n"), "keel.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(c.Providers) != 1 || c.Providers[0].APIKeyEnv != "" || c.Providers[0].APIKey.Value() != os.Getenv("KEEL_TEST_TRICKY") {
		t.Errorf("expanded value changed the structure: %+v", c.Providers)
	}
}

func TestEndpointID(t *testing.T) {
	tests := []struct {
		name  string
		e     Endpoint
		model string
		want  string
	}{
		{name: "explicit region", e: Endpoint{Provider: "anthropic", Region: "us"}, model: "claude-sonnet-4-5", want: "claude-sonnet-4-5/us/anthropic"},
		{name: "empty region is default", e: Endpoint{Provider: "vllm"}, model: "qwen", want: "qwen/default/vllm"},
		{name: "model with slash", e: Endpoint{Provider: "p", Region: "r"}, model: "org/model", want: "org/model/r/p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.ID(tt.model); got != tt.want {
				t.Errorf("ID(%q) = %q, want %q", tt.model, got, tt.want)
			}
		})
	}
}

// TestImports fails when the package imports anything but the standard
// library, go-yaml and the policy and stage packages whose config types it
// decodes into (STYLE.md, import direction; deps_test.go checks what those
// import in turn).
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			switch {
			case !strings.Contains(first, "."):
			case path == "github.com/goccy/go-yaml", strings.HasPrefix(path, "github.com/goccy/go-yaml/"):
			case path == "github.com/keelmesh/keel/internal/resilience", path == "github.com/keelmesh/keel/internal/health", path == "github.com/keelmesh/keel/internal/pricing", path == "github.com/keelmesh/keel/internal/cache",
				path == "github.com/keelmesh/keel/internal/shadow", path == "github.com/keelmesh/keel/internal/pii", path == "github.com/keelmesh/keel/internal/convstate",
				path == "github.com/keelmesh/keel/internal/normalize", path == "github.com/keelmesh/keel/internal/structured", path == "github.com/keelmesh/keel/internal/fragment", path == "github.com/keelmesh/keel/internal/rollout",
				path == "github.com/keelmesh/keel/internal/affinity", path == "github.com/keelmesh/keel/internal/policy":
			default:
				t.Errorf("%s imports %s: config may import only the standard library, go-yaml, internal/resilience, internal/health, internal/pricing, internal/cache, internal/shadow, internal/pii, internal/convstate, internal/normalize, internal/structured, internal/fragment, internal/rollout, internal/affinity and internal/policy", name, path)
			}
		}
	}
}

// TestDocsExample keeps the annotated example in docs/config.md identical to
// testdata/full.yaml, which TestLoadFull loads.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Skipf("docs not present: %v", err)
	}
	full, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const open = "```yaml\n# Keel configuration"
	i := strings.Index(string(doc), open)
	if i < 0 {
		t.Fatal("docs/config.md has no complete example")
	}
	rest := string(doc)[i+len("```yaml\n"):]
	example := rest[:strings.Index(rest, "```")]
	if example != string(full) {
		t.Error("the complete example in docs/config.md differs from config/testdata/full.yaml; copy one to the other")
	}

	// Every key of every type is documented.
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		switch typ.Kind() {
		case reflect.Slice, reflect.Map:
			walk(typ.Elem())
		case reflect.Struct:
			for _, f := range yamlFields(typ) {
				if !strings.Contains(string(doc), f.name+"`") {
					t.Errorf("docs/config.md does not document key %q (in %s)", f.name, typ.Name())
				}
				walk(f.typ)
			}
		}
	}
	walk(reflect.TypeFor[Config]())
	for _, r := range reserved {
		if !strings.Contains(string(doc), "`"+r+"`") {
			t.Errorf("docs/config.md does not list reserved section %q", r)
		}
	}
}
