package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestMayStream(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"model":"m","max_tokens":5,"messages":[]}`, false},
		{`{"model":"m","stream":false}`, false},
		{`{"stream":null,"model":"m"}`, false},
		{`{"model":"m","stream":true}`, true},
		{` { "model" : "m" , "stream" : true } `, true},
		{`{"messages":[{"stream":true}],"model":"m"}`, false},
		{`{"metadata":{"stream":true}}`, false},
		{`{"model":"m","note":"\"stream\":true"}`, false},
		{`{"stream":1}`, true},
		{`{"model":"m",`, false},
		{`{"model" "m"}`, true},
		{`{model:"m"}`, true},
		{`[1,2]`, false},
		{``, false},
		{`not json`, false},
	} {
		if got := MayStream([]byte(tc.body)); got != tc.want {
			t.Errorf("MayStream(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

func FuzzMayStream(f *testing.F) {
	f.Add([]byte(`{"model":"m","stream":true}`))
	f.Add([]byte(`{"a":[{"b":"}"}],"stream":false}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := MayStream(b) // terminates on any input
		// No false negative on valid JSON: a streaming request must never
		// be buffered (escaped keys aside, which only cost incrementality).
		var m map[string]json.RawMessage
		if bytes.IndexByte(b, '\\') < 0 && json.Unmarshal(b, &m) == nil {
			if v, ok := m["stream"]; ok && string(bytes.TrimSpace(v)) == "true" && !got {
				t.Fatalf("MayStream(%s) = false for a streaming request", b)
			}
		}
	})
}
