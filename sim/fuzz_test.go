package sim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func FuzzParseFaults(f *testing.F) {
	for _, s := range []string{
		`[]`,
		`[{"kind":"rate_limit","count":2,"retry_after":"1500ms","region":"us-east","format":"openai"}]`,
		`[{"kind":"slow","rate":0.5,"factor":3},{"kind":"stream_cut","after_tokens":4,"stream":true}]`,
		`[{"kind":"server_error","status":503,"model":"sim-opus"}]`,
		`[{"kind":"slow_stream","rate":0.05,"after_tokens":10,"factor":10,"region":"eu-west"}]`,
		`[{"kind":"meteor"}]`,
		`[{"kind":"reset","retry_after":12}]`,
		`{"kind":"reset"}`,
		`[{"kind":"hang"}] trailing`,
	} {
		f.Add(s)
	}
	fleet, err := New(ZeroLatency())
	if err != nil {
		f.Fatal(err)
	}
	h := fleet.Handler()
	f.Fuzz(func(t *testing.T, body string) {
		fs, err := ParseFaults([]byte(body))
		if err == nil {
			if err := fleet.SetFaults(fs); err != nil {
				t.Fatalf("ParseFaults accepted what SetFaults rejects: %v", err)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/sim/faults", strings.NewReader(body)))
		if want := map[bool]int{true: 200, false: 400}[err == nil]; w.Code != want {
			t.Fatalf("POST /sim/faults %q: status %d, want %d", body, w.Code, want)
		}
	})
}

// FuzzCacheControl: any cache_control value is a breakpoint, nothing
// (null) or a 400 in Anthropic's shape, never a panic; a breakpoint's TTL
// is 5 minutes or an hour.
func FuzzCacheControl(f *testing.F) {
	for _, s := range []string{
		`{"type":"ephemeral"}`, `{"type":"ephemeral","ttl":"5m"}`, `{"type":"ephemeral","ttl":"1h"}`,
		`{"type":"ephemeral","ttl":"2h"}`, `{"type":"persistent"}`, `null`, `[]`, `"x"`, `{"type":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		bp, ae := parseCacheControl([]byte(raw))
		switch {
		case ae != nil:
			if ae.Status != http.StatusBadRequest || bp != nil {
				t.Fatalf("%q: error %+v with breakpoint %v", raw, ae, bp)
			}
		case bp != nil:
			if bp.ttl != ttl5m && bp.ttl != ttl1h {
				t.Fatalf("%q: ttl %v", raw, bp.ttl)
			}
		case raw != "null":
			t.Fatalf("%q: neither a breakpoint nor an error", raw)
		}
	})
}
