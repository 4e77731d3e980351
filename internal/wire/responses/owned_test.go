package responses

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
	ownedBody  = `{"model":"m","input":"hi","prompt_cache_key":{"a":1}}`
	ownedExtra = "prompt_cache_key"
)

// ownedAnswerMatches fails t unless ParseResponseOwned reads body exactly
// as ParseResponse does (result or error) and leaves body as it was.
func ownedAnswerMatches(t *testing.T, body []byte) {
	t.Helper()
	want, werr := ParseResponse(body)
	in := bytes.Clone(body)
	got, gerr := ParseResponseOwned(in)
	if !bytes.Equal(in, body) {
		t.Fatalf("ParseResponseOwned modified its body: %q, was %q", in, body)
	}
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("ParseResponseOwned error %v, ParseResponse's %v", gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseResponseOwned (-got +want):\n-%#v\n+%#v", got, want)
	}
}

// TestParseResponseCopiesOwnedAliases is TestParseRequestCopiesOwnedAliases
// for answers.
func TestParseResponseCopiesOwnedAliases(t *testing.T) {
	body := []byte(ownedAnswer)
	r, err := ParseResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	want := string(r.Extra[ownedExtra])
	clear(body)
	if got := string(r.Extra[ownedExtra]); got != want {
		t.Errorf("ParseResponse's Extra[%q] changed with its caller's buffer: %q, was %q", ownedExtra, got, want)
	}
	body = []byte(ownedAnswer)
	r, err = ParseResponseOwned(body)
	if err != nil {
		t.Fatal(err)
	}
	raw := r.Extra[ownedExtra]
	if i := bytes.Index(body, raw); i < 0 || &body[i] != &raw[0] {
		t.Errorf("ParseResponseOwned's Extra[%q] is a copy, not a slice of the body", ownedExtra)
	}
}

// ownedAnswer is an answer with an unknown member (kept in Extra).
const ownedAnswer = `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2},"prompt_cache_key":{"a":1}}`
