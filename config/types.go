package config

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written in YAML as a string with a unit:
// "300ms", "5s", "2m", "1h30m". Bare numbers are rejected because their unit
// would be a guess.
type Duration time.Duration

// ParseDuration parses a duration with a unit, as time.ParseDuration does,
// but rejects a bare number such as "30" or "0".
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("expected a duration such as \"30s\" or \"300ms\", got an empty string")
	}
	if strings.Trim(t, "+-0123456789.") == "" {
		return 0, fmt.Errorf("expected a duration with a unit such as \"30s\" or \"300ms\", got %q (add a unit: ns, us, ms, s, m, h)", s)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("expected a duration such as \"30s\" or \"300ms\", got %q", s)
	}
	return Duration(d), nil
}

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d as time.Duration does ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as "1m30s"; JSON and YAML encoders use it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a duration with a unit (see ParseDuration).
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalYAML writes d as a string such as "1m30s".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Secret is a string that must never be shown: an API key or a header value.
// String, fmt verbs (%v, %+v, %#v, %s, %q), slog, JSON and YAML all render a
// non-empty Secret as "[redacted]" and an empty one as "". Value returns the
// secret itself.
type Secret string

const redacted = "[redacted]"

// Value returns the secret in clear, for sending upstream.
func (s Secret) Value() string { return string(s) }

// String returns "[redacted]", or "" when s is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString returns the quoted redacted form, so %#v never shows the secret.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// Format implements fmt.Formatter for every verb, so no verb or flag prints
// the secret.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'q' || (verb == 'v' && f.Flag('#')) {
		fmt.Fprint(f, strconv.Quote(s.String()))
		return
	}
	fmt.Fprint(f, s.String())
}

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON writes the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.String())), nil }

// MarshalYAML writes the redacted form.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }
