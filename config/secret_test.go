package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

const (
	literalSecret = "sk-literal-0123456789abcdef"
	envSecret     = "sk-env-fedcba9876543210"
	headerSecret  = "hdr-secret-55aa55aa"
)

func secretConfig(t *testing.T) *Config {
	t.Helper()
	t.Setenv("KEEL_TEST_KEY", envSecret)
	t.Setenv("KEEL_TEST_HDR", headerSecret)
	src := `
providers:
  - name: lit
    type: anthropic
    api_key: ` + literalSecret + `
  - name: env
    type: openai
    base_url: http://127.0.0.1:8000/v1
    api_key: ${KEEL_TEST_KEY}
    headers:
      Authorization-Extra: Bearer ${KEEL_TEST_HDR}
models:
  - name: m
    endpoints: [{provider: lit}, {provider: env}]
`
	c, err := Parse([]byte(src), "keel.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range []string{literalSecret, envSecret, headerSecret} {
		if strings.Contains(s, secret) {
			t.Errorf("%s contains a secret:\n%s", what, s)
		}
	}
}

func TestSecretRedaction(t *testing.T) {
	c := secretConfig(t)
	if got := c.Provider("lit").APIKey.Value(); got != literalSecret {
		t.Errorf("literal api_key Value() = %q, want %q", got, literalSecret)
	}
	if got := c.Provider("env").APIKey.Value(); got != envSecret {
		t.Errorf("expanded api_key Value() = %q, want %q", got, envSecret)
	}
	if got := c.Provider("env").Headers["Authorization-Extra"].Value(); got != "Bearer "+headerSecret {
		t.Errorf("header Value() = %q", got)
	}

	jsonOut, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	yamlOut, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var textLog, jsonLog bytes.Buffer
	slog.New(slog.NewTextHandler(&textLog, nil)).Info("cfg", "key", c.Providers[0].APIKey, "provider", c.Providers[1])
	slog.New(slog.NewJSONHandler(&jsonLog, nil)).Info("cfg", "key", c.Providers[0].APIKey, "provider", c.Providers[1])

	outputs := []struct {
		name string
		out  string
	}{
		{"%v", fmt.Sprintf("%v", c)},
		{"%+v", fmt.Sprintf("%+v", c)},
		{"%#v", fmt.Sprintf("%#v", c)},
		{"%v value", fmt.Sprintf("%v %+v %#v", *c, *c, *c)},
		{"Sprint providers", fmt.Sprint(c.Providers) + fmt.Sprintln(c.Providers[1])},
		{"%v on secret", fmt.Sprintf("%v %+v %#v %s %q %x %X %10s %d", c.Providers[0].APIKey, c.Providers[0].APIKey, c.Providers[0].APIKey, c.Providers[0].APIKey, c.Providers[0].APIKey, c.Providers[0].APIKey, c.Providers[0].APIKey, c.Providers[0].APIKey, c.Providers[0].APIKey)},
		{"String", c.Providers[0].APIKey.String()},
		{"Sprint", fmt.Sprint(c.Providers[1].Headers)},
		{"json", string(jsonOut)},
		{"yaml", string(yamlOut)},
		{"slog text", textLog.String()},
		{"slog json", jsonLog.String()},
	}
	for _, o := range outputs {
		t.Run(o.name, func(t *testing.T) {
			assertNoSecret(t, o.name, o.out)
			if !strings.Contains(o.out, "[redacted]") {
				t.Errorf("%s does not show [redacted]:\n%s", o.name, o.out)
			}
		})
	}
}

