package config

import (
	"fmt"
	"strings"
)

// expandEnv expands ${VAR} and ${VAR:-default} in the fields that allow it:
// server admin_token and read_token, the safety valve's webhook, the OTLP
// endpoint and headers, provider base_url, api_key, header values and
// vertex.credentials_file,
// endpoint base_url, cache.embeddings base_url and api_key, redis url and
// password, and pii.audit.hash_key. It
// works on decoded strings, never on the file text, so a value cannot change
// the YAML structure. A field that fails to expand is left empty.
func (c *Config) expandEnv(lookup func(string) (string, bool)) []error {
	var errs []error
	do := func(path string, s *string) {
		v, err := expand(*s, lookup)
		if err != nil {
			errs = append(errs, c.errAt(path, "%v", err))
			v = ""
		}
		*s = v
	}
	secret := func(path string, s *Secret) {
		v := string(*s)
		do(path, &v)
		*s = Secret(v)
	}
	secret("server.admin_token", &c.Server.AdminToken)
	secret("server.read_token", &c.Server.ReadToken)
	do("resilience.safety_valve.webhook", &c.Resilience.SafetyValve.Webhook)
	do("telemetry.otlp_endpoint", &c.Telemetry.OTLPEndpoint)
	for name, v := range c.Telemetry.OTLPHeaders {
		secret("telemetry.otlp_headers."+name, &v)
		c.Telemetry.OTLPHeaders[name] = v
	}
	for i := range c.Providers {
		p := &c.Providers[i]
		base := fmt.Sprintf("providers[%d]", i)
		do(base+".base_url", &p.BaseURL)
		secret(base+".api_key", &p.APIKey)
		for name, v := range p.Headers {
			secret(base+".headers."+name, &v)
			p.Headers[name] = v
		}
		if p.Vertex != nil {
			do(base+".vertex.credentials_file", &p.Vertex.CredentialsFile)
		}
	}
	if e := c.Cache.Embeddings; e != nil {
		do("cache.embeddings.base_url", &e.BaseURL)
		secret("cache.embeddings.api_key", &e.APIKey)
	}
	secret("redis.url", &c.Redis.URL)
	secret("redis.password", &c.Redis.Password)
	secret("pii.audit.hash_key", &c.PII.Audit.HashKey)
	for i := range c.Models {
		for j := range c.Models[i].Endpoints {
			do(fmt.Sprintf("models[%d].endpoints[%d].base_url", i, j), &c.Models[i].Endpoints[j].BaseURL)
		}
	}
	return errs
}

// expand replaces ${VAR} by the variable's value and ${VAR:-default} by the
// value, or by default when the variable is unset or empty. "$${" stands for
// a literal "${"; any other '$' is literal. Errors name the variable but never
// quote s, which may hold a secret.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' { // "$${" is an escaped "${"
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		s = s[i+2:]
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ (write $${ for a literal ${)")
		}
		expr := s[:end]
		s = s[end+1:]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			return "", fmt.Errorf("invalid variable reference: expected ${NAME} or ${NAME:-default} with NAME made of letters, digits and '_'")
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			return "", fmt.Errorf("environment variable %s is not set (write ${%s:-default} to give a default)", name, name)
		}
		b.WriteString(v)
	}
}

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
