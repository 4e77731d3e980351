package structured

import "testing"

const (
	heldOut4Positives = "testdata/implied_positive_heldout4.txt"
	heldOut4Negatives = "testdata/implied_negative_heldout4.txt"
)

// TestImpliedHeldOut4Corpus measures ExtractConstraints on a fourth held-out
// corpus (testdata/implied_*_heldout4.txt), written blind for issue 25, build
// item 2: its author read only the first 8 lines of the heldout2 corpus files
// (for the format), measureHeldOut, readPhrasings and typesMatch; never
// extract.go, answer.go, lex.go or any other non-test source of this package,
// never another corpus, BENCHMARKS.md's sections on the implied reader or an
// earlier held-out run, and never ran the reader on these cases before
// committing them. 174 positives (101 English, 73 Chinese) written the way
// support bots, RAG apps, extraction pipelines, moderation and
// classification services, LLM-as-judge graders, agents, coding assistants
// and Chinese chat apps write system prompts: one-liners to long prompts;
// "Required:", "Fields:", "Output format:" and 【输出格式】 headers; bullets,
// numbered steps, Markdown tables; inline and fenced example objects, JSON
// Schema, TypeScript and Pydantic shapes; counted fields in both languages;
// keys before or after the JSON demand, bare, quoted or in backticks, in
// snake_case, camelCase or Chinese. 73 negatives (42 English, 31 Chinese)
// mention JSON, YAML, CSV, XML, fields, keys, schemas, APIs, tool
// parameters, table columns, forms or example objects in other senses, or
// ask for JSON or a JSON array without naming keys; the hard ones name the
// input's fields, a tool's arguments, a table's columns, the keys of code
// that builds JSON, or a YAML, XML or CSV answer's fields.
//
// The targets are the issue's: recall ≥ 95 % (the expected key set exactly)
// and 0 false schemas. The cases must never be edited after the reader's
// results on them are seen; once the reader is changed while reading its
// misses here, this corpus is a tuning set and a new blind one is needed.
//
// Measured once, blind, on the session-8 reader after its safety pass
// (branch reader4: sure only for a closed, complete key list; no keyless
// schemas): recall 135/174 = 77.6 %, 6 false schemas, all SURE (sent
// upstream): 5 positives read with a key missing (flagged, categories
// without severity; original, corrected without changes; a markdown table
// read in part; overall, clarity, accuracy without helpfulness; a Chinese
// receipt's item keys instead of store, items, total) and one negative
// (keys kept unchanged while translating a document). The target is
// MISSED, and the sure-but-partial reading is the defect that matters
// (STYLE rule 23): BENCHMARKS.md and the issue note say so. This test
// guards the measured floor; it is not the target.
//
// Session 9 (branch reader5) used it as the validation set of a new Sure
// rule (complete.go: a sure reading needs positive evidence that its key
// list is whole), written from fresh phrasings of the six cases' kinds, not
// from the cases: first sight on that reader, before reading any case here,
// recall 135/174 = 77.6 %, 116 sure, 3 false schemas (all sure: the bullet
// list whose note holds "e.g.", "(fields: …, helpfulness — each …)", the
// receipt's "items（…包含 name 和 price）"). Those three were then read, and
// the rule now also asks that every bulleted line under a colon and every
// key written with a parenthesised note be read, and that a list not go on
// past a dash note: 135/174, 116 sure, 0 false. So this corpus is a tuning
// set for safety; its recall misses were not read (only the session-8
// reader's miss names, expected keys and some sentences it read had been
// glimpsed in a log).
//
// It then validated the key scorer (keyscore.go, the rules' fallback, fit
// on the other tuning corpora, never on this one), run ONCE before any of
// its misses were read: recall 145/174 = 83.3 % (from 77.6 %), 116 sure, 0
// false schemas on 73 negatives.
//
// Its misses were then read, and it is a TUNING set for recall too: it
// joined the corpora the scorer is fit on (tuningCorpora), the loose demand
// gate learned "report back as", "Use a JSON object", "解析为 JSON",
// "json.dumps(…)" (code), "text", "date", "value" and "reply" became
// candidates again, and the scorer is fit by logistic regression. Fit
// without it (TestKeyScorerLeaveOneCorpusOut) the scorer reads 15 of the 29
// prompts the rules read no key from, 0 false: about 150/174 = 86.2 % for
// phrasings it was not fit on. Fit with it: 158/174 = 90.8 %, 116 sure, 0
// false; the floor is that reader's.
func TestImpliedHeldOut4Corpus(t *testing.T) {
	measureHeldOut(t, heldOut4Positives, heldOut4Negatives, 170, 70, 0.90, 0)
}

// BenchmarkExtractConstraintsHeldOut4Corpus: one op is one prompt of the
// fourth held-out corpus, positives and negatives in turn (its negatives
// mention JSON in other senses: the prompts that reach the key scorer).
func BenchmarkExtractConstraintsHeldOut4Corpus(b *testing.B) {
	var all []string
	for _, path := range []string{heldOut4Positives, heldOut4Negatives} {
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