func TestSecretFormatting(t *testing.T) {
	tests := []struct {
		name   string
		format string
		s      Secret
		want   string
	}{
		{"v", "%v", "x", "[redacted]"},
		{"s", "%s", "x", "[redacted]"},
		{"q", "%q", "x", `"[redacted]"`},
		{"sharp v", "%#v", "x", `"[redacted]"`},
		{"empty v", "%v", "", ""},
		{"empty sharp v", "%#v", "", `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fmt.Sprintf(tt.format, tt.s); got != tt.want {
				t.Errorf("Sprintf(%q) = %q, want %q", tt.format, got, tt.want)
			}
		})
	}
	b, _ := json.Marshal(map[string]Secret{"a": "x", "b": ""})
	if got, want := string(b), `{"a":"[redacted]","b":""}`; got != want {
		t.Errorf("json = %s, want %s", got, want)
	}
}

// TestSecretsNotInErrors puts secrets where they cause errors and checks
// that no error message repeats them.
func TestSecretsNotInErrors(t *testing.T) {
	t.Setenv("KEEL_TEST_BADURL", "https://user:"+envSecret+"@example.com")
	t.Setenv("KEEL_TEST_HDR", headerSecret+"\r\nX-Injected: 1")
	tests := []struct {
		name string
		yaml string
	}{
		{"key pasted into api_key_env", "providers:\n  - {name: a, type: openai, api_key_env: " + literalSecret + "}\n"},
		{"key pasted into api_key_env with both set", "providers:\n  - {name: a, type: openai, api_key: " + literalSecret + ", api_key_env: " + literalSecret + "}\n"},
		{"credentials in base_url from env", "providers:\n  - {name: a, type: openai, base_url: '${KEEL_TEST_BADURL}'}\n"},
		{"credentials in literal base_url", "providers:\n  - {name: a, type: openai, base_url: 'https://u:" + literalSecret + "@h'}\n"},
		{"unparsable base_url", "providers:\n  - {name: a, type: openai, base_url: 'http://[" + literalSecret + "'}\n"},
		{"bad header value", "providers:\n  - {name: a, type: openai, headers: {X: '${KEEL_TEST_HDR}'}}\n"},
		{"unterminated reference", "providers:\n  - {name: a, type: openai, api_key: '" + literalSecret + "${'}\n"},
		{"unset var with secret default", "providers:\n  - {name: a, type: openai, api_key: '${NOPE_" + "X}${KEEL_TEST_UNSET:-" + literalSecret + "}'}\n"},
		{"api_key of the wrong kind", "providers:\n  - {name: a, type: openai, api_key: [" + literalSecret + "]}\n"},
		{"header of the wrong kind", "providers:\n  - {name: a, type: openai, headers: {X: {" + literalSecret + ": 1}}}\n"},
		{"syntax error near secret", "providers:\n  - {name: a, type: openai, api_key: \"" + literalSecret + "\n"},
		{"credentials in a bad redis url", "redis: {url: 'http://u:" + literalSecret + "@h:1'}\n"},
		{"unparsable redis url", "redis: {url: 'redis://[" + literalSecret + "'}\n"},
		{"unknown key holding secret", "providers:\n  - {name: a, type: openai, apikey: " + literalSecret + "}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "keel.yaml")
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			assertNoSecret(t, "error", err.Error())
			assertNoSecret(t, "formatted error", fmt.Sprintf("%+v %#v", err, err))
		})
	}
}

func TestKey(t *testing.T) {
	t.Setenv("KEEL_TEST_SET", envSecret)
	t.Setenv("KEEL_TEST_EMPTY", "")
	tests := []struct {
		name    string
		p       Provider
		want    string
		wantErr string
	}{
		{name: "literal", p: Provider{Name: "a", APIKey: literalSecret}, want: literalSecret},
		{name: "env", p: Provider{Name: "a", APIKeyEnv: "KEEL_TEST_SET"}, want: envSecret},
		{name: "none", p: Provider{Name: "local"}, want: ""},
		{name: "env unset", p: Provider{Name: "a", APIKeyEnv: "KEEL_TEST_NEVER_SET"}, wantErr: `provider "a": api key environment variable not set: KEEL_TEST_NEVER_SET`},
		{name: "env empty", p: Provider{Name: "a", APIKeyEnv: "KEEL_TEST_EMPTY"}, wantErr: `provider "a": api key environment variable not set: KEEL_TEST_EMPTY`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.Key()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, ErrKeyEnvUnset) {
					t.Fatalf("Key() error = %v, want %q wrapping ErrKeyEnvUnset", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Key() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
