// Package chartest validates the Helm chart in deploy/helm/keel without a
// cluster (issue 29): it renders the chart with Helm's own Go packages for
// the default values and for each example in deploy/helm/keel/examples,
// decodes every manifest strictly into the k8s.io/api (and Prometheus
// Operator) types, loads the Keel config the chart renders with
// config.Load, checks the probes, ports and drain timings against the
// binary's defaults, runs Helm's lint rules, and checks that a wrong value
// is refused. It is a module of its own so that Helm and the Kubernetes
// types never enter Keel's own dependency list; .ci/run tests it.
package chartest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
)

// example is a documented values file and what the Secrets it names (which
// the user creates, as its header says) hold as environment variables.
type example struct {
	file      string
	secretEnv []string
}

var examples = []example{
	{"two-replicas-redis.yaml", []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}},
	{"keys-required.yaml", []string{"ANTHROPIC_API_KEY"}},
	{"prometheus-operator.yaml", nil},
}

// TestExamplesAreTested: every file in examples/ is in the table above.
func TestExamplesAreTested(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
	}
	for _, e := range examples {
		want = append(want, e.file)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("examples: files %v, tested %v", got, want)
	}
}

// TestRenderValidates renders the defaults and every example; each render
// decodes strictly (decode) and its config loads with config.Load, and
// the checks every render must pass hold.
func TestRenderValidates(t *testing.T) {
	cases := append([]example{{file: "", secretEnv: nil}}, examples...)
	for _, ex := range cases {
		name := ex.file
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) {
			vals := map[string]any{}
			if ex.file != "" {
				vals = readValues(t, ex.file)
			}
			r := render(t, vals)
			cfg := r.loadConfig(t, ex.secretEnv)
			checkPod(t, r, cfg)
		})
	}
}

// checkPod holds for every render: the hardening, the probes and ports
// against the config Keel loads, GOMEMLIMIT, the drain timings, the spread.
func checkPod(t *testing.T, r *rendered, cfg *config.Config) {
	t.Helper()
	pod := r.deployment.Spec.Template.Spec
	c := r.container(t)

	// Hardening.
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("pod securityContext: want runAsNonRoot and a non-zero runAsUser, got %+v", sc)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container: want readOnlyRootFilesystem: true")
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container: want allowPrivilegeEscalation: false")
	}
	if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container: want capabilities drop [ALL]")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("pod: want automountServiceAccountToken: false (Keel calls no Kubernetes API)")
	}
	// What Keel writes (the request log, keys without Redis) is on a
	// writable volume, since the root filesystem is read-only.
	if dir := filepath.Dir(cfg.RequestLog.Path); !mounted(c, dir) {
		t.Errorf("request_log.path %s is not on a mounted volume", cfg.RequestLog.Path)
	}
	if !mounted(c, "/tmp") {
		t.Errorf("/tmp is not a volume")
	}

	// Resources and GOMEMLIMIT from the memory limit.
	mem, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok || c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Fatalf("resources: want cpu and memory requests and a memory limit, got %+v", c.Resources)
	}
	if got, want := envValue(c, "GOMEMLIMIT"), strconv.FormatInt(mem.Value()*90/100, 10); got != want {
		t.Errorf("GOMEMLIMIT = %q, want 90%% of %s = %s", got, mem.String(), want)
	}

	// Ports: Keel listens on the container port, which the Service and the
	// probes use by name.
	_, port, err := net.SplitHostPort(cfg.Server.Listen)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port {
		t.Errorf("container ports %+v: want one named http on server.listen's port %s", c.Ports, port)
	}
	if host, _, _ := net.SplitHostPort(cfg.Server.Listen); host != "0.0.0.0" {
		t.Errorf("server.listen %s: want every interface (0.0.0.0) in a pod", cfg.Server.Listen)
	}
	if sp := r.service.Spec.Ports; len(sp) != 1 || sp[0].TargetPort.StrVal != "http" {
		t.Errorf("service ports %+v: want one with targetPort http", sp)
	}
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.StrVal != "http" {
			t.Errorf("probe for %s: got %+v", name, p)
		}
	}

	// Drain: the preStop sleep stands for drain_delay (the config's is 0),
	// then shutdown_timeout, then keel serve's own second; the grace period
	// must exceed all of it or Kubernetes kills calls Keel would finish.
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if c.Lifecycle.PreStop.Sleep == nil {
			t.Fatalf("preStop: want the sleep action (the image has no shell), got %+v", c.Lifecycle.PreStop)
		}
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	drain := preStop + cfg.Server.DrainDelayOrDefault() + cfg.Server.ShutdownTimeout.Std() + time.Second
	var grace time.Duration
	if g := pod.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if grace <= drain {
		t.Errorf("terminationGracePeriodSeconds %s: must exceed preStop %s + drain_delay %s + shutdown_timeout %s + 1s", grace, preStop, cfg.Server.DrainDelayOrDefault(), cfg.Server.ShutdownTimeout)
	}

	// A config change rolls the pods.
	if a := r.deployment.Spec.Template.Annotations["checksum/config"]; len(a) != 64 {
		t.Errorf("checksum/config annotation %q: want a sha256", a)
	}

	// Spread across zones and nodes, selecting this release's pods.
	keys := map[string]bool{}
	for _, tsc := range pod.TopologySpreadConstraints {
		keys[tsc.TopologyKey] = true
		if tsc.LabelSelector == nil || tsc.LabelSelector.MatchLabels["app.kubernetes.io/instance"] != release {
			t.Errorf("topology spread on %s does not select the release's pods", tsc.TopologyKey)
		}
	}
	if !keys["topology.kubernetes.io/zone"] || !keys["kubernetes.io/hostname"] {
		t.Errorf("topology spread keys %v: want zone and hostname", keys)
	}

	// The Deployment and the Service select the pods the template labels.
	for k, v := range r.deployment.Spec.Selector.MatchLabels {
		if r.deployment.Spec.Template.Labels[k] != v || r.service.Spec.Selector[k] != v {
			t.Errorf("selector %s=%s: not on the pod template or the Service", k, v)
		}
	}
	if r.configMaps[r.keelConfigMapID] == nil || !volumeFrom(pod, r.keelConfigMapID) {
		t.Errorf("the config ConfigMap %s is not mounted", r.keelConfigMapID)
	}
	// Every Secret the pod reads from the chart exists in the render.
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			if s, ok := r.secrets[ref.Name]; ok {
				if _, ok := s.Data[ref.Key]; !ok {
					t.Errorf("env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)
				}
			}
		}
	}
}

