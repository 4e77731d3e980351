package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
)

const rulesDir = "../../../deploy/prometheus"

// promtool validates rules.yml and runs its unit tests (rules_test.yml)
// when it is installed (Debian package "prometheus"); CI installs it.
func TestPromtool(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (apt-get install prometheus)")
	}
	cases := []struct {
		name string
		args []string
	}{
		{"check rules", []string{"check", "rules", "rules.yml"}},
		{"test rules", []string{"test", "rules", "rules_test.yml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, c.args...)
			cmd.Dir = rulesDir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool %s: %v\n%s", strings.Join(c.args, " "), err, out)
			}
		})
	}
}

// Every series the rules read is one this package exports, so a renamed
// metric cannot silently empty a dashboard or an alert.
func TestRulesReadExportedSeries(t *testing.T) {
	m, err := New(Options{Models: []string{"m"}, Regions: []string{"r"}, NoRuntimeMetrics: true,
		Endpoints: func() []fleet.Status { return []fleet.Status{{ID: "m/r", Breaker: "closed"}} }})
	if err != nil {
		t.Fatal(err)
	}
	m.RequestDone(&callrec.Record{
		Call:      callrec.Call{Model: "m"},
		Route:     callrec.Route{ServedRegion: "r", Domain: "code", Fallback: "overloaded", QueueWait: time.Millisecond},
		Fragments: &callrec.Fragments{Count: 1, OK: 1, Fusions: 1, FusionConflicts: 1},
	})
	fams := scrape(t, m.Handler())
	exported := map[string]bool{}
	for name, f := range fams {
		exported[name] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[name+s] = true
			}
		}
	}
	rules, err := os.ReadFile(filepath.Join(rulesDir, "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// Raw series are the mesh_* names outside recording-rule names (which
	// contain colons) inside rate(...) or comparisons.
	var body []string
	for _, line := range strings.Split(string(rules), "\n") {
		if l := strings.TrimSpace(line); !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "- record:") &&
			!strings.HasPrefix(l, "summary:") && !strings.HasPrefix(l, "description:") {
			body = append(body, line)
		}
	}
	seen := 0
	for _, name := range regexp.MustCompile(`(?:^|[^:\w])(mesh_[a-z_]+)`).FindAllStringSubmatch(strings.Join(body, "\n"), -1) {
		seen++
		if !exported[name[1]] {
			t.Errorf("rules.yml reads %s, which the metrics package does not export", name[1])
		}
	}
	if seen < 10 {
		t.Errorf("found only %d series references in rules.yml", seen)
	}
}
