package keel_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/keelmesh/keel"

// reach lists, for each package it names, every package that package may
// reach through its imports, directly or not (Tailscale's deptest idea:
// the transitive closure, so that a new import two levels down cannot
// carry a layer where it does not belong). The standard library is always
// allowed. A package of this module allows only itself, so each layer
// below is named; it also allows the third-party packages it reaches (its
// own rule checks those). A third-party entry allows its module's packages
// and what they reach.
//
// The core's layers below the engine (observe, policy, relay, fleet) reach
// no stage package; the engine itself still does (its rule says why).
var reach = map[string][]string{
	// Leaves: the standard library only.
	mod + "/internal/llm":               nil,
	mod + "/internal/sse":               nil,
	mod + "/internal/jsonx":             nil,
	mod + "/internal/resilience":        nil,
	mod + "/internal/pricing":           nil,
	mod + "/internal/cache":             stageBase,
	mod + "/internal/shadow":            stageBase,
	mod + "/internal/health":            nil,
	mod + "/internal/route":             nil,
	mod + "/internal/pii":               stageBase,
	mod + "/internal/inproc":            nil,
	mod + "/internal/telemetry/semconv": nil,
	mod + "/internal/classify":          {mod + "/internal/llm"},
	mod + "/internal/fragment":          slices.Concat(stageBase, schemaLib, []string{mod + "/internal/structured"}),
	mod + "/internal/normalize":         {mod + "/internal/llm"},
	mod + "/internal/semcache":          slices.Concat(stageBase, []string{"github.com/coder/hnsw", mod + "/internal/cache"}),
	mod + "/internal/structured":        slices.Concat(stageBase, schemaLib),
	mod + "/internal/pipeline":          slices.Concat(providerReach, []string{mod + "/internal/provider"}),
	mod + "/internal/convstate":         {mod + "/internal/llm", mod + "/internal/jsonx"},
	mod + "/internal/wire/translate":    {mod + "/internal/llm", mod + "/internal/jsonx"},
	mod + "/internal/wire/anthropic":    wireLeaf,
	mod + "/internal/wire/openai":       wireLeaf,
	mod + "/internal/wire/responses":    wireLeaf,
	mod + "/internal/wire/gemini":       wireLeaf,
	mod + "/internal/wire/azure":        slices.Concat(wireLeaf, []string{mod + "/internal/wire/openai"}),
	mod + "/internal/wire":              slices.Concat(wireLeaf, []string{mod + "/internal/wire/anthropic", mod + "/internal/wire/openai", mod + "/internal/wire/responses", mod + "/internal/wire/gemini"}),
	// Bedrock's eventstream is decoded by the AWS SDK's codec (and its
	// smithy-go core), never by hand.
	mod + "/internal/wire/bedrock": slices.Concat(wireLeaf, []string{mod + "/internal/wire/anthropic", "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream",
		"github.com/aws/smithy-go"}),
	mod + "/internal/wire/google":        slices.Concat(wireLeaf, []string{mod + "/internal/wire/anthropic", mod + "/internal/wire/gemini"}),
	mod + "/internal/provider":           providerReach,
	mod + "/internal/normalize/calstore": {mod + "/internal/llm", mod + "/internal/normalize", "modernc.org/sqlite"},
	// The call's record: the types of the stage packages' parts, never the
	// engine or its observers.
	mod + "/internal/callrec": slices.Concat(stageBase, schemaLib, []string{mod + "/internal/cache", mod + "/internal/fragment", mod + "/internal/pii", mod + "/internal/structured"}),
	// config decodes into the policy packages' config structs (STYLE.md
	// rule 22); they are leaves themselves.
	mod + "/config": slices.Concat([]string{"github.com/goccy/go-yaml", mod + "/internal/resilience", mod + "/internal/health", mod + "/internal/pricing",
		mod + "/internal/cache", mod + "/internal/shadow", mod + "/internal/pii", mod + "/internal/convstate", mod + "/internal/llm", mod + "/internal/jsonx",
		mod + "/internal/normalize", mod + "/internal/rollout", mod + "/internal/observe", mod + "/internal/fragment", mod + "/internal/structured",
		mod + "/internal/affinity", mod + "/internal/policy"}, stageBase, schemaLib),
	// The core's own layers: the observer events, the attempt policies, the
	// stream relay, and the fleet (endpoints' live state, the registry,
	// the chains' layout, replica sharing), which reaches no stage package.
	mod + "/internal/observe": {mod + "/internal/resilience"},
	mod + "/internal/policy":  slices.Concat(providerReach, []string{mod + "/internal/provider", mod + "/internal/resilience"}),
	mod + "/internal/relay":   slices.Concat(providerReach, []string{mod + "/internal/provider", mod + "/internal/resilience", mod + "/internal/policy"}),
	mod + "/internal/fleet": slices.Concat(providerReach, []string{mod + "/internal/provider", mod + "/internal/resilience", mod + "/internal/route",
		mod + "/internal/health"}),
	mod + "/internal/rollout": slices.Concat(stageBase, []string{mod + "/internal/resilience", mod + "/internal/observe"}),
	// One call's endpoint picks (which endpoints may compete, from their
	// published views): the fleet and the router; never the engine.
	mod + "/internal/pick": slices.Concat(providerReach, []string{mod + "/internal/provider", mod + "/internal/resilience", mod + "/internal/route",
		mod + "/internal/health", mod + "/internal/fleet"}),
	// What an attempt's end teaches health and the breaker: the typed
	// failure and the attempt's result; never the engine.
	mod + "/internal/outcome": slices.Concat(providerReach, []string{mod + "/internal/provider", mod + "/internal/resilience", mod + "/internal/health",
		mod + "/internal/policy"}),
	// Cache-aware routing over the engine's picks: the affinity table, the
	// cold-spend budgets and the router's candidates; no stage package.
	mod + "/internal/affinity": {mod + "/internal/resilience", mod + "/internal/llm"},
	mod + "/internal/cacheroute": slices.Concat(providerReach, []string{mod + "/internal/provider", mod + "/internal/resilience", mod + "/internal/policy",
		mod + "/internal/route", mod + "/internal/affinity"}),
	// The attempt lifecycle (a call's attempts through the policies, their
	// booking, hedging, settling, the stream relay's legs): the core's
	// layers and the record (whose parts' types reach the stage packages
	// it names); never the engine or chain's stage builders.
	mod + "/internal/attempt": slices.Concat(providerReach, schemaLib, []string{mod + "/internal/provider", mod + "/internal/resilience",
		mod + "/internal/route", mod + "/internal/health", mod + "/internal/normalize", mod + "/internal/pipeline", mod + "/internal/relay",
		mod + "/internal/policy", mod + "/internal/fleet", mod + "/internal/observe", mod + "/internal/callrec", mod + "/internal/affinity",
		mod + "/internal/cacheroute", mod + "/internal/pick", mod + "/internal/outcome", mod + "/internal/structured",
		mod + "/internal/cache", mod + "/internal/fragment", mod + "/internal/pii"}),
	// The stages' hooks over the engine's calls (chain.Call): the stage
	// packages and the record, never the engine.
	mod + "/internal/chain": slices.Concat(stageBase, schemaLib, []string{mod + "/internal/callrec", mod + "/internal/cache", mod + "/internal/semcache",
		"github.com/coder/hnsw", mod + "/internal/pii", mod + "/internal/rollout", mod + "/internal/resilience", mod + "/internal/observe",
		mod + "/internal/fragment", mod + "/internal/structured"}),
	// The engine: the layers below it, and (the last lines) the stage
	// packages it still reaches: it takes the stages chain.Build built
	// (the rollout plan and valve among them), runs the shadow calls and
	// implements chain.Call (ARCHITECTURE.md: what still ties the engine
	// to the stage packages).
	mod + "/internal/engine": slices.Concat(providerReach, []string{mod + "/internal/provider",
		mod + "/internal/resilience", mod + "/internal/route", mod + "/internal/health", mod + "/internal/normalize"},
		[]string{mod + "/internal/pipeline", mod + "/internal/relay", mod + "/internal/policy", mod + "/internal/fleet", mod + "/internal/observe", mod + "/internal/callrec",
			mod + "/internal/chain", mod + "/internal/affinity", mod + "/internal/cacheroute", mod + "/internal/pick", mod + "/internal/outcome",
			mod + "/internal/attempt"},
		[]string{mod + "/internal/cache", mod + "/internal/fragment", mod + "/internal/pii", mod + "/internal/shadow", mod + "/internal/structured",
			mod + "/internal/rollout", mod + "/internal/semcache", "github.com/coder/hnsw"}, schemaLib),
}

// stageBase is what a stage package may reach: the pipeline contract and
// the layers below it (never the engine).
var stageBase = slices.Concat(providerReach, []string{mod + "/internal/pipeline", mod + "/internal/provider"})

// providerReach is what the upstream client may reach: the codecs, the
// prices, and for Anthropic's models on Bedrock and Vertex the platforms'
// codecs, their credentials and signing by the AWS SDK (signer, the
// standard credential chain) and golang.org/x/oauth2/google (Application
// Default Credentials, the metadata server's on Google Cloud), Azure
// OpenAI's errors (wire/azure) and Microsoft Entra ID tokens (azcore's
// token credential type).
var providerReach = slices.Concat(wireAll, []string{mod + "/internal/pricing", mod + "/internal/wire/bedrock", mod + "/internal/wire/google",
	"github.com/aws/aws-sdk-go-v2/aws", "github.com/aws/aws-sdk-go-v2/config", "github.com/aws/smithy-go", "golang.org/x/oauth2", "cloud.google.com/go/compute/metadata",
	mod + "/internal/wire/azure", "github.com/Azure/azure-sdk-for-go/sdk/azcore"})

// schemaLib is the JSON Schema library and what it reaches.
var schemaLib = []string{"github.com/santhosh-tekuri/jsonschema/v6", "golang.org/x/text"}