func mounted(c *corev1.Container, dir string) bool {
	for _, m := range c.VolumeMounts {
		if (dir == m.MountPath || strings.HasPrefix(dir, m.MountPath+"/")) && !m.ReadOnly {
			return true
		}
	}
	return false
}

func volumeFrom(pod corev1.PodSpec, configMap string) bool {
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == configMap {
			return true
		}
	}
	return false
}

func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func secretRef(t *testing.T, c *corev1.Container, name string) *corev1.SecretKeySelector {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef
		}
	}
	t.Fatalf("env %s: not from a Secret", name)
	return nil
}

// TestDefaults: one replica without Redis, so no PodDisruptionBudget
// (it would block node drains) and no autoscaler; no secret in the
// ConfigMap; NOTES.txt says it runs one replica.
func TestDefaults(t *testing.T) {
	r := render(t, nil)
	want := []string{"ConfigMap/keel", "ConfigMap/keel-dashboard", "Deployment/keel", "Service/keel"}
	if !slices.Equal(r.kinds, want) {
		t.Errorf("resources %v, want %v", r.kinds, want)
	}
	if n := *r.deployment.Spec.Replicas; n != 1 {
		t.Errorf("replicas %d, want 1", n)
	}
	cfg := r.loadConfig(t, nil)
	if cfg.Redis.On() {
		t.Errorf("redis on by default")
	}
	if got := []string{cfg.Providers[0].APIKeyEnv, cfg.Providers[1].APIKeyEnv}; !slices.Equal(got, []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}) {
		t.Errorf("provider keys from %v", got)
	}
	if cfg.Server.LogFormat != "json" {
		t.Errorf("log_format %q, want json", cfg.Server.LogFormat)
	}
	notes := r.files["keel/templates/NOTES.txt"]
	if !strings.Contains(notes, "Redis: none. Keel runs ONE replica") {
		t.Errorf("NOTES.txt does not say one replica:\n%s", notes)
	}
}

