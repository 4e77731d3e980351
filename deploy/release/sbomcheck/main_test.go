package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const goodBOM = `{"bomFormat":"CycloneDX","specVersion":"1.5",
 "metadata":{"component":{"type":"application","name":"github.com/keelmesh/keel","version":"v0.0.0"}},
 "components":[
  {"type":"library","name":"github.com/goccy/go-yaml","version":"v1.19.2","purl":"pkg:golang/github.com/goccy/go-yaml@v1.19.2?type=module"},
  {"type":"library","name":"github.com/spf13/cobra","version":"v1.10.2","purl":"pkg:golang/github.com/spf13/cobra@v1.10.2?goarch=amd64&goos=linux&type=module"}]}`

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		data     string
		required []string
		wantN    int
		wantErr  string
	}{
		{"all present", goodBOM, []string{"github.com/goccy/go-yaml@v1.19.2", "github.com/spf13/cobra@v1.10.2"}, 2, ""},
		{"missing module", goodBOM, []string{"github.com/redis/go-redis/v9@v9.23.0"}, 0, "github.com/redis/go-redis/v9 is not a component"},
		{"other version", goodBOM, []string{"github.com/spf13/cobra@v1.10.3"}, 0, "component version v1.10.2, go.mod requires v1.10.3"},
		{"not JSON", `{"bomFormat":`, nil, 0, "not JSON"},
		{"not CycloneDX", `{"bomFormat":"SPDX","metadata":{"component":{"name":"github.com/keelmesh/keel"}}}`, nil, 0, "not a CycloneDX document"},
		{"other main module", strings.Replace(goodBOM, "keelmesh/keel", "someone/else", 1), nil, 0, "metadata.component.name"},
		{"purl of another version", strings.Replace(goodBOM, "cobra@v1.10.2?", "cobra@v1.10.20?", 1), []string{"github.com/spf13/cobra@v1.10.2"}, 0, "purl"},
		{"bad purl", strings.Replace(goodBOM, "pkg:golang/github.com/spf13", "pkg:npm/spf13", 1), []string{"github.com/spf13/cobra@v1.10.2"}, 0, "purl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := check([]byte(tc.data), "github.com/keelmesh/keel", tc.required)
			if tc.wantErr == "" {
				if err != nil || n != tc.wantN {
					t.Fatalf("check = %d, %v; want %d, nil", n, err, tc.wantN)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("check error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzCheck: any input gets an answer, never a panic, and only valid JSON
// passes.
func FuzzCheck(f *testing.F) {
	f.Add(goodBOM)
	f.Add(`{"bomFormat":`)
	f.Add(`{"bomFormat":"SPDX","metadata":{"component":{"name":"github.com/keelmesh/keel"}}}`)
	f.Fuzz(func(t *testing.T, data string) {
		if _, err := check([]byte(data), "github.com/keelmesh/keel", []string{"github.com/spf13/cobra@v1.10.2"}); err == nil && !json.Valid([]byte(data)) {
			t.Errorf("passed invalid JSON: %q", data)
		}
	})
}