// wireLeaf is what a codec may reach.
var wireLeaf = []string{mod + "/internal/llm", mod + "/internal/sse", mod + "/internal/jsonx"}

// wireAll is the codecs, the translation between them and the package
// choosing one by format.
var wireAll = slices.Concat(wireLeaf, []string{mod + "/internal/wire", mod + "/internal/wire/anthropic", mod + "/internal/wire/openai",
	mod + "/internal/wire/responses", mod + "/internal/wire/translate", mod + "/internal/wire/gemini"})

// never lists what a package may not reach even where reach does not name
// it: the reason the rule exists, stated once (STYLE.md: the core imports
// no metrics library, storage, HTTP front or simulator).
var never = map[string][]string{
	mod + "/internal/callrec": {mod + "/internal/engine", mod + "/internal/server", mod + "/internal/telemetry", mod + "/internal/store"},
	mod + "/internal/chain":   {mod + "/internal/engine"},
	mod + "/internal/pick":    {mod + "/internal/engine"},
	mod + "/internal/outcome": {mod + "/internal/engine"},
	mod + "/internal/attempt": {mod + "/internal/engine", mod + "/internal/chain", mod + "/internal/server", mod + "/internal/telemetry",
		mod + "/internal/store", mod + "/sim"},
	mod + "/internal/engine": {mod + "/internal/server", mod + "/internal/telemetry", mod + "/internal/store",
		mod + "/internal/keys", mod + "/config", mod + "/sim", "github.com/prometheus", "github.com/redis", "modernc.org/sqlite", "go.opentelemetry.io",
		// The feature packages that have left the engine: the tiers'
		// classifier (assemble builds an alias's Tiering).
		mod + "/internal/classify"},
	mod + "/internal/route":  {mod + "/internal/health"},
	mod + "/internal/health": {mod + "/internal/route"},
}

