package features_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelmesh/keel/sim"
)

// Must show (issue 6): in a real headless Chromium, the live dashboard is
// open while the simulator kills a region under load, and the fallback
// rate it shows rises, and (issue 13) the killed region's endpoint shows
// the engine's state, down, the 15-minute charts have points, and nothing
// is clipped at 1280 px; a screenshot
// is saved under $KEEL_ARTIFACTS (else the temp directory), its path in the
// log. Skips where chromium is not installed, except under CI=true (.ci/run
// installs it), where it fails.
func TestDashboardShowsRegionKill(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium not installed under CI=true (.ci/run installs it with apt-get)")
		}
		t.Skip("chromium not installed (apt-get install -y chromium)")
	}
	cfg := sim.DefaultConfig()
	for i := range cfg.Regions {
		cfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(5 * time.Millisecond)}
	}
	e := newEnv(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()

	// Steady load through the proxy, preferring us-east while it is healthy,
	// so the region that dies is carrying traffic.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			resp, err := http.Post(e.proxy.URL+"/v1/messages", "application/json", strings.NewReader(
				fmt.Sprintf(`{"model":"sim-sonnet","max_tokens":12,"mesh_behavior":{"preferred_region":"us-east"},"messages":[{"role":"user","content":"load %d"}]}`, i)))
			if err == nil {
				resp.Body.Close()
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	if err := chromedp.Do(bctx, chromedp.Navigate(e.proxy.URL+"/dashboard"), chromedp.WaitVisible(chromedp.CSS("#conn.live"))); err != nil {
		t.Fatalf("loading the dashboard: %v", err)
	}
	before, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("rate-fallback").dataset.value || "0"`))
	if err != nil {
		t.Fatal(err)
	}
	if before != "0" {
		t.Fatalf("fallback rate %q before the kill, want 0", before)
	}
	e.fleet.SetRegionDown("us-east", true)
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](`Number(document.getElementById("rate-fallback").dataset.value) > 0`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		resp, _ := http.Get(e.proxy.URL + "/metrics")
		var b strings.Builder
		if resp != nil {
			buf := make([]byte, 1<<20)
			n, _ := resp.Body.Read(buf)
			for _, l := range strings.Split(string(buf[:n]), "\n") {
				if strings.HasPrefix(l, "mesh_fallbacks_total") || strings.HasPrefix(l, "mesh_requests_total") {
					b.WriteString(l + "\n")
				}
			}
			resp.Body.Close()
		}
		t.Fatalf("the fallback rate shown never rose after the region kill: %v\n%s", err, b.String())
	}
	shown, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#rate-fallback")))
	t.Logf("fallback rate shown after the kill: %s", shown)

	// The engine marks us-east's sim-sonnet endpoint down on its first
	// refused connection; the page shows that state, not "healthy".
	const state = `(() => { const e = document.querySelector('tr[data-endpoint^="sim-sonnet/us-east/"] .state'); return e ? e.textContent : "(missing)"; })()`
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](state+` === "down"`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		got, _ := chromedp.Run(bctx, chromedp.Evaluate[string](state))
		t.Errorf("killed region's endpoint shows state %q, want down: %v", got, err)
	}
	// The 15-minute charts are drawn from the feed: calls and sim-sonnet's
	// p99 have points.
	for _, id := range []string{"chart-calls", "chart-p99"} {
		if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](`Number(document.getElementById("`+id+`").dataset.points) > 0`,
			chromedp.WithPollingTimeout(10*time.Second))); err != nil {
			t.Errorf("#%s has no points: %v", id, err)
		}
	}
	clipped, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(() => {
		const out = [];
		if (document.documentElement.scrollWidth > window.innerWidth) out.push("page " + document.documentElement.scrollWidth + " > " + window.innerWidth);
		for (const c of document.querySelectorAll("th, td")) if (c.scrollWidth > c.clientWidth + 1) out.push(c.textContent);
		return out;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if len(clipped) > 0 {
		t.Errorf("clipped at 1280 px: %q", clipped)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
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
	path := filepath.Join(dir, "keel-dashboard-e2e-region-kill.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
