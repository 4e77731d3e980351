package keel_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportRules enforces the import direction of ../shared/STYLE.md: leaf
// packages stay leaves, the engine never imports the HTTP front, telemetry
// or storage, and only commands and tests import the simulator.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/keelmesh/keel"
	// config may import the policy packages whose config structs it decodes
	// into (STYLE.md rule 22), because they are stdlib-only leaves themselves.
	stdlibOnly := map[string][]string{
		mod + "/internal/llm":            nil,
		mod + "/internal/sse":            nil,
		mod + "/internal/resilience":     nil,
		mod + "/config":                  {"github.com/goccy/go-yaml", mod + "/internal/resilience", mod + "/internal/health", mod + "/internal/pricing", mod + "/internal/cache", mod + "/internal/shadow", mod + "/internal/pii", mod + "/internal/convstate"},
		mod + "/internal/pricing":        nil,
		mod + "/internal/cache":          {mod + "/internal/llm", mod + "/internal/pipeline", mod + "/internal/provider"},
		mod + "/internal/pipeline":       {mod + "/internal/llm", mod + "/internal/provider"},
		mod + "/internal/shadow":         {mod + "/internal/llm", mod + "/internal/pipeline"},
		mod + "/internal/semcache":       {"github.com/coder/hnsw", mod + "/internal/cache", mod + "/internal/llm", mod + "/internal/pipeline"},
		mod + "/internal/wire/anthropic": {mod + "/internal/llm", mod + "/internal/sse", mod + "/internal/jsonx"},
		mod + "/internal/wire/openai":    {mod + "/internal/llm", mod + "/internal/sse", mod + "/internal/jsonx"},
		mod + "/internal/wire/responses": {mod + "/internal/llm", mod + "/internal/sse", mod + "/internal/jsonx"},
		mod + "/internal/jsonx":          nil,
		mod + "/internal/wire/translate": {mod + "/internal/llm", mod + "/internal/jsonx"},
		mod + "/internal/wire": {mod + "/internal/llm", mod + "/internal/sse", mod + "/internal/jsonx",
			mod + "/internal/wire/anthropic", mod + "/internal/wire/openai", mod + "/internal/wire/responses"},
		// Stage packages: their logic, the pipeline contract and the leaves
		// they read, never the engine.
		mod + "/internal/structured": {"github.com/santhosh-tekuri/jsonschema/v6", mod + "/internal/llm", mod + "/internal/pipeline", mod + "/internal/provider", mod + "/internal/wire/translate"},
		mod + "/internal/fragment":   {mod + "/internal/llm", mod + "/internal/pipeline", mod + "/internal/provider", mod + "/internal/structured"},
		mod + "/internal/classify":   {mod + "/internal/llm"},
		mod + "/internal/rollout":    {mod + "/internal/llm", mod + "/internal/pipeline", mod + "/internal/resilience"},
		mod + "/internal/health":     nil,
		mod + "/internal/route":      nil,
		mod + "/internal/pii":        {mod + "/internal/llm", mod + "/internal/pipeline"},
		mod + "/internal/convstate":  {mod + "/internal/llm", mod + "/internal/jsonx"},
	}
	forbidden := map[string][]string{
		mod + "/internal/engine": {mod + "/internal/server", mod + "/internal/telemetry", mod + "/internal/store", "github.com/prometheus", "github.com/redis", "modernc.org/sqlite", mod + "/sim"},
		mod + "/internal/route":  {mod + "/internal/health"},
		mod + "/internal/health": {mod + "/internal/route"},
	}
	simImporters := map[string]bool{mod + "/cmd/keel": true, mod + "/internal/simfleet": true, mod + "/bench": true}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, ":")
		var imports []string
		if imps != "" {
			imports = strings.Fields(imps)
		}
		if allowed, ok := stdlibOnly[pkg]; ok {
			checked++
			for _, imp := range imports {
				if isStd(imp) || hasPrefix(imp, allowed) {
					continue
				}
				t.Errorf("%s imports %s; it may import only the standard library and %v", pkg, imp, allowed)
			}
		}
		if bad, ok := forbidden[pkg]; ok {
			checked++
			for _, imp := range imports {
				if hasPrefix(imp, bad) {
					t.Errorf("%s imports %s, which the import rules forbid", pkg, imp)
				}
			}
		}
		for _, imp := range imports {
			if (imp == mod+"/sim" || strings.HasPrefix(imp, mod+"/sim/")) && !simImporters[pkg] && !strings.HasPrefix(pkg, mod+"/sim") {
				t.Errorf("%s imports the simulator; only commands and tests may", pkg)
			}
		}
	}
	if checked < 4 {
		t.Fatalf("checked only %d packages; the package list is wrong:\n%s", checked, out)
	}
}

func isStd(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, p+"/") {
			return true
		}
	}
	return false
}
