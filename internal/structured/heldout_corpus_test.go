package structured

import (
	"slices"
	"testing"
	"time"
)

const (
	heldOutPositives  = "testdata/implied_positive_heldout.txt"
	heldOutNegatives  = "testdata/implied_negative_heldout.txt"
	heldOut2Positives = "testdata/implied_positive_heldout2.txt"
	heldOut2Negatives = "testdata/implied_negative_heldout2.txt"
)

// TestImpliedHeldOutCorpus measures ExtractConstraints on a held-out corpus
// (testdata/implied_*_heldout.txt): phrasings written before their author
// read the reader, and never edited after its results were seen, so the
// figures were not biased by tuning as the fresh corpus's are — until the
// reader was tuned on its misses (branch reader; BENCHMARKS.md): it is now
// a tuning set, and a second blind corpus measures the reader. Issue 25,
// build item 2: recall ≥ 95 % (the expected key set exactly) and 0 false
// schemas (a schema from a negative, or a sure schema, the kind Keel sends
// upstream, with keys other than the expected ones). Also logs how many hits
// are sure, the hits whose stated types match too, and µs per prompt.
func TestImpliedHeldOutCorpus(t *testing.T) {
	measureHeldOut(t, heldOutPositives, heldOutNegatives, 80, 40, 0.95, 0)
}

// TestImpliedHeldOut2Corpus runs ExtractConstraints over the second held-out
// corpus (testdata/implied_*_heldout2.txt), written blind while the reader
// was being improved against the other corpora: its author never opened
// extract.go nor saw the reader's results on these cases. About 55 English
// and 35 Chinese positives across legal, medical, gaming, logistics, HR,
// e-commerce, education and devops prompts, and negatives that mention
// JSON, YAML, CSV, fields, keys, schemas, APIs, tables or lists in other
// senses.
//
// Measured once, blind, in session 7: recall 64/92 = 69.6 %, 1 false schema
// (a markdown table's header cells read as sure keys). In session 8 (branch
// reader3) the reader was changed while reading its misses, so it is now a
// TUNING set like the others, and this test guards what the tuned reader
// reaches (92/92, 0 false schemas); it no longer measures generalisation.
// The figure that counts is the one measured once on the third blind corpus
// (implied_*_heldout3*).
func TestImpliedHeldOut2Corpus(t *testing.T) {
	measureHeldOut(t, heldOut2Positives, heldOut2Negatives, 90, 50, 1, 0)
}

// measureHeldOut runs ExtractConstraints over a held-out corpus, logs
// recall, sure hits, typed hits, false schemas and µs per prompt, and fails
// below 95 % recall or on any false schema. minPos and minNeg guard against
// a truncated corpus file.
func measureHeldOut(t *testing.T, posPath, negPath string, minPos, minNeg int, minRecall float64, maxFalse int) {
	t.Helper()
	pos := readPhrasings(t, posPath)
	neg := readPhrasings(t, negPath)
	if len(pos) < minPos || len(neg) < minNeg {
		t.Fatalf("held-out corpus too small: %d positives, %d negatives; want ≥ %d and ≥ %d", len(pos), len(neg), minPos, minNeg)
	}
	hits, sure, typed, falseSchemas := 0, 0, 0, 0
	for _, p := range pos {
		if len(p.required) == 0 {
			t.Fatalf("positive %s has no expected keys", p.name)
		}
		im, ok := ExtractConstraints(p.prompt)
		if !ok {
			t.Logf("MISS %s: no schema, want %q", p.name, p.required)
			continue
		}
		if !sameKeys(im.Required, p.required) {
			if im.Sure {
				falseSchemas++
				t.Logf("FALSE SCHEMA %s: sure schema %s, want keys %q", p.name, im.Schema, p.required)
			} else {
				t.Logf("MISS %s: keys %q (not sure, not sent) read from %q, want %q", p.name, im.Required, im.Sentence, p.required)
			}
			continue
		}
		hits++
		if im.Sure {
			sure++
		} else {
			t.Logf("NOT SURE %s: keys %q right but not sent upstream", p.name, im.Required)
		}
		if typesMatch(t, im, p.types) {
			typed++
		} else {
			t.Logf("TYPES %s: schema %s, want types %v", p.name, im.Schema, p.types)
		}
	}
	for _, n := range neg {
		if im, ok := ExtractConstraints(n.prompt); ok {
			falseSchemas++
			t.Logf("FALSE SCHEMA %s: %s (sure %v) from %q", n.name, im.Schema, im.Sure, im.Sentence)
		}
	}
	all := make([]string, 0, len(pos)+len(neg))
	for _, p := range pos {
		all = append(all, p.prompt)
	}
	for _, n := range neg {
		all = append(all, n.prompt)
	}
	// The µs figure is a wall-clock mean over 20 rounds; under the race
	// detector it means nothing and the rounds dominated the package's
	// -race time (376 s in CI), so none there (every prompt was read
	// above): the figure is logged as 0.
	rounds := 20
	if raceEnabled {
		rounds = 0
	}
	start := time.Now()
	for range rounds {
		for _, p := range all {
			ExtractConstraints(p)
		}
	}
	us := 0.0
	if rounds > 0 {
		us = float64(time.Since(start).Microseconds()) / float64(rounds*len(all))
	}
	recall := float64(hits) / float64(len(pos))
	t.Logf("held-out implied-schema corpus %s: recall %d/%d = %.1f %% (exact key set), sure (sent upstream) %d, keys and types %d, false schemas %d (%d negatives), %.1f µs per prompt",
		posPath, hits, len(pos), 100*recall, sure, typed, falseSchemas, len(neg), us)
	if recall < minRecall {
		t.Errorf("recall %.1f %% < %.0f %%", 100*recall, 100*minRecall)
	}
	if falseSchemas > maxFalse {
		t.Errorf("%d false schemas, want at most %d", falseSchemas, maxFalse)
	}
}

// sameKeys reports whether got and want hold the same keys, in any order.
func sameKeys(got, want []string) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// TestSameKeys pins the comparison the held-out recall is measured with.
func TestSameKeys(t *testing.T) {
	for _, c := range []struct {
		got, want []string
		same      bool
	}{
		{[]string{"a", "b"}, []string{"b", "a"}, true},
		{[]string{"a"}, []string{"a", "b"}, false},
		{[]string{"a", "a"}, []string{"a", "b"}, false},
		{nil, nil, true},
	} {
		if got := sameKeys(c.got, c.want); got != c.same {
			t.Errorf("sameKeys(%q, %q) = %v, want %v", c.got, c.want, got, c.same)
		}
	}
}

// BenchmarkExtractConstraintsHeldOutCorpus: one op is one prompt of the
// held-out corpus (positives and negatives in turn).
func BenchmarkExtractConstraintsHeldOutCorpus(b *testing.B) {
	var all []string
	for _, path := range []string{heldOutPositives, heldOutNegatives} {
		for _, p := range readPhrasings(b, path) {
			all = append(all, p.prompt)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ExtractConstraints(all[i%len(all)])
		i++
	}
}
