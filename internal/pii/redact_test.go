package pii

import (
	"strings"
	"testing"
)

func testRedaction() *Redaction {
	r := NewRedaction()
	r.Placeholder(Email, "alice@example.com")
	r.Placeholder(Phone, "+1 415 555 0100")
	r.Placeholder(Email, "bob@example.org")
	r.Placeholder(CNID, `11010519491231002X "q"`)
	for i := 0; i < 9; i++ { // [SSN_1] … [SSN_10]: a placeholder that is a prefix of none
		r.Placeholder(SSN, strings.Repeat("1", i+1))
	}
	r.Placeholder(SSN, "078-05-1120")
	return r
}

func TestPlaceholdersConsistentWithinACall(t *testing.T) {
	r := NewRedaction()
	a := r.Placeholder(Email, "a@x.com")
	b := r.Placeholder(Email, "b@x.com")
	if again := r.Placeholder(Email, "a@x.com"); again != a || a != "[EMAIL_1]" || b != "[EMAIL_2]" {
		t.Fatalf("placeholders %q %q %q, want [EMAIL_1] [EMAIL_2] [EMAIL_1]", a, b, again)
	}
	if p := r.Placeholder(Phone, "a@x.com"); p != "[PHONE_1]" {
		t.Fatalf("another kind's first value is %q, want [PHONE_1]", p)
	}
	got := Replace("mail a@x.com or b@x.com", []Match{{Email, 5, 12}, {Email, 16, 23}}, r.Placeholder)
	if got != "mail [EMAIL_1] or [EMAIL_2]" {
		t.Fatalf("Replace = %q", got)
	}
	if back := r.Restore(got); back != "mail a@x.com or b@x.com" {
		t.Fatalf("Restore = %q", back)
	}
}

func TestRestoreJSONEscapesValues(t *testing.T) {
	r := testRedaction()
	got := r.RestoreJSON(`{"id":"[CN_ID_1]","e":"[EMAIL_1]"}`)
	want := `{"id":"11010519491231002X \"q\"","e":"alice@example.com"}`
	if got != want {
		t.Fatalf("RestoreJSON = %s, want %s", got, want)
	}
}

// TestRestorerEverySplitPoint streams a text cut at every pair of split
// points and checks the restored text is exactly the one-piece restoration,
// and that nothing longer than a placeholder is ever held.
func TestRestorerEverySplitPoint(t *testing.T) {
	r := testRedaction()
	texts := []struct {
		name string
		text string
		mode RestoreMode
		want string
	}{
		{"text", "Write to [EMAIL_1] or [PHONE_1]; [EMAIL_2] [SSN_10] [SSN_1] [x] [EMAIL_9] [[EMAIL_1]]", RestoreText,
			"Write to alice@example.com or +1 415 555 0100; bob@example.org 078-05-1120 1 [x] [EMAIL_9] [alice@example.com]"},
		{"json", `{"who":"[CN_ID_1]","mail":"[EMAIL_1]","n":[1,2]}`, RestoreAuto,
			`{"who":"11010519491231002X \"q\"","mail":"alice@example.com","n":[1,2]}`},
		{"trailing prefix", "ends with [EMAI", RestoreText, "ends with [EMAI"},
	}
	for _, tc := range texts {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i <= len(tc.text); i++ {
				for j := i; j <= len(tc.text); j++ {
					s := r.NewRestorer(tc.mode)
					var sb strings.Builder
					for _, piece := range []string{tc.text[:i], tc.text[i:j], tc.text[j:]} {
						sb.WriteString(s.Write(piece))
						if len(s.Held()) >= r.maxLen {
							t.Fatalf("split %d,%d: held %q, longer than any placeholder", i, j, s.Held())
						}
					}
					sb.WriteString(s.Flush())
					if got := sb.String(); got != tc.want {
						t.Fatalf("split %d,%d: got %q, want %q", i, j, got, tc.want)
					}
				}
			}
		})
	}
}

func TestRestorerPassesTextWithoutPlaceholdersUnchanged(t *testing.T) {
	s := testRedaction().NewRestorer(RestoreText)
	for _, d := range []string{"plain ", "words ", "and [brackets] too"} {
		if got := s.Write(d); got != d {
			t.Fatalf("Write(%q) = %q", d, got)
		}
	}
}

// A prompt that already holds text shaped like a placeholder ("[EMAIL_1]"
// written by the user) keeps it: the call's placeholders skip it, so the
// answer never has the user's literal restored to a value.
func TestPlaceholdersSkipTextAlreadyInThePrompt(t *testing.T) {
	r := NewRedaction()
	r.Reserve("the template says [EMAIL_1] and [PHONE_2]")
	if p := r.Placeholder(Email, "a@x.com"); p != "[EMAIL_2]" {
		t.Fatalf("first email placeholder %q, want [EMAIL_2] ([EMAIL_1] is the user's)", p)
	}
	if got := r.Restore("[EMAIL_1] [EMAIL_2]"); got != "[EMAIL_1] a@x.com" {
		t.Fatalf("Restore = %q", got)
	}
}

// FuzzRestorer: however a text is cut into deltas, the streamed
// restoration equals the one-piece restoration, and what is held back is
// always shorter than a placeholder.
func FuzzRestorer(f *testing.F) {
	for _, s := range []string{"Write to [EMAIL_1] or [PHONE_1]; [SSN_10] [SSN_1] [x] [EMAIL_9] [[EMAIL_1]]", `{"who":"[CN_ID_1]"}`, "ends with [EMAI", "[", "]]]["} {
		f.Add(s, uint8(3), uint8(7))
	}
	r := testRedaction()
	f.Fuzz(func(t *testing.T, text string, a, b uint8) {
		i, j := int(a)%(len(text)+1), int(b)%(len(text)+1)
		if i > j {
			i, j = j, i
		}
		s := r.NewRestorer(RestoreText)
		var sb strings.Builder
		for _, piece := range []string{text[:i], text[i:j], text[j:]} {
			sb.WriteString(s.Write(piece))
			if len(s.Held()) >= r.maxLen {
				t.Fatalf("held %q", s.Held())
			}
		}
		sb.WriteString(s.Flush())
		if got, want := sb.String(), r.Restore(text); got != want {
			t.Fatalf("split %d,%d of %q: got %q, want %q", i, j, text, got, want)
		}
	})
}
