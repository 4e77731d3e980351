package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/health"
)

// regions is a two-region endpoint set whose us-east region can be killed.
type regions struct {
	mu     sync.Mutex // guards killed
	killed bool
}

func (f *regions) kill() { f.mu.Lock(); f.killed = true; f.mu.Unlock() }

func (f *regions) endpoints() []fleet.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	us := fleet.Status{ID: "claude-sonnet/us-east/anthropic", Model: "claude-sonnet", Region: "us-east", Provider: "anthropic", State: fleet.StateHealthy, Breaker: "closed",
		Health: health.Snapshot{P95: 420 * time.Millisecond, InFlight: 4, ErrorRate: 0.01, Requests: 100, Headroom: 0.8}}
	eu := fleet.Status{ID: "claude-sonnet/eu-west/anthropic", Model: "claude-sonnet", Region: "eu-west", Provider: "anthropic", State: fleet.StateHealthy, Breaker: "closed",
		Health: health.Snapshot{P95: 510 * time.Millisecond, InFlight: 3, ErrorRate: 0.02, Requests: 100, Headroom: 0.9}}
	idle := fleet.Status{ID: "claude-sonnet-backup/ap-southeast/anthropic", Model: "claude-sonnet-backup", Region: "ap-southeast", Provider: "anthropic", State: fleet.StateHealthy, Breaker: "closed",
		Health: health.Snapshot{Headroom: 1}}
	if f.killed {
		// As the engine reports a region refusing connections: down, its
		// breaker untouched (issue 13: this showed as healthy).
		us.State = fleet.StateDown
		us.Health.ErrorRate, us.Health.InFlight = 1, 0
		eu.Health.InFlight = 9
	}
	return []fleet.Status{us, eu, idle}
}

// chromium finds the browser. Where it is missing the test skips, except
// under CI=true (.ci/run installs it), where a missing browser fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not installed under CI=true (.ci/run installs it with apt-get)")
	}
	t.Skip("chromium not installed (apt-get install -y chromium)")
	return ""
}

// screenshot saves the page as PNG under $KEEL_ARTIFACTS (else the temp
// directory) and logs the path.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("KEEL_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// clipped lists the page's table cells whose content overflows them and
// whether the page scrolls sideways, as one JavaScript expression.
const clippedJS = `(() => {
	const out = [];
	if (document.documentElement.scrollWidth > window.innerWidth) out.push("page " + document.documentElement.scrollWidth + " > " + window.innerWidth);
	for (const c of document.querySelectorAll("th, td")) if (c.scrollWidth > c.clientWidth + 1) out.push(c.textContent);
	for (const t of document.querySelectorAll("table")) if (t.parentElement.scrollWidth > t.parentElement.clientWidth + 1) out.push("table in " + t.parentElement.tagName);
	return out;
})()`

