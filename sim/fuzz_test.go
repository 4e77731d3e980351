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