// TestDefaultsMatchBinary: the chart's drain timings, port and probe paths
// are the binary's own defaults, and the binary answers the probes 200 with
// the config the chart renders.
func TestDefaultsMatchBinary(t *testing.T) {
	c := loadChart(t)
	sd := c.Values["shutdown"].(map[string]any)
	if got, want := toSeconds(sd["drainDelaySeconds"]), time.Duration(config.DefaultDrainDelay); got != want {
		t.Errorf("shutdown.drainDelaySeconds = %s, want server.drain_delay's default %s", got, want)
	}
	if got, want := toSeconds(sd["shutdownTimeoutSeconds"]), time.Duration(config.DefaultShutdownTimeout); got != want {
		t.Errorf("shutdown.shutdownTimeoutSeconds = %s, want server.shutdown_timeout's default %s", got, want)
	}
	_, defPort, _ := net.SplitHostPort(config.DefaultListen)
	if got := strconv.Itoa(int(toSeconds(c.Values["containerPort"]) / time.Second)); got != defPort {
		t.Errorf("containerPort %s, want server.listen's default port %s", got, defPort)
	}

	r := render(t, nil)
	// The provider keys the default config reads (providerKeys supplies them).
	cfg := r.loadConfig(t, []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"})
	cfg.RequestLog.Path = filepath.Join(t.TempDir(), "requests.db")
	m, err := keel.New(cfg)
	if err != nil {
		t.Fatalf("keel.New with the rendered config: %v", err)
	}
	defer m.Close()
	ct := r.container(t)
	for _, p := range []*corev1.Probe{ct.LivenessProbe, ct.ReadinessProbe} {
		// The kubelet sends the pod's IP as Host, which no allowed_hosts names.
		req := httptest.NewRequest(http.MethodGet, "http://10.1.2.3:"+strconv.Itoa(int(ct.Ports[0].ContainerPort))+p.HTTPGet.Path, nil)
		req.Header.Set("User-Agent", "kube-probe/1.30")
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", p.HTTPGet.Path, rec.Code, rec.Body)
		}
	}
}

func toSeconds(v any) time.Duration {
	switch n := v.(type) {
	case float64:
		return time.Duration(n) * time.Second
	case int64:
		return time.Duration(n) * time.Second
	case int:
		return time.Duration(n) * time.Second
	}
	return -1
}

// TestTwoReplicasExternalRedis: two replicas sharing the Redis whose URL is
// in the user's Secret, with a PodDisruptionBudget.
func TestTwoReplicasExternalRedis(t *testing.T) {
	r := render(t, readValues(t, "two-replicas-redis.yaml"))
	if n := *r.deployment.Spec.Replicas; n != 2 {
		t.Errorf("replicas %d, want 2", n)
	}
	if r.pdb == nil || r.pdb.Spec.MaxUnavailable == nil || r.pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("want a PodDisruptionBudget with maxUnavailable 1, got %+v", r.pdb)
	}
	c := r.container(t)
	if ref := secretRef(t, c, "KEEL_REDIS_URL"); ref.Name != "keel-redis" || ref.Key != "redis-url" {
		t.Errorf("KEEL_REDIS_URL from %s/%s, want keel-redis/redis-url", ref.Name, ref.Key)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != "keel-providers" {
		t.Errorf("envFrom %+v, want the Secret keel-providers", c.EnvFrom)
	}
	if len(r.secrets) != 0 {
		t.Errorf("the chart created Secrets %v though every secret is the user's", r.secrets)
	}
	if strings.Contains(string(r.keelYAML), "redis://") {
		t.Errorf("the Redis URL is in the ConfigMap:\n%s", r.keelYAML)
	}
	cfg := r.loadConfig(t, examples[0].secretEnv)
	if !cfg.Redis.On() || cfg.Redis.URL.Value() != "redis://redis.data:6379" {
		t.Errorf("redis url %q: want ${KEEL_REDIS_URL} expanded", cfg.Redis.URL.Value())
	}
	if got := cfg.KeysStore(); got != config.KeysStoreRedis {
		t.Errorf("keys store %q, want redis (shared by the replicas)", got)
	}
	if notes := r.files["keel/templates/NOTES.txt"]; !strings.Contains(notes, "Replicas: 2, sharing endpoint state") {
		t.Errorf("NOTES.txt:\n%s", notes)
	}
}