// In a real headless Chromium: the page is open while a region dies, and
// the fallback rate it shows rises as fallback records arrive over SSE.
// The killed region's endpoint shows the engine's state (down), the idle
// one "no data", nothing is clipped at 1280 px, and a screenshot is kept
// (path in the log).
func TestBrowserShowsFallbackRateRise(t *testing.T) {
	bin := chromium(t)
	fl := &regions{}
	d, err := New(Options{Interval: 100 * time.Millisecond, Endpoints: fl.endpoints})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /dashboard", d.Handler())
	mux.Handle("GET /dashboard/events", d.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	served := func(i int, region, fallback string) *callrec.Record {
		return &callrec.Record{
			Call: callrec.Call{RequestID: fmt.Sprintf("req-%04d", i), Model: "claude-sonnet", KeyID: "k_team", Team: "search"},
			Route: callrec.Route{Fallback: fallback, ServedBy: "claude-sonnet/" + region + "/anthropic", ServedModel: "claude-sonnet",
				ServedRegion: region},
			Result: callrec.Result{Status: 200, Cost: 0.0005},
		}
	}
	for i := range 60 { // healthy traffic before the page opens
		d.RequestDone(served(i, []string{"us-east", "eu-west"}[i%2], ""))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()

	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/dashboard"),
		chromedp.WaitVisible(chromedp.CSS("#conn.live")),
	); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	before, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#rate-fallback")))
	if err != nil {
		t.Fatal(err)
	}
	if before != "0.0%" {
		t.Errorf("fallback rate before the kill shows %q, want 0.0%%", before)
	}

	// Kill us-east while the page is open: every call now falls back to
	// eu-west after a connect error, arriving over the next second.
	fl.kill()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := range 60 {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			d.RequestDone(served(100+i, "eu-west", "connect_error"))
		}
	}()
	defer wg.Wait()

	// The shown rate must rise past 30 % and end at 60 fallbacks / 120 calls.
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](`Number(document.getElementById("rate-fallback").dataset.value) > 0.3`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("fallback rate never rose above 30%%: %v", err)
	}
	wg.Wait()
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](`document.getElementById("rate-fallback").dataset.value === "0.5"`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("fallback rate never reached 60/120: %v", err)
	}
	// Read everything in one evaluation: the page re-renders its tables on
	// every snapshot, so nodes found by one query may be gone by the next.
	got, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]string](`(() => {
		const q = (s) => { const e = document.querySelector(s); return e ? e.textContent : "(missing)"; };
		return {
			text: q("#rate-fallback"),
			value: document.getElementById("rate-fallback").dataset.value,
			breaker: q('tr[data-endpoint="claude-sonnet/us-east/anthropic"] .breaker'),
			state: q('tr[data-endpoint="claude-sonnet/us-east/anthropic"] .state'),
			idleP95: q('tr[data-endpoint="claude-sonnet-backup/ap-southeast/anthropic"] td:nth-child(5)'),
			idleErrors: q('tr[data-endpoint="claude-sonnet-backup/ap-southeast/anthropic"] td:nth-child(7)'),
			reason: q("#fallbacks tr:first-child td:nth-child(3)"),
			requests: q("#requests"),
			callsPoints: document.getElementById("chart-calls").dataset.points,
			p99Points: document.getElementById("chart-p99").dataset.points,
			p99Legend: q("#legend-p99"),
			spendTotal: q("#spend-total"),
			spendRow: q('#spend tr[data-model="claude-sonnet"]'),
		};
	})()`))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	checks := []struct{ name, got, want string }{
		{"fallback rate text", got["text"], "50.0%"},
		{"fallback rate value", got["value"], strconv.FormatFloat(0.5, 'g', -1, 64)},
		{"us-east breaker", got["breaker"], "closed"},
		{"us-east state", got["state"], "down"},
		{"idle p95", got["idleP95"], "no data"},
		{"idle error rate", got["idleErrors"], "no data"},
		{"latest fallback reason", got["reason"], "connect_error"},
		{"calls in window", got["requests"], "120"},
		// One 10-second step or two since the dashboard started: calls and
		// errors per step, and claude-sonnet's p99.
		{"calls chart has points", strconv.FormatBool(got["callsPoints"] != "" && got["callsPoints"] != "0"), "true"},
		{"p99 chart has points", strconv.FormatBool(got["p99Points"] != "" && got["p99Points"] != "0"), "true"},
		{"p99 legend", got["p99Legend"], "● claude-sonnet"},
		// 120 calls at $0.0005, one model, key and team.
		{"spend total", got["spendTotal"], "$0.060000"},
		{"spend row", got["spendRow"], "claude-sonnetk_teamsearch120$0.060000"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	clipped, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](clippedJS))
	if err != nil {
		t.Fatal(err)
	}
	if len(clipped) > 0 {
		t.Errorf("clipped at 1280 px: %q", clipped)
	}
	screenshot(t, bctx, "keel-dashboard-region-kill.png")
}
