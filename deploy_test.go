package keel_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/semcache"
	"github.com/keelmesh/keel/internal/shadow"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/telemetry/metrics"
	"github.com/keelmesh/keel/sim"
)

// The compose topology of deploy/ (issue 16 "Must show": the compose file
// validated as far as a machine without a Docker engine allows). Docker
// never runs here: these tests read deploy/compose.yaml and every file it
// names, load the replicas' config with Keel's own loader and serve a scrape
// through Keel's handler as Prometheus would send it, run promtool on the
// Prometheus config, the rules and the dashboard's queries, and check that
// every series the Grafana dashboard reads is one /metrics exposes.

const (
	deployDir   = "deploy"
	composePath = "deploy/compose.yaml"
	// deployToken stands for $KEEL_READ_TOKEN, which compose passes to the
	// replicas (their read_token) and to Prometheus (a secret file).
	deployToken = "deploy-test-read-token"
)

// composeFile holds the keys deploy/compose.yaml uses. It is decoded
// strictly, so a misspelt key fails here rather than in docker compose.
type composeFile struct {
	Name     string                    `yaml:"name"`
	XKeel    any                       `yaml:"x-keel"`
	Services map[string]composeService `yaml:"services"`
	Secrets  map[string]struct {
		Environment string `yaml:"environment"`
		File        string `yaml:"file"`
	} `yaml:"secrets"`
	Volumes map[string]any `yaml:"volumes"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	Secrets     []string          `yaml:"secrets"`
	DependsOn   any               `yaml:"depends_on"`
	Restart     string            `yaml:"restart"`
	StopGrace   string            `yaml:"stop_grace_period"`
}

// mount is one volume entry: a bind mount (Source a path relative to
// deploy/) or a named volume.
type mount struct {
	Source, Target string
	Bind           bool
}

func (s composeService) mounts(t *testing.T) []mount {
	t.Helper()
	var ms []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw") {
			t.Fatalf("volume %q: want SOURCE:TARGET[:ro]", v)
		}
		ms = append(ms, mount{Source: parts[0], Target: parts[1], Bind: strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/")})
	}
	return ms
}

// hostPath returns the file of the repository that target (a path inside
// the service's container) is, through the service's bind mounts.
func (s composeService) hostPath(t *testing.T, target string) (string, bool) {
	t.Helper()
	for _, m := range s.mounts(t) {
		if !m.Bind {
			continue
		}
		if target == m.Target {
			return filepath.Join(deployDir, m.Source), true
		}
		if rest, ok := strings.CutPrefix(target, m.Target+"/"); ok {
			return filepath.Join(deployDir, m.Source, rest), true
		}
	}
	return "", false
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(composePath)
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.Strict()); err != nil {
		t.Fatalf("%s: %v", composePath, err)
	}
	return c
}

// loadDeployConfig loads the replicas' Keel config as keel serve does.
func loadDeployConfig(t *testing.T) *config.Config {
	t.Helper()
	t.Setenv("KEEL_READ_TOKEN", deployToken)
	cfg, err := config.Load(filepath.Join(deployDir, "keel.yaml"))
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	return cfg
}

var keelReplicas = []string{"keel-1", "keel-2"}

func TestComposeServices(t *testing.T) {
	c := loadCompose(t)
	var names []string
	for n := range c.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"grafana", "keel-1", "keel-2", "prometheus", "redis", "sim"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	if img := c.Services["redis"].Image; !strings.HasPrefix(img, "redis:7") {
		t.Errorf("redis image %q, want redis:7-alpine", img)
	}

	hostPorts := map[string]string{}
	for name, s := range c.Services {
		if s.Image == "" {
			t.Errorf("%s: no image", name)
		}
		for _, p := range s.Ports {
			// Published on loopback only: the replicas' API has no client
			// authentication of its own.
			f := strings.Split(p, ":")
			if len(f) != 3 || f[0] != "127.0.0.1" {
				t.Errorf("%s: port %q, want 127.0.0.1:HOST:CONTAINER", name, p)
				continue
			}
			if other, dup := hostPorts[f[1]]; dup {
				t.Errorf("%s and %s both publish host port %s", name, other, f[1])
			}
			hostPorts[f[1]] = name
		}
		for _, m := range s.mounts(t) {
			if m.Bind {
				if _, err := os.Stat(filepath.Join(deployDir, m.Source)); err != nil {
					t.Errorf("%s: volume source %s: %v", name, m.Source, err)
				}
			} else if _, ok := c.Volumes[m.Source]; !ok {
				t.Errorf("%s: named volume %q is not declared under volumes:", name, m.Source)
			}
		}
		for _, sec := range s.Secrets {
			if _, ok := c.Secrets[sec]; !ok {
				t.Errorf("%s: secret %q is not declared under secrets:", name, sec)
			}
		}
		for _, dep := range dependsOn(t, s.DependsOn) {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("%s depends on %q, which is no service", name, dep)
			}
		}
	}

	// The image is built once from the repository root, and every Keel
	// process (the replicas and the simulator) runs it.
	for _, name := range append([]string{"sim"}, keelReplicas...) {
		s := c.Services[name]
		if s.Build == nil {
			t.Errorf("%s: no build section", name)
			continue
		}
		ctx := filepath.Join(deployDir, s.Build.Context)
		if _, err := os.Stat(filepath.Join(ctx, "go.mod")); err != nil {
			t.Errorf("%s: build context %s is not the module root: %v", name, ctx, err)
		}
		if _, err := os.Stat(filepath.Join(ctx, s.Build.Dockerfile)); err != nil {
			t.Errorf("%s: dockerfile: %v", name, err)
		}
		if s.Image != c.Services["keel-1"].Image {
			t.Errorf("%s: image %q, want keel-1's %q", name, s.Image, c.Services["keel-1"].Image)
		}
	}
	if got := c.Services["sim"].Command; !slices.Equal(got, []string{"sim", "--listen", "0.0.0.0:7879"}) {
		t.Errorf("sim command %q", got)
	}

	cfg := loadDeployConfig(t)
	for _, name := range keelReplicas {
		s := c.Services[name]
		if !slices.Equal(s.Command, []string{"serve", "--config", "/etc/keel/keel.yaml"}) {
			t.Errorf("%s: command %q", name, s.Command)
		}
		if p, ok := s.hostPath(t, "/etc/keel/keel.yaml"); !ok || p != filepath.Join(deployDir, "keel.yaml") {
			t.Errorf("%s: /etc/keel/keel.yaml is %q, want deploy/keel.yaml", name, p)
		}
		if v := s.Environment["KEEL_READ_TOKEN"]; !strings.HasPrefix(v, "${KEEL_READ_TOKEN") {
			t.Errorf("%s: KEEL_READ_TOKEN=%q, want it from the environment", name, v)
		}
		// Compose must wait for a graceful shutdown before it kills.
		grace, err := time.ParseDuration(s.StopGrace)
		if need := cfg.Server.DrainDelayOrDefault() + time.Duration(cfg.Server.ShutdownTimeout) + time.Second; err != nil || grace < need {
			t.Errorf("%s: stop_grace_period %q, want at least drain_delay + shutdown_timeout + 1s = %s", name, s.StopGrace, need)
		}
		// The request log's directory is the replica's own volume.
		if !slices.ContainsFunc(s.mounts(t), func(m mount) bool { return !m.Bind && m.Target == "/var/lib/keel" }) {
			t.Errorf("%s: no named volume at /var/lib/keel", name)
		}
	}
	if sec := c.Secrets["keel_read_token"]; sec.Environment != "KEEL_READ_TOKEN" {
		t.Errorf("secret keel_read_token from %+v, want the environment variable KEEL_READ_TOKEN", sec)
	}
}

func dependsOn(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	switch d := v.(type) {
	case nil:
	case []any:
		for _, s := range d {
			out = append(out, fmt.Sprint(s))
		}
	case map[string]any:
		for s := range d {
			out = append(out, s)
		}
	default:
		t.Fatalf("depends_on: %T", v)
	}
	return out
}

// The replicas' config is the simulated fleet keel serve builds without a
// config, reached at the sim service, listening where compose publishes,
// with the Host names Prometheus and the host use accepted.
func TestDeployKeelConfig(t *testing.T) {
	cfg := loadDeployConfig(t)
	// docs/config.md: read_token takes ${VAR}, as admin_token does.
	if got := cfg.Server.ReadToken.Value(); got != deployToken {
		t.Errorf("server.read_token is %d bytes, not $KEEL_READ_TOKEN's %d: config.Load did not expand ${KEEL_READ_TOKEN} (config/env.go expandEnv)", len(got), len(deployToken))
	}
	host, port, err := net.SplitHostPort(cfg.Server.Listen)
	if err != nil || port != "7878" || host != "0.0.0.0" {
		t.Errorf("server.listen %q, want 0.0.0.0:7878 (the port the Dockerfile exposes and compose publishes)", cfg.Server.Listen)
	}
	for _, h := range append([]string{"localhost", "127.0.0.1"}, keelReplicas...) {
		if !slices.Contains(cfg.Server.AllowedHosts, h) {
			t.Errorf("server.allowed_hosts %v lacks %s", cfg.Server.AllowedHosts, h)
		}
	}
	if u := cfg.Redis.URL.Value(); u != "redis://redis:6379" {
		t.Errorf("redis.url %q, want the compose redis service, redis://redis:6379", u)
	}
	if p := cfg.RequestLog.Path; filepath.Dir(p) != "/var/lib/keel" {
		t.Errorf("request_log.path %q, want it in the replica's volume /var/lib/keel", p)
	}

	fleet, err := sim.New(sim.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := simfleet.Config(fleet, "http://sim:7879")
	type ep struct{ Provider, Region, BaseURL string }
	type md struct {
		Name       string
		Capability int
		Window     int
		Price      config.Price
		Endpoints  []ep
	}
	models := func(c *config.Config) []md {
		var out []md
		for _, m := range c.Models {
			x := md{Name: m.Name, Capability: m.Capability, Window: m.ContextWindow, Price: m.Price}
			for _, e := range m.Endpoints {
				prov := c.Provider(e.Provider)
				x.Endpoints = append(x.Endpoints, ep{Provider: prov.Type, Region: e.Region, BaseURL: e.BaseURL})
			}
			out = append(out, x)
		}
		return out
	}
	if got, w := fmt.Sprintf("%+v", models(cfg)), fmt.Sprintf("%+v", models(want)); got != w {
		t.Errorf("models differ from the simulated fleet's (-got +want):\n-%s\n+%s", got, w)
	}
	if got, w := fmt.Sprintf("%+v", cfg.Aliases), fmt.Sprintf("%+v", want.Aliases); got != w {
		t.Errorf("aliases (-got +want):\n-%s\n+%s", got, w)
	}
}

// A scrape as Prometheus sends it (Host keel-N:7878, the bearer token)
// reaches /metrics on a replica built from deploy/keel.yaml, redis section
// included; without the token it is refused.
func TestDeployScrapeReachesMetrics(t *testing.T) {
	cfg := loadDeployConfig(t)
	off := false
	cfg.RequestLog.Enabled = &off // /var/lib/keel is the container's
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
	if err != nil {
		t.Fatalf("keel.New: %v", err)
	}
	defer m.Close()
	scrape := func(host, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "http://"+host+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rr := httptest.NewRecorder()
		m.Handler().ServeHTTP(rr, req)
		return rr
	}
	for _, target := range promTargets(t) {
		rr := scrape(target, deployToken)
		if rr.Code != http.StatusOK {
			t.Fatalf("GET %s/metrics with the token: %d %s", target, rr.Code, rr.Body)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(rr.Body)
		if err != nil {
			t.Fatalf("exposition: %v", err)
		}
		if n := len(fams["mesh_endpoint_breaker_state"].GetMetric()); n != len(m.Endpoints()) || n == 0 {
			t.Errorf("%s: %d mesh_endpoint_breaker_state series, want one per endpoint (%d)", target, n, len(m.Endpoints()))
		}
		// With redis configured the replica says whether it reaches it (the
		// dashboard's first panel); here it cannot resolve "redis".
		if n := len(fams["mesh_shared_state_up"].GetMetric()); n != 1 {
			t.Errorf("%s: %d mesh_shared_state_up series, want 1", target, n)
		}
	}
	if rr := scrape("keel-1:7878", ""); rr.Code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the token: %d, want 401", rr.Code)
	}
	if rr := scrape("elsewhere.example:7878", deployToken); rr.Code != http.StatusForbidden {
		t.Errorf("GET /metrics with a Host outside allowed_hosts: %d, want 403", rr.Code)
	}
}

// prometheusConfig holds the keys deploy/prometheus/prometheus.yml uses.
type prometheusConfig struct {
	Global        map[string]string `yaml:"global"`
	RuleFiles     []string          `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		Authorization struct {
			Type            string `yaml:"type"`
			CredentialsFile string `yaml:"credentials_file"`
		} `yaml:"authorization"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

func loadPrometheusConfig(t *testing.T) prometheusConfig {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var p prometheusConfig
	if err := yaml.UnmarshalWithOptions(data, &p, yaml.Strict()); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	return p
}

// promTargets are the scrape targets of prometheus.yml's keel job.
func promTargets(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, sc := range loadPrometheusConfig(t).ScrapeConfigs {
		if sc.JobName != "keel" {
			continue
		}
		for _, st := range sc.StaticConfigs {
			out = append(out, st.Targets...)
		}
	}
	return out
}

// Prometheus scrapes both replicas with the read token compose gives it,
// and its rule file is deploy/prometheus/rules.yml through the mount.
func TestDeployPrometheus(t *testing.T) {
	c := loadCompose(t)
	p := loadPrometheusConfig(t)
	prom := c.Services["prometheus"]
	if len(p.ScrapeConfigs) != 1 || p.ScrapeConfigs[0].JobName != "keel" {
		t.Fatalf("scrape configs %+v, want the one job keel", p.ScrapeConfigs)
	}
	sc := p.ScrapeConfigs[0]
	if sc.MetricsPath != "/metrics" || sc.Authorization.Type != "Bearer" {
		t.Errorf("keel job: path %q, authorization %q; want /metrics with a Bearer token", sc.MetricsPath, sc.Authorization.Type)
	}
	if sec, ok := strings.CutPrefix(sc.Authorization.CredentialsFile, "/run/secrets/"); !ok || !slices.Contains(prom.Secrets, sec) {
		t.Errorf("credentials_file %q is not a secret of the prometheus service %v", sc.Authorization.CredentialsFile, prom.Secrets)
	}
	var want []string
	for _, r := range keelReplicas {
		want = append(want, r+":7878")
	}
	if got := promTargets(t); !slices.Equal(got, want) {
		t.Errorf("targets %v, want %v", got, want)
	}
	if len(p.RuleFiles) != 1 {
		t.Fatalf("rule_files %v, want rules.yml", p.RuleFiles)
	}
	if f, ok := prom.hostPath(t, p.RuleFiles[0]); !ok || f != filepath.Join(deployDir, "prometheus", "rules.yml") {
		t.Errorf("rule file %s is %q in the container, want deploy/prometheus/rules.yml", p.RuleFiles[0], f)
	}
	if f, ok := prom.hostPath(t, "/etc/prometheus/prometheus.yml"); !ok || f != filepath.Join(deployDir, "prometheus", "prometheus.yml") {
		t.Errorf("/etc/prometheus/prometheus.yml is %q, want deploy/prometheus/prometheus.yml", f)
	}
}

// promtool returns promtool's path. It skips the test where promtool is
// missing, except under CI=true (.ci/run installs it), where it fails.
func promtool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not installed under CI=true (.ci/run installs it with apt-get install prometheus)")
		}
		t.Skip("promtool not on PATH (apt-get install prometheus)")
	}
	return bin
}

func runPromtool(t *testing.T, bin, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// promtool checks prometheus.yml as the container sees it (the rule file
// and the token file at their mounted paths, here rewritten to the
// repository's files and a temporary token file) and rules.yml.
func TestDeployPromtool(t *testing.T) {
	bin := promtool(t)
	p := loadPrometheusConfig(t)
	prom := loadCompose(t).Services["prometheus"]
	data, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := string(data)
	for _, f := range p.RuleFiles {
		host, ok := prom.hostPath(t, f)
		if !ok {
			t.Fatalf("rule file %s is not mounted into the prometheus service", f)
		}
		abs, err := filepath.Abs(host)
		if err != nil {
			t.Fatal(err)
		}
		text = strings.ReplaceAll(text, f, abs)
	}
	token := filepath.Join(dir, "keel_read_token")
	if err := os.WriteFile(token, []byte(deployToken), 0o600); err != nil {
		t.Fatal(err)
	}
	text = strings.ReplaceAll(text, p.ScrapeConfigs[0].Authorization.CredentialsFile, token)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, bin, dir, "check", "config", "prometheus.yml")
	runPromtool(t, bin, filepath.Join(deployDir, "prometheus"), "check", "rules", "rules.yml")
}

// grafanaDashboard holds what the tests read of a dashboard JSON.
type grafanaDashboard struct {
	UID    string         `json:"uid"`
	Title  string         `json:"title"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID         int                `json:"id"`
	Type       string             `json:"type"`
	Title      string             `json:"title"`
	Datasource *grafanaDatasource `json:"datasource"`
	Targets    []struct {
		Expr       string             `json:"expr"`
		Datasource *grafanaDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func loadDashboard(t *testing.T) (grafanaDashboard, []grafanaPanel) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir, "grafana", "dashboards", "keel-mesh.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("keel-mesh.json: %v", err)
	}
	var all []grafanaPanel
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return d, all
}