// simReachers may reach the simulator: commands, benchmarks and the
// in-process fleet builder (and the simulator's own packages); tests
// are not listed by go list's Deps of a package.
var simReachers = []string{mod + "/cmd", mod + "/bench", mod + "/internal/simfleet", mod + "/sim"}

// TestImportRules enforces the import direction of ../shared/STYLE.md on
// every package's transitive imports.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}:{{join .Deps \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := parseDeps(string(out))
	for pkg := range reach {
		if _, ok := deps[pkg]; !ok {
			t.Errorf("rule for %s, which go list does not list: rename or remove the rule", pkg)
		}
	}
	for _, v := range checkDeps(deps) {
		t.Error(v)
	}
}

// TestCheckDepsFinds: the checker reports an import that is two levels
// down, a forbidden one that reach would allow, and a package reaching the
// simulator; it passes third-party packages reached through an allowed
// one.
func TestCheckDepsFinds(t *testing.T) {
	deps := map[string][]string{
		mod + "/internal/llm":      {"fmt", mod + "/internal/jsonx"},
		mod + "/internal/jsonx":    {"errors"},
		mod + "/internal/semcache": {"github.com/coder/hnsw", "github.com/viterin/vek"},
		"github.com/coder/hnsw":    {"github.com/viterin/vek"},
		mod + "/internal/health":   {mod + "/internal/route"},
		mod + "/internal/keys":     {mod + "/internal/wire", mod + "/sim"},
	}
	got := checkDeps(deps)
	want := []string{
		mod + "/internal/health reaches " + mod + "/internal/route, which the import rules forbid",
		mod + "/internal/health reaches " + mod + "/internal/route; it may reach only the standard library and []",
		mod + "/internal/keys reaches the simulator (" + mod + "/sim); only commands, benchmarks and simfleet may",
		mod + "/internal/llm reaches " + mod + "/internal/jsonx; it may reach only the standard library and []",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("checkDeps:\n got %q\nwant %q", got, want)
	}
}

// parseDeps reads `go list -deps -f '{{.ImportPath}}:{{join .Deps " "}}'`.
func parseDeps(out string) map[string][]string {
	deps := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		pkg, ds, _ := strings.Cut(line, ":")
		deps[pkg] = strings.Fields(ds)
	}
	return deps
}

// checkDeps returns a line for each rule a package's dependencies break.
func checkDeps(deps map[string][]string) []string {
	var bad []string
	for pkg, ds := range deps {
		if !strings.HasPrefix(pkg, mod) {
			continue
		}
		allowed, ruled := reach[pkg]
		// What an allowed package reaches outside this module is allowed
		// with it.
		via := map[string]bool{}
		for _, a := range allowed {
			for _, d := range deps[a] {
				if !strings.HasPrefix(d, mod) {
					via[d] = true
				}
			}
		}
		for _, d := range ds {
			if isStd(d) {
				continue
			}
			if hasPrefix(d, never[pkg]) {
				bad = append(bad, pkg+" reaches "+d+", which the import rules forbid")
			}
			if ruled && !via[d] && !slices.Contains(allowed, d) && !hasPrefix(d, thirdParty(allowed)) {
				bad = append(bad, pkg+" reaches "+d+"; it may reach only the standard library and "+format(allowed))
			}
			if hasPrefix(d, []string{mod + "/sim"}) && !hasPrefix(pkg, simReachers) {
				bad = append(bad, pkg+" reaches the simulator ("+d+"); only commands, benchmarks and simfleet may")
			}
		}
	}
	return bad
}

// thirdParty is the entries of allowed outside this module: a module path
// allows its packages.
func thirdParty(allowed []string) []string {
	var out []string
	for _, a := range allowed {
		if !strings.HasPrefix(a, mod) {
			out = append(out, a)
		}
	}
	return out
}

func format(ps []string) string { return "[" + strings.Join(ps, " ") + "]" }

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