// TestKeysRequiredAdminTokenFromSecret: virtual keys required, the admin
// token (which manages them through /admin/keys) from the user's Secret.
func TestKeysRequiredAdminTokenFromSecret(t *testing.T) {
	r := render(t, readValues(t, "keys-required.yaml"))
	c := r.container(t)
	if ref := secretRef(t, c, "KEEL_ADMIN_TOKEN"); ref.Name != "keel-admin" || ref.Key != "admin-token" {
		t.Errorf("KEEL_ADMIN_TOKEN from %s/%s, want keel-admin/admin-token", ref.Name, ref.Key)
	}
	cfg := r.loadConfig(t, examples[1].secretEnv)
	if !cfg.Server.RequireKeys {
		t.Errorf("require_keys off")
	}
	if got := cfg.Server.AdminToken.Value(); got != "secret-keel_admin_token" {
		t.Errorf("admin_token %q: want ${KEEL_ADMIN_TOKEN} expanded", got)
	}
	if got := cfg.Providers[0].APIKey.Value(); got != "secret-anthropic_api_key" {
		t.Errorf("api_key %q: want ${ANTHROPIC_API_KEY} expanded", got)
	}
	if strings.Contains(r.files["keel/templates/NOTES.txt"], "does not authenticate clients") {
		t.Errorf("NOTES.txt warns of an open API though keys are required")
	}
}

// TestPrometheusOperator: the ServiceMonitor scrapes /metrics with the read
// token, the PrometheusRule holds deploy/prometheus/rules.yml's groups, the
// dashboard queries the configured datasource.
func TestPrometheusOperator(t *testing.T) {
	r := render(t, readValues(t, "prometheus-operator.yaml"))
	sm := r.serviceMonitor
	if sm == nil || r.prometheusRule == nil {
		t.Fatalf("resources %v: want a ServiceMonitor and a PrometheusRule", r.kinds)
	}
	if sm.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v", sm.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("endpoints %+v", sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != "http" || ep.Path != "/metrics" || ep.Authorization == nil || ep.Authorization.Credentials == nil ||
		ep.Authorization.Credentials.Name != "keel-read" || ep.Authorization.Credentials.Key != "read-token" {
		t.Errorf("ServiceMonitor endpoint %+v: want port http, /metrics, bearer from keel-read/read-token", ep)
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if r.service.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, which the Service lacks", k, v)
		}
	}
	if ref := secretRef(t, r.container(t), "KEEL_READ_TOKEN"); ref.Name != "keel-read" || ref.Key != "read-token" {
		t.Errorf("KEEL_READ_TOKEN from %s/%s", ref.Name, ref.Key)
	}
	cfg := r.loadConfig(t, nil)
	if cfg.Server.ReadToken.Value() == "" {
		t.Errorf("read_token unset: /metrics would answer 403")
	}

	// The rules are deploy/prometheus/rules.yml's, every group and rule.
	var src struct {
		Groups []struct {
			Name  string           `json:"name"`
			Rules []map[string]any `json:"rules"`
		} `json:"groups"`
	}
	equalFiles(t, filepath.Join(chartDir, "files/rules.yml"), "../../prometheus/rules.yml")
	raw := readFile(t, "../../prometheus/rules.yml")
	if err := yaml.Unmarshal(raw, &src); err != nil {
		t.Fatal(err)
	}
	got := r.prometheusRule.Spec.Groups
	if len(got) != len(src.Groups) || len(got) == 0 {
		t.Fatalf("PrometheusRule groups %d, rules.yml %d", len(got), len(src.Groups))
	}
	for i, g := range got {
		if g.Name != src.Groups[i].Name || len(g.Rules) != len(src.Groups[i].Rules) {
			t.Errorf("group %d: %s with %d rules, rules.yml %s with %d", i, g.Name, len(g.Rules), src.Groups[i].Name, len(src.Groups[i].Rules))
		}
	}

	// The dashboard is deploy/grafana's, with the datasource uid replaced.
	equalFiles(t, filepath.Join(chartDir, "files/keel-mesh.json"), "../../grafana/dashboards/keel-mesh.json")
	cm := r.configMaps["keel-dashboard"]
	if cm == nil || cm.Labels["grafana_dashboard"] != "1" {
		t.Fatalf("dashboard ConfigMap %+v", cm)
	}
	var dash any
	if err := json.Unmarshal([]byte(cm.Data["keel-mesh.json"]), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	uids := map[string]int{}
	walkUIDs(dash, uids)
	if len(uids) != 1 || uids["prometheus"] == 0 {
		t.Errorf("datasource uids %v: want only prometheus", uids)
	}
}