// Grafana is provisioned with the compose Prometheus as a datasource and
// the dashboard directory the compose file mounts, and the dashboard's
// panels all query that datasource.
func TestDeployGrafanaProvisioning(t *testing.T) {
	c := loadCompose(t)
	g := c.Services["grafana"]
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, Access, URL string
			IsDefault                    bool           `yaml:"isDefault"`
			Editable                     bool           `yaml:"editable"`
			JSONData                     map[string]any `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(deployDir, "grafana", "provisioning", "datasources"), "/etc/grafana/provisioning/datasources", g, &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Fatalf("datasources %+v, want the one Prometheus at http://prometheus:9090", ds.Datasources)
	}
	if !slices.Contains(c.Services["prometheus"].Ports, "127.0.0.1:9090:9090") {
		t.Errorf("prometheus does not listen on 9090 as the datasource expects")
	}
	uid := ds.Datasources[0].UID

	var prov struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name, Folder, Type string
			DisableDeletion    bool `yaml:"disableDeletion"`
			AllowUIUpdates     bool `yaml:"allowUiUpdates"`
			Options            struct {
				Path                      string `yaml:"path"`
				FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(deployDir, "grafana", "provisioning", "dashboards"), "/etc/grafana/provisioning/dashboards", g, &prov)
	if len(prov.Providers) != 1 || prov.Providers[0].Type != "file" {
		t.Fatalf("dashboard providers %+v, want one file provider", prov.Providers)
	}
	dir, ok := g.hostPath(t, prov.Providers[0].Options.Path)
	if !ok || dir != filepath.Join(deployDir, "grafana", "dashboards") {
		t.Errorf("dashboard path %s is %q, want deploy/grafana/dashboards", prov.Providers[0].Options.Path, dir)
	}
	if home, ok := g.hostPath(t, g.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]); ok {
		if _, err := os.Stat(home); err != nil {
			t.Errorf("home dashboard: %v", err)
		}
	} else {
		t.Errorf("the home dashboard path is not mounted")
	}

	d, panels := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
	}
	ids := map[int]bool{}
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != uid {
			t.Errorf("panel %q: datasource %+v, want uid %s", p.Title, p.Datasource, uid)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != uid {
				t.Errorf("panel %q: a target's datasource %+v, want uid %s", p.Title, tg.Datasource, uid)
			}
		}
	}
}

// readYAML decodes strictly the one YAML file in dir, which must be what
// the service sees at target.
func readYAML(t *testing.T, dir, target string, s composeService, v any) {
	t.Helper()
	if got, ok := s.hostPath(t, target); !ok || got != dir {
		t.Fatalf("%s is %q in the container, want %s", target, got, dir)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("%s: %v files (%v), want one", dir, files, err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalWithOptions(data, v, yaml.Strict()); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
}

// exposedSeries returns every series name Keel's /metrics can expose: the
// metrics package's registry (configured as keel.New configures it, for
// the replicas' models and regions) after a call that touched every
// family, scraped through its handler, with the _bucket/_sum/_count
// series of each histogram.
func exposedSeries(t *testing.T) map[string]bool {
	t.Helper()
	cfg := loadDeployConfig(t)
	var models, regions []string
	for _, md := range cfg.Models {
		models = append(models, md.Name)
		for _, e := range md.Endpoints {
			if !slices.Contains(regions, e.Region) {
				regions = append(regions, e.Region)
			}
		}
	}
	mt, err := metrics.New(metrics.Options{Models: models, Regions: regions, ProviderNames: map[string]string{"sim-anthropic": "anthropic"},
		Endpoints: func() []fleet.Status {
			return []fleet.Status{{ID: "sim-sonnet/us-east/sim-anthropic", Model: "sim-sonnet", Region: "us-east", Provider: "sim-anthropic", Breaker: "closed"}}
		},
		Structured: &structured.Metrics{}, SharedStateUp: func() bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	mt.RequestDone(&callrec.Record{
		Call: callrec.Call{Model: "sim-default", Stream: true, Duration: time.Second, TTFT: 100 * time.Millisecond},
		Route: callrec.Route{ServedModel: "sim-opus", ServedRegion: "us-east", ServedProvider: "sim-anthropic", Domain: "code",
			QueueWait: time.Millisecond, Fallback: "overloaded", ModelFallback: true, Legacy: true, Retries: 1, Hedges: 1, HedgeWon: true,
			Recovered: 1,
			Attempts:  []callrec.Attempt{{Kind: "primary", Outcome: "overloaded", Start: now, End: now}, {Kind: "fallback", Outcome: "ok", Start: now, End: now}}},
		Result:        callrec.Result{Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}},
		Normalization: &callrec.Normalization{Offset: 0.1},
		Fragments:     &callrec.Fragments{Count: 2, OK: 2, Fusions: 1, FusionConflicts: 1},
	})
	mt.RequestDone(&callrec.Record{Call: callrec.Call{Model: "sim-sonnet"}, Result: callrec.Result{Err: &llm.APIError{Status: 503}}})
	// Issue 17 and 18's series: spend by key and team, the caches, personal
	// data found and a failed detection, a shadow comparison.
	mt.RequestDone(&callrec.Record{
		Call:     callrec.Call{Model: "sim-haiku", KeyID: "key_0123456789abcdef", Team: "search"},
		Route:    callrec.Route{ServedModel: "sim-haiku", ServedRegion: "us-east", ServedProvider: "sim-anthropic"},
		Result:   callrec.Result{Cost: 0.001},
		Cache:    &callrec.Cache{Status: cache.Miss},
		Semantic: &callrec.Semantic{Status: semcache.StatusMiss},
		PII:      &pii.Report{Action: "redact", Findings: []pii.Finding{{Kind: "EMAIL"}}},
	})
	mt.RequestDone(&callrec.Record{Call: callrec.Call{Model: "sim-haiku"}, Result: callrec.Result{Err: &llm.APIError{Status: 503}}, PII: &pii.Report{Action: "redact", Failed: true}})
	mt.OnShadow(shadow.Result{Alias: "sim-default", Outcome: shadow.OutcomeCompared, ShadowCost: 0.002})
	mt.OnBreakerState(observe.BreakerEvent{Endpoint: "sim-sonnet/us-east/sim-anthropic"})
	mt.OnValve(observe.ValveEvent{Event: observe.ValveEventOpen})

	rr := httptest.NewRecorder()
	mt.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rr.Body)
	if err != nil {
		t.Fatalf("exposition: %v", err)
	}
	exposed := map[string]bool{}
	for name, f := range fams {
		exposed[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exposed[name+s] = true
			}
		}
	}
	return exposed
}

// Every series a dashboard query reads is one Keel's /metrics exposes, so
// a renamed metric cannot leave a panel silently empty; and each query is
// valid PromQL (promtool parses them as recording rules).
func TestDashboardQueriesReadExposedSeries(t *testing.T) {
	exposed := exposedSeries(t)
	// Families the exercise above must have reached, or it proves little.
	for _, name := range []string{"mesh_requests_total", "mesh_fallbacks_total", "mesh_queue_wait_seconds_bucket", "mesh_fragments_sent_total",
		"mesh_breaker_transitions_total", "mesh_safety_valve_transitions_total", "mesh_endpoint_breaker_state", "mesh_structured_total",
		"gen_ai_client_operation_time_to_first_chunk_seconds_bucket", "process_resident_memory_bytes", "mesh_shared_state_up",
		"mesh_spend_usd_total", "mesh_cache_requests_total", "mesh_semantic_cache_requests_total", "mesh_pii_detections_total",
		"mesh_pii_detection_failures_total", "mesh_shadow_calls_total", "mesh_shadow_spend_usd_total"} {
		if !exposed[name] {
			t.Fatalf("the metrics exercise did not expose %s", name)
		}
	}
	_, panels := loadDashboard(t)
	var exprs []string
	read := map[string]bool{}
	for _, p := range panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
			names, err := promqlSeries(tg.Expr)
			if err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
				continue
			}
			if len(names) == 0 {
				t.Errorf("panel %q: query %q reads no series", p.Title, tg.Expr)
			}
			for _, n := range names {
				read[n] = true
				if !exposed[n] {
					t.Errorf("panel %q reads %s, which /metrics does not expose", p.Title, n)
				}
			}
		}
	}
	if len(read) < 20 {
		t.Errorf("the dashboard reads only %d series: %v", len(read), read)
	}

	bin := promtool(t)
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		e = strings.ReplaceAll(e, "$__rate_interval", "1m")
		q, _ := json.Marshal(e)
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yml"), []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, bin, dir, "check", "rules", "dashboard.yml")
}

// promqlSeries returns the metric names a PromQL expression selects. It is
// a tokenizer, not a parser (promtool checks the syntax): identifiers are
// series names unless they are functions or aggregations (followed by "("),
// keywords, label names (inside {...} or the label list after by, without,
// on, ignoring, group_left, group_right) or inside a range or offset.
func promqlSeries(expr string) ([]string, error) {
	keywords := map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
	var names []string
	s := expr
	for len(s) > 0 {
		c := s[0]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end := strings.IndexByte(s[1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unterminated string in %q", expr)
			}
			s = s[end+2:]
		case c == '{' || c == '[':
			closer := map[byte]byte{'{': '}', '[': ']'}[c]
			end := strings.IndexByte(s, closer) // no nesting inside matchers or ranges
			if end < 0 {
				return nil, fmt.Errorf("unclosed %c in %q", c, expr)
			}
			s = s[end+1:]
		case c >= '0' && c <= '9': // a number or a duration (5m, 1h30m)
			n := 1
			for n < len(s) && (s[n] == '.' || isWordByte(s[n])) {
				n++
			}
			s = s[n:]
		case c == ':' || isWordByte(c):
			n := 1
			for n < len(s) && (s[n] == ':' || isWordByte(s[n])) {
				n++
			}
			id, rest := s[:n], strings.TrimLeft(s[n:], " \t\n")
			s = rest
			next := strings.ToLower(rest[:len(rest)-len(strings.TrimLeft(rest, "abcdefghijklmnopqrstuvwxyz_"))])
			switch {
			case keywords[strings.ToLower(id)]:
				if l := strings.ToLower(id); l != "and" && l != "or" && l != "unless" && l != "bool" && strings.HasPrefix(s, "(") {
					end := strings.IndexByte(s, ')')
					if end < 0 {
						return nil, fmt.Errorf("unclosed label list in %q", expr)
					}
					s = s[end+1:]
				}
			case strings.HasPrefix(s, "("), next == "by", next == "without": // a function or an aggregation
			default:
				names = append(names, id)
			}
		default:
			s = s[1:]
		}
	}
	if len(names) == 0 && strings.Contains(expr, "__name__") {
		return nil, errors.New("a __name__ matcher: name series directly")
	}
	return names, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func TestPromqlSeries(t *testing.T) {
	cases := []struct {
		name, expr string
		want       []string
	}{
		{name: "rate over a matcher", expr: `sum by (outcome) (rate(mesh_requests_total{job="keel"}[5m]))`, want: []string{"mesh_requests_total"}},
		{name: "ratio", expr: "sum(rate(a_total[1m])) / sum(rate(b_total[1m]))", want: []string{"a_total", "b_total"}},
		{name: "quantile", expr: "histogram_quantile(0.95, sum by (instance, le) (rate(x_bucket[$__rate_interval])))", want: []string{"x_bucket"}},
		{name: "bare gauge", expr: "mesh_endpoint_breaker_state", want: []string{"mesh_endpoint_breaker_state"}},
		{name: "vector matching", expr: `a / on (instance) group_left (model) b offset 5m`, want: []string{"a", "b"}},
		{name: "label value like a name", expr: `x{endpoint="by"} and y`, want: []string{"x", "y"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := promqlSeries(c.expr)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("promqlSeries(%q) = %v, %v (-got +want):\n-%v\n+%v", c.expr, got, err, got, c.want)
			}
		})
	}
}

// dockerignore lists the patterns of .dockerignore.
func dockerignore(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, "!") {
			t.Fatalf(".dockerignore: exceptions (%s) are beyond this test's matcher", l)
		}
		out = append(out, l)
	}
	return out
}

// ignored reports whether a .dockerignore pattern excludes path (slash
// separated, relative to the context): a pattern excludes what it matches
// and everything under it; a leading **/ matches any directories.
func ignored(patterns []string, path string) bool {
	parts := strings.Split(path, "/")
	for _, p := range patterns {
		rest, any := strings.CutPrefix(p, "**/")
		for i := 1; i <= len(parts); i++ {
			prefix := parts[:i]
			if !any {
				if ok, _ := filepath.Match(p, strings.Join(prefix, "/")); ok {
					return true
				}
				continue
			}
			for j := range prefix {
				if ok, _ := filepath.Match(rest, strings.Join(prefix[j:], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}

// The Dockerfile builds the release binary (static, trimmed, stripped) of
// ./cmd/keel with the go.mod's Go and runs it as a non-root user with the
// compose replicas' config path, and .dockerignore keeps every file the
// build reads (Go sources, go.mod, go.sum, embedded files).
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	for _, want := range []string{
		"FROM golang:" + string(goLine[1]) + " AS build",
		"CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /out/keel ./cmd/keel",
		"FROM gcr.io/distroless/static",
		"USER 65532:65532",
		"EXPOSE 7878",
		`ENTRYPOINT ["/usr/local/bin/keel"]`,
		`CMD ["serve", "--config", "/etc/keel/keel.yaml"]`,
		"--chown=65532:65532 /out/state /var/lib/keel",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(df, -1)); n != 2 {
		t.Errorf("%d stages, want 2 (build, run)", n)
	}
	if run := df[strings.LastIndex(df, "\nFROM "):]; regexp.MustCompile(`(?m)^RUN `).MatchString(run) {
		t.Error("the run stage has a RUN step, but its image has no shell")
	}

	patterns := dockerignore(t)
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{if .Module}}{{if .Module.Main}}{{.Dir}}\t{{join .GoFiles \" \"}} {{join .EmbedFiles \" \"}}{{end}}{{end}}{{end}}", "./cmd/keel").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, files, _ := strings.Cut(line, "\t")
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(files) {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(needed) < 100 {
		t.Fatalf("only %d files needed by the build: go list output %q", len(needed), out)
	}
	for _, f := range needed {
		if ignored(patterns, f) {
			t.Errorf(".dockerignore excludes %s, which the build reads", f)
		}
	}
	for _, f := range []string{".git", "deploy/keel.yaml", "internal/sse/testdata/x", "BENCHMARKS.md", "keel-requests.db"} {
		if !ignored(patterns, f) {
			t.Errorf(".dockerignore keeps %s in the build context", f)
		}
	}
}

// The release binary lets the linker drop unused methods. Once a call to
// reflect.Value.Method or MethodByName is reachable (text/template's
// execution is one: golang.org/x/net/trace's pages, which gRPC links in,
// or an html/template report page), the linker must keep every exported
// method of every type that can reach an interface, and the stripped
// binary grew from 21.4 to 32.5 MB, go-redis's command methods alone
// taking 4.2 MB instead of 0.6 (BENCHMARKS.md, session 5). The linker's
// dependency dump names the symbols that do it and the path from main.
func TestReleaseBinaryKeepsDeadMethodElimination(t *testing.T) {
	if testing.Short() {
		t.Skip("links cmd/keel (about 10 s)")
	}
	out, err := exec.Command("go", "build", "-o", os.DevNull, "-ldflags=-dumpdep", "./cmd/keel").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	parent := map[string]string{}
	var culprit string
	edges := 0
	for _, line := range strings.Split(string(out), "\n") {
		from, to, ok := strings.Cut(line, " -> ")
		if !ok {
			continue
		}
		edges++
		from, _, _ = strings.Cut(from, " <")
		to, flags, _ := strings.Cut(to, " <")
		if _, seen := parent[to]; !seen {
			parent[to] = from
		}
		if culprit == "" && strings.Contains(flags, "ReflectMethod") {
			culprit = to
		}
	}
	if edges < 10000 {
		t.Fatalf("the linker's -dumpdep printed %d edges: has its format changed?\n%.2000s", edges, out)
	}
	if culprit != "" {
		chain := []string{culprit}
		for s := parent[culprit]; s != "" && s != "_" && len(chain) < 40; s = parent[s] {
			chain = append(chain, s)
		}
		t.Errorf("%s calls a reflect method lookup, so every exported method stays in the binary; reached by:\n  %s",
			culprit, strings.Join(chain, "\n  <- "))
	}
}
