package responses

import (
	"strings"
	"testing"
)

// TestUsageDetailsRoundTrip: the usage's cached and reasoning counts are
// typed, and the other members of its details objects are written back
// (a same-format re-encoding loses no field).
func TestUsageDetailsRoundTrip(t *testing.T) {
	body := `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[],` +
		`"usage":{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1920,"audio_tokens":3},"output_tokens":500,` +
		`"output_tokens_details":{"reasoning_tokens":384,"future_tokens":1},"total_tokens":2548}}`
	r, err := ParseResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	u := r.Usage
	if u.InputTokens != 128 || u.CacheReadTokens != 1920 || u.OutputTokens != 500 || u.ReasoningTokens != 384 {
		t.Fatalf("usage = %+v, want input 128, cached 1920, output 500, reasoning 384", u)
	}
	out, err := EncodeResponse(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"usage":{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1920,"audio_tokens":3},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":384,"future_tokens":1},"total_tokens":2548`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("re-encoded body lacks %s:\n%s", want, out)
		}
	}
}
