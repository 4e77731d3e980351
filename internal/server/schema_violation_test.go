package server

import (
	"testing"

	"github.com/keelmesh/keel/internal/callrec"
)

// X-Mesh-Schema-Violation names the keys an answer delivered as the model
// gave it was checked against (issue 25): comma-separated, non-ASCII keys
// percent-encoded so every client's HTTP stack reads the header; "true"
// for a schema without keys (JSON mode).
func TestSchemaViolationHeader(t *testing.T) {
	for _, tc := range []struct {
		required []string
		want     string
	}{
		{[]string{"question", "answer"}, "question,answer"},
		{[]string{"姓名", "phone"}, "%E5%A7%93%E5%90%8D,phone"},
		{[]string{"a,b", "50%"}, "a%2Cb,50%25"},
		{nil, "true"},
	} {
		rec := &callrec.Record{Structured: &callrec.Structured{Contract: &callrec.StructuredTrace{Required: tc.required}}}
		if got := SchemaViolationHeader(rec); got != tc.want {
			t.Errorf("keys %q: header %q, want %q", tc.required, got, tc.want)
		}
	}
	if got := SchemaViolationHeader(&callrec.Record{}); got != "true" {
		t.Errorf("no schema record: %q", got)
	}
}
