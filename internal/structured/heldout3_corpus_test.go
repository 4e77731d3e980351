package structured

import "testing"

const (
	heldOut3Positives = "testdata/implied_positive_heldout3.txt"
	heldOut3Negatives = "testdata/implied_negative_heldout3.txt"
)

// TestImpliedHeldOut3Corpus measures ExtractConstraints on a third held-out
// corpus (testdata/implied_*_heldout3.txt), written blind for issue 25,
// build item 2: its author read only heldout_corpus_test.go, readPhrasings,
// typesMatch and the first 8 lines of the heldout2 files, never extract.go,
// lex.go or any other non-test source of the package, no other corpus, no
// BENCHMARKS.md section about the reader, and never ran the reader on these
// cases. 112 English and 84 Chinese positives, system prompts for support,
// finance, code review, medical, legal, games, HR, retail, education,
// travel, IoT, translation, extraction, agents, classification, moderation
// and summarisation, in many styles (one-liners, long role-and-rules
// prompts, bullet, numbered, dash and table field lists, "Required:",
// "Fields:", "Keys:" headers, "containing"/"include" after a JSON sentence,
// counted fields, example objects inline and fenced, JSON Schema and
// TypeScript shapes, keys bare, quoted or in backticks, full-width
// punctuation, Chinese keys, mixed EN/ZH); 53 English and 40 Chinese
// negatives that mention JSON, YAML, CSV, XML, fields, keys, schemas, APIs,
// tools, tables, columns or forms in other senses, or ask for JSON without
// naming keys. The targets: recall ≥ 95 % (the expected key set
// exactly) and 0 false schemas.
//
// Measured once, blind, on the session-8 reader (branch reader3: the span
// reader of answer.go, tuned on heldout2 and tuning3): recall 151/196 =
// 77.0 %, 17 false schemas — 5 of them sure (sent upstream: 4 positives
// read with keys missing, one Python-function negative), 12 guesses never
// sent, 9 of those keyless ("Respond only in valid JSON.", "a JSON array
// of strings"). The target is MISSED; BENCHMARKS.md and the issue note say
// so. This test guards the measured floor against regression (recall ≥
// 77 %, at most 17 false schemas); it is not the target. The corpus stops
// being blind as soon as the reader is changed while reading its misses.
func TestImpliedHeldOut3Corpus(t *testing.T) {
	measureHeldOut(t, heldOut3Positives, heldOut3Negatives, 190, 85, 0.77, 0)
}
