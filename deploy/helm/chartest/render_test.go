package chartest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/keelmesh/keel/config"
)

const (
	chartDir    = "../keel"
	examplesDir = "../keel/examples"
	release     = "keel"
	namespace   = "gateway"
	// kubeVersion is the oldest Kubernetes the chart supports (Chart.yaml
	// kubeVersion): the preStop sleep action is on by default from 1.30.
	kubeVersion = "v1.30.0"
)

// rendered is one render of the chart: each manifest decoded strictly into
// its Kubernetes (or Prometheus Operator) type.
type rendered struct {
	files map[string]string // template path → rendered text (NOTES.txt included)

	deployment      *appsv1.Deployment
	service         *corev1.Service
	configMaps      map[string]*corev1.ConfigMap // by name
	secrets         map[string]*corev1.Secret    // by name
	pdb             *policyv1.PodDisruptionBudget
	hpa             *autoscalingv2.HorizontalPodAutoscaler
	serviceMonitor  *monitoringv1.ServiceMonitor
	prometheusRule  *monitoringv1.PrometheusRule
	kinds           []string // "Kind/name" of every manifest, sorted
	keelYAML        []byte   // the Keel config in the ConfigMap
	keelConfigMapID string
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return c
}

// readValues reads a values file of examples/.
func readValues(t *testing.T, name string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValuesFile(filepath.Join(examplesDir, name))
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return v.AsMap()
}

// renderValues renders the chart as `helm install` does: the values
// coalesced with values.yaml and checked against values.schema.json, then
// every template executed. It returns the template error, if any.
func renderValues(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	c := loadChart(t)
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps.KubeVersion = *kv
	if !chartutil.IsCompatibleRange(c.Metadata.KubeVersion, kv.String()) {
		t.Fatalf("Chart.yaml kubeVersion %q refuses %s", c.Metadata.KubeVersion, kv)
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(c, vals, opts, caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, rv)
}

// render renders and decodes; any error fails the test.
func render(t *testing.T, vals map[string]any) *rendered {
	t.Helper()
	files, err := renderValues(t, vals)
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	return decode(t, files)
}

// decode splits every rendered template into its documents and decodes each
// strictly into the Go type of its apiVersion and kind: an unknown or
// misspelt field, a value of the wrong type or a kind the chart should not
// produce fails the test.
func decode(t *testing.T, files map[string]string) *rendered {
	t.Helper()
	r := &rendered{files: files, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasSuffix(name, ".tpl") {
			continue
		}
		docs := releaseutil.SplitManifests(files[name])
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			doc := docs[k]
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: not YAML: %v\n%s", name, err, doc)
			}
			var obj any
			switch head.APIVersion + " " + head.Kind {
			case "apps/v1 Deployment":
				if r.deployment != nil {
					t.Fatalf("%s: a second Deployment", name)
				}
				r.deployment = &appsv1.Deployment{}
				obj = r.deployment
			case "v1 Service":
				r.service = &corev1.Service{}
				obj = r.service
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			case "v1 Secret":
				obj = &corev1.Secret{}
			case "policy/v1 PodDisruptionBudget":
				r.pdb = &policyv1.PodDisruptionBudget{}
				obj = r.pdb
			case "autoscaling/v2 HorizontalPodAutoscaler":
				r.hpa = &autoscalingv2.HorizontalPodAutoscaler{}
				obj = r.hpa
			case "monitoring.coreos.com/v1 ServiceMonitor":
				r.serviceMonitor = &monitoringv1.ServiceMonitor{}
				obj = r.serviceMonitor
			case "monitoring.coreos.com/v1 PrometheusRule":
				r.prometheusRule = &monitoringv1.PrometheusRule{}
				obj = r.prometheusRule
			default:
				t.Fatalf("%s: unexpected %s %s", name, head.APIVersion, head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s: %s does not decode strictly: %v\n%s", name, head.Kind, err, doc)
			}
			var meta struct {
				Metadata struct {
					Name      string            `json:"name"`
					Namespace string            `json:"namespace"`
					Labels    map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatal(err)
			}
			if meta.Metadata.Name == "" {
				t.Errorf("%s: %s without a name", name, head.Kind)
			}
			// Every resource carries the chart's labels, so that
			// `kubectl get all -l app.kubernetes.io/instance=keel` finds it.
			for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
				if meta.Metadata.Labels[l] == "" {
					t.Errorf("%s: %s/%s has no label %s", name, head.Kind, meta.Metadata.Name, l)
				}
			}
			r.kinds = append(r.kinds, head.Kind+"/"+meta.Metadata.Name)
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				r.configMaps[o.Name] = o
				if y, ok := o.Data["keel.yaml"]; ok {
					r.keelYAML = []byte(y)
					r.keelConfigMapID = o.Name
				}
			case *corev1.Secret:
				r.secrets[o.Name] = o
			}
		}
	}
	slices.Sort(r.kinds)
	if r.deployment == nil || r.service == nil || r.keelYAML == nil {
		t.Fatalf("the render lacks the Deployment, the Service or the config; it has %v", r.kinds)
	}
	return r
}

