package pricing

import "testing"

// TestLookupCloudIDs: Claude ids of Bedrock and Vertex are priced as the
// Anthropic ids they name, unless listed themselves.
func TestLookupCloudIDs(t *testing.T) {
	tab := New([]Entry{{Model: "eu.anthropic.claude-haiku-4-5-20251001-v1:0", Price: Price{InputPerMTok: 1.1, OutputPerMTok: 5.5}}})
	sonnet, _ := tab.Lookup("claude-sonnet-4-5-20250929")
	for _, tc := range []struct {
		model string
		want  Price
		ok    bool
	}{
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", sonnet, true},
		{"anthropic.claude-sonnet-4-5-20250929-v1:0", sonnet, true},
		{"global.anthropic.claude-sonnet-4-5-20250929-v1:0", sonnet, true},
		{"claude-sonnet-4-5@20250929", sonnet, true},
		{"eu.anthropic.claude-haiku-4-5-20251001-v1:0", Price{InputPerMTok: 1.1, OutputPerMTok: 5.5}, true},
		{"meta.llama3-70b-instruct-v1:0", Price{}, false},
		{"gemini-2.5-pro@001", Price{}, false},
	} {
		if got, ok := tab.Lookup(tc.model); got != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v, %v", tc.model, got, ok, tc.want, tc.ok)
		}
	}
	if sonnet.IsZero() {
		t.Fatal("the built-in table has no claude-sonnet-4-5")
	}
}

func FuzzAnthropicID(f *testing.F) {
	for _, s := range []string{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5@20250929", "anthropic.x-v", "a.b.c", "@", "-v1:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, model string) {
		if id := anthropicID(model); len(id) > len(model) {
			t.Fatalf("anthropicID(%q) = %q, longer than the id", model, id)
		}
	})
}
