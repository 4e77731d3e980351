package structured

import (
	"reflect"
	"testing"
)

// Each mode accepts its names and "" (the default), and refuses anything
// else with an error listing the allowed values.
func TestModesUnmarshalText(t *testing.T) {
	tests := []struct {
		name    string
		into    interface{ UnmarshalText([]byte) error }
		in      string
		wantErr string
	}{
		{name: "stream strict", into: new(StreamMode), in: "strict"},
		{name: "stream relaxed", into: new(StreamMode), in: "relaxed"},
		{name: "stream empty is the default", into: new(StreamMode), in: ""},
		{name: "stream bad", into: new(StreamMode), in: "buffered", wantErr: `expected strict or relaxed, got "buffered"`},
		{name: "stream case matters", into: new(StreamMode), in: "Strict", wantErr: `expected strict or relaxed, got "Strict"`},
		{name: "violation pass", into: new(ViolationMode), in: "pass"},
		{name: "violation bad", into: new(ViolationMode), in: "warn", wantErr: `expected error or pass, got "warn"`},
		{name: "implied off", into: new(ImpliedMode), in: "off"},
		{name: "implied strict", into: new(ImpliedMode), in: "strict"},
		{name: "implied send", into: new(ImpliedMode), in: "send"},
		{name: "implied bad", into: new(ImpliedMode), in: "always", wantErr: `expected off, guess, send or strict, got "always"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.into.UnmarshalText([]byte(tt.in))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("UnmarshalText(%q) = %v, want nil", tt.in, err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("UnmarshalText(%q) = %v, want %q", tt.in, err, tt.wantErr)
			case tt.wantErr == "":
				if got := reflect.ValueOf(tt.into).Elem().String(); got != tt.in {
					t.Errorf("UnmarshalText(%q) set %q", tt.in, got)
				}
			}
		})
	}
}

// Derivations decodes each table value as JSON when it is JSON, else keeps
// the string; ImpliedOff honours both keys.
func TestConfigDerivationsAndImpliedOff(t *testing.T) {
	c := Config{Derive: []DeriveRule{{At: "/a", Field: "f", From: "g", Table: map[string]string{"x": "1", "y": "true", "z": "plain", "q": `"q"`}}}}
	want := []Derivation{{At: "/a", Field: "f", From: "g", Table: map[string]any{"x": 1.0, "y": true, "z": "plain", "q": "q"}}}
	if got := c.Derivations(); !reflect.DeepEqual(got, want) {
		t.Errorf("Derivations = %+v, want %+v", got, want)
	}
	off := false
	for _, tt := range []struct {
		c    Config
		want bool
	}{{Config{}, false}, {Config{Implied: ImpliedNone}, true}, {Config{ImpliedSchemas: &off}, true}, {Config{Implied: ImpliedStrict}, false}} {
		if got := tt.c.ImpliedOff(); got != tt.want {
			t.Errorf("%+v.ImpliedOff() = %v, want %v", tt.c, got, tt.want)
		}
	}
}