// walkUIDs counts the uid of every datasource reference in a dashboard.
func walkUIDs(v any, uids map[string]int) {
	switch x := v.(type) {
	case map[string]any:
		if ds, ok := x["datasource"].(map[string]any); ok {
			if uid, ok := ds["uid"].(string); ok {
				uids[uid]++
			}
		}
		for _, c := range x {
			walkUIDs(c, uids)
		}
	case []any:
		for _, c := range x {
			walkUIDs(c, uids)
		}
	}
}

// TestConfigChangeRollsPods: the pod template's checksum changes with the
// config, so `helm upgrade` with a new config rolls the pods; it is stable
// across renders and unmoved by a value that does not touch the config.
func TestConfigChangeRollsPods(t *testing.T) {
	sum := func(vals map[string]any) string {
		return render(t, vals).deployment.Spec.Template.Annotations["checksum/config"]
	}
	base := readValues(t, "two-replicas-redis.yaml")
	a := sum(base)
	if b := sum(base); a != b {
		t.Errorf("checksum differs between two renders of the same values: %s, %s", a, b)
	}
	changed := with(base, "config.server.log_level=debug")
	if b := sum(changed); a == b {
		t.Errorf("config.server.log_level changed, checksum/config did not (%s)", a)
	}
	if b := sum(with(base, "shutdown.shutdownTimeoutSeconds=60")); a == b {
		t.Errorf("shutdown_timeout changed, checksum/config did not")
	}
	if b := sum(with(base, "replicaCount=3")); a != b {
		t.Errorf("replicaCount changed the config checksum: the pods would roll for nothing")
	}
	// A token given as a value rolls the pods through checksum/secret.
	s1 := render(t, with(base, "readToken.value=one")).deployment.Spec.Template.Annotations["checksum/secret"]
	s2 := render(t, with(base, "readToken.value=two")).deployment.Spec.Template.Annotations["checksum/secret"]
	if s1 == s2 {
		t.Errorf("readToken.value changed, checksum/secret did not")
	}
}

// TestGracePeriod: the grace period follows the drain values and exceeds
// preStop + drain_delay + shutdown_timeout + 1s for each (checkPod checks
// the bound; here the arithmetic).
func TestGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sets       []string
		preStop    int64
		graceAtMin int64
	}{
		{"defaults", nil, 5, 5 + 30 + 1 + 4},
		{"long streams", []string{"shutdown.shutdownTimeoutSeconds=600"}, 5, 5 + 600 + 1 + 4},
		{"no preStop", []string{"shutdown.drainDelaySeconds=0"}, 0, 0 + 30 + 1 + 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, with(nil, tc.sets...))
			cfg := r.loadConfig(t, nil)
			checkPod(t, r, cfg)
			c := r.container(t)
			var pre int64
			if c.Lifecycle != nil {
				pre = c.Lifecycle.PreStop.Sleep.Seconds
			}
			if pre != tc.preStop {
				t.Errorf("preStop sleep %d, want %d", pre, tc.preStop)
			}
			if g := *r.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; g != tc.graceAtMin {
				t.Errorf("terminationGracePeriodSeconds %d, want %d", g, tc.graceAtMin)
			}
			if d := cfg.Server.DrainDelayOrDefault(); d != 0 {
				t.Errorf("config drain_delay %s: the preStop hook stands for it, want 0s", d)
			}
		})
	}
}

// TestGoMemLimit: GOMEMLIMIT is the percentage of each way of writing the
// memory limit, and absent without one.
func TestGoMemLimit(t *testing.T) {
	for _, tc := range []struct{ limit, percent, want string }{
		{"512Mi", "90", "483183820"},
		{"1Gi", "80", "858993459"},
		{"2G", "90", "1800000000"},
		{"1073741824", "100", "1073741824"},
		{"512Mi", "0", ""},
	} {
		t.Run(tc.limit+"@"+tc.percent, func(t *testing.T) {
			r := render(t, with(nil, "resources.limits.memory="+strconv.Quote(tc.limit), "goMemLimitPercent="+tc.percent))
			c := r.container(t)
			if got := envValue(c, "GOMEMLIMIT"); got != tc.want {
				t.Errorf("GOMEMLIMIT %q, want %q", got, tc.want)
			}
			q := c.Resources.Limits[corev1.ResourceMemory]
			if q.Cmp(resource.MustParse(tc.limit)) != 0 {
				t.Errorf("limit %s, want %s", q.String(), tc.limit)
			}
		})
	}
	r := render(t, map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}, "limits": nil}})
	if got := envValue(r.container(t), "GOMEMLIMIT"); got != "" {
		t.Errorf("GOMEMLIMIT %q without a memory limit", got)
	}
}

// TestWrongValuesRefused: values.schema.json and the templates refuse a
// wrong value at install time, saying which.
func TestWrongValuesRefused(t *testing.T) {
	redis := readValues(t, "two-replicas-redis.yaml")
	for _, tc := range []struct {
		name  string
		vals  map[string]any
		wants []string
	}{
		{"replicaCount a string", with(redis, `replicaCount="two"`), []string{"replicaCount"}},
		{"replicaCount zero", with(redis, "replicaCount=0"), []string{"replicaCount"}},
		{"unknown redis mode", with(nil, "redis.mode=sentinel"), []string{"redis", "mode"}},
		{"misspelt top-level key", with(nil, "replicas=2"), []string{"replicas"}},
		{"fractional memory limit", with(nil, `resources.limits.memory="1.5Gi"`), []string{"memory"}},
		{"service type", with(nil, "service.type=Ingress"), []string{"service"}},
		{"negative drain", with(nil, "shutdown.drainDelaySeconds=-1"), []string{"drainDelaySeconds"}},
		{"GOMEMLIMIT percent", with(nil, "goMemLimitPercent=150"), []string{"goMemLimitPercent"}},
		{"two replicas without Redis", with(nil, "replicaCount=2"), []string{"needs redis.mode=external"}},
		{"autoscaling without Redis", with(nil, "autoscaling.enabled=true"), []string{"needs redis.mode=external"}},
		{"external Redis without a URL", with(nil, "redis.mode=external"), []string{"redis.url.existingSecret"}},
		{"ServiceMonitor without a read token", with(nil, "metrics.serviceMonitor.enabled=true"), []string{"needs readToken"}},
		{"listen in config", with(nil, `config.server.listen="0.0.0.0:9000"`), []string{"config.server.listen is set by the chart", "containerPort"}},
		{"drain_delay in config", with(nil, "config.server.drain_delay=10s"), []string{"config.server.drain_delay is set by the chart"}},
		{"redis url in config", with(redis, `config.redis.url="redis://x:6379"`), []string{"config.redis.url is set by the chart"}},
		{"keys without Redis", with(nil, "config.server.require_keys=true"), []string{"require_keys needs redis.mode=external"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderValues(t, tc.vals)
			mustContain(t, err, tc.wants...)
		})
	}
}

// TestConfigKeelRefuses: a config Keel refuses renders (Helm cannot know
// Keel's rules) but fails config.Load here, with Keel's own message.
func TestConfigKeelRefuses(t *testing.T) {
	r := render(t, with(nil, "config.server.log_format=xml"))
	path := filepath.Join(t.TempDir(), "keel.yaml")
	writeFile(t, path, r.keelYAML)
	_, err := config.Load(path)
	mustContain(t, err, "log_format")
}

// TestLint runs Helm's lint rules (`helm lint`: Chart.yaml, values against
// the schema, templates render and parse as YAML, Kubernetes names and
// deprecated APIs) for the defaults and every example; any warning or error
// fails.
func TestLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	cases := append([]example{{}}, examples...)
	for _, ex := range cases {
		vals := map[string]any{}
		if ex.file != "" {
			vals = readValues(t, ex.file)
		}
		l := lint.AllWithKubeVersion(chartDir, vals, namespace, kv)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("lint %s: %s", ex.file, m)
			}
		}
	}
}

