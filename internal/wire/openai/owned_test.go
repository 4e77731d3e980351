package openai

import (
	"bytes"
	"reflect"
	"testing"
)

// ownedMatches fails t unless ParseRequestOwned reads body exactly as
// ParseRequest does (result or error) and leaves body as it was.
func ownedMatches(t *testing.T, body []byte) {
	t.Helper()
	want, werr := ParseRequest(body)
	in := bytes.Clone(body)
	got, gerr := ParseRequestOwned(in)
	if !bytes.Equal(in, body) {
		t.Fatalf("ParseRequestOwned modified its body: %q, was %q", in, body)
	}
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("ParseRequestOwned error %v, ParseRequest's %v", gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseRequestOwned (-got +want):\n-%#v\n+%#v", got, want)
	}
}

// TestParseRequestCopiesOwnedAliases: ParseRequest's result keeps none of
// its caller's buffer (the caller may reuse it), ParseRequestOwned's raw
// members are slices of the body it was handed (the copy it spares).
func TestParseRequestCopiesOwnedAliases(t *testing.T) {
	body := []byte(ownedBody)
	r, err := ParseRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	want := string(r.Extra[ownedExtra])
	clear(body)
	if got := string(r.Extra[ownedExtra]); got != want {
		t.Errorf("ParseRequest's Extra[%q] changed with its caller's buffer: %q, was %q", ownedExtra, got, want)
	}
	body = []byte(ownedBody)
	r, err = ParseRequestOwned(body)
	if err != nil {
		t.Fatal(err)
	}
	raw := r.Extra[ownedExtra]
	if i := bytes.Index(body, raw); i < 0 || &body[i] != &raw[0] {
		t.Errorf("ParseRequestOwned's Extra[%q] is a copy, not a slice of the body", ownedExtra)
	}
}

const (
	ownedBody  = `{"model":"m","messages":[{"role":"user","content":"hi"}],"prediction":{"type":"content","content":"x"}}`
	ownedExtra = "prediction"
)