// container is the keel container of the Deployment.
func (r *rendered) container(t *testing.T) *corev1.Container {
	t.Helper()
	cs := r.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "keel" {
		t.Fatalf("containers: want one named keel, got %d", len(cs))
	}
	return &cs[0]
}

// podEnv is the environment the keel container gets, with a made-up value
// for each variable: the explicit env entries, every key of the Secrets the
// chart creates for envFrom, and secretEnv for the Secrets the user manages
// (which a render cannot see: each example's header says what they hold).
func (r *rendered) podEnv(t *testing.T, secretEnv []string) map[string]string {
	t.Helper()
	env := map[string]string{}
	c := r.container(t)
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "secret-" + strings.ToLower(e.Name)
		default:
			env[e.Name] = e.Value
		}
	}
	for _, from := range c.EnvFrom {
		if from.SecretRef == nil {
			t.Fatalf("envFrom other than a Secret: %+v", from)
		}
		if s, ok := r.secrets[from.SecretRef.Name]; ok {
			for k := range s.Data {
				env[k] = "secret-" + strings.ToLower(k)
			}
		}
	}
	for _, k := range secretEnv {
		env[k] = "secret-" + strings.ToLower(k)
	}
	if v, ok := env["KEEL_REDIS_URL"]; ok && !strings.HasPrefix(v, "redis") {
		env["KEEL_REDIS_URL"] = "redis://redis.data:6379"
	}
	return env
}

// loadConfig loads the rendered keel.yaml with Keel's own loader, in the
// environment the pod would have, as `keel serve --config` does at start.
func (r *rendered) loadConfig(t *testing.T, secretEnv []string) *config.Config {
	t.Helper()
	env := r.podEnv(t, secretEnv)
	for k, v := range env {
		t.Setenv(k, v)
	}
	path := filepath.Join(t.TempDir(), "keel.yaml")
	writeFile(t, path, r.keelYAML)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load refuses the rendered config: %v\n%s", err, r.keelYAML)
	}
	return cfg
}

// with returns base with the dotted keys set, as `helm install --set` does.
func with(base map[string]any, sets ...string) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for _, s := range sets {
		k, v, _ := strings.Cut(s, "=")
		out = chartutil.CoalesceTables(setPath(k, parseScalar(v)), out)
	}
	return out
}

func setPath(path string, v any) map[string]any {
	parts := strings.Split(path, ".")
	m := map[string]any{parts[len(parts)-1]: v}
	for i := len(parts) - 2; i >= 0; i-- {
		m = map[string]any{parts[i]: m}
	}
	return m
}

// parseScalar reads a --set value as YAML: "2" is a number, "true" a bool.
func parseScalar(s string) any {
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	return v
}

func mustContain(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("rendered; want an error containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\ndoes not contain %q", err, w)
		}
	}
}

func equalFiles(t *testing.T, a, b string) {
	t.Helper()
	if !bytes.Equal(readFile(t, a), readFile(t, b)) {
		t.Errorf("%s differs from %s: copy it (cp %s %s)", a, b, b, a)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