// TestAutoscaling: the HorizontalPodAutoscaler scales the Deployment, which
// then leaves replicas to it; the PodDisruptionBudget comes along.
func TestAutoscaling(t *testing.T) {
	r := render(t, with(readValues(t, "two-replicas-redis.yaml"), "autoscaling.enabled=true", "autoscaling.minReplicas=3", "autoscaling.maxReplicas=12"))
	checkPod(t, r, r.loadConfig(t, examples[0].secretEnv))
	if r.hpa == nil || r.pdb == nil {
		t.Fatalf("resources %v: want an HPA and a PDB", r.kinds)
	}
	if r.deployment.Spec.Replicas != nil {
		t.Errorf("replicas %d set: it would fight the autoscaler on every upgrade", *r.deployment.Spec.Replicas)
	}
	ref := r.hpa.Spec.ScaleTargetRef
	if ref.Kind != "Deployment" || ref.Name != r.deployment.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("HPA targets %+v", ref)
	}
	if *r.hpa.Spec.MinReplicas != 3 || r.hpa.Spec.MaxReplicas != 12 {
		t.Errorf("HPA %d..%d, want 3..12", *r.hpa.Spec.MinReplicas, r.hpa.Spec.MaxReplicas)
	}
	if m := r.hpa.Spec.Metrics; len(m) != 1 || m[0].Resource == nil || m[0].Resource.Name != corev1.ResourceCPU {
		t.Errorf("HPA metrics %+v: want CPU", m)
	}
	if notes := r.files["keel/templates/NOTES.txt"]; !strings.Contains(notes, "Replicas: 3 to 12 (HorizontalPodAutoscaler), sharing") {
		t.Errorf("NOTES.txt:\n%s", notes)
	}
}

// TestChartCreatedSecrets: tokens, the Redis URL and provider keys given as
// values go into the chart's Secrets, which the pod reads; the ConfigMap
// holds none of them.
func TestChartCreatedSecrets(t *testing.T) {
	r := render(t, with(nil, "replicaCount=2", "redis.mode=external", `redis.url.value="redis://:pw@redis:6379"`,
		"adminToken.value=admin-secret", "readToken.value=read-secret",
		"providerKeys.values.ANTHROPIC_API_KEY=sk-ant-x", "providerKeys.values.OPENAI_API_KEY=sk-x"))
	s, env := r.secrets["keel"], r.secrets["keel-env"]
	if s == nil || env == nil {
		t.Fatalf("resources %v: want the Secrets keel and keel-env", r.kinds)
	}
	for k, want := range map[string]string{"admin-token": "admin-secret", "read-token": "read-secret", "redis-url": "redis://:pw@redis:6379"} {
		if got := string(s.Data[k]); got != want {
			t.Errorf("Secret keel %s = %q, want %q", k, got, want)
		}
	}
	if got := string(env.Data["ANTHROPIC_API_KEY"]); got != "sk-ant-x" || len(env.Data) != 2 {
		t.Errorf("Secret keel-env %v", env.Data)
	}
	c := r.container(t)
	for name, key := range map[string]string{"KEEL_ADMIN_TOKEN": "admin-token", "KEEL_READ_TOKEN": "read-token", "KEEL_REDIS_URL": "redis-url"} {
		if ref := secretRef(t, c, name); ref.Name != "keel" || ref.Key != key {
			t.Errorf("%s from %s/%s, want keel/%s", name, ref.Name, ref.Key, key)
		}
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != "keel-env" {
		t.Errorf("envFrom %+v, want keel-env", c.EnvFrom)
	}
	for _, v := range []string{"admin-secret", "read-secret", ":pw@", "sk-ant-x"} {
		if strings.Contains(string(r.keelYAML), v) {
			t.Errorf("the ConfigMap holds the secret %q", v)
		}
	}
	cfg := r.loadConfig(t, nil)
	checkPod(t, r, cfg)
	if cfg.Server.AdminToken.Value() == "" || cfg.Server.ReadToken.Value() == "" || !cfg.Redis.On() {
		t.Errorf("admin token, read token or redis not configured")
	}
}
