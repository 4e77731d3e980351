package structured

import "testing"

const (
	heldOut3Positives = "testdata/implied_positive_heldout3.txt"
	heldOut3Negatives = "testdata/implied_negative_heldout3.txt"
)

// TestImpliedHeldOut3Corpus measures ExtractConstraints on a third corpus
// (testdata/implied_*_heldout3.txt), written by another engineer. Blind
// figure, measured ONCE in session 8 on the reader of branch reader3:
// recall 151/196 = 77.0 %, 17 false schemas — 4 positives read with keys
// missing and sent upstream (sure), and 13 of 93 negatives: 1 sure (the
// fields of a dict a Python function receives), 10 keyless JSON demands
// ({}, {"type":"object"}, {"type":"array"}), 2 Chinese prose read as keys.
//
// It is a tuning set since (branch reader4): a keyless JSON demand is no key
// schema (ExtractJSONDemand reports it), Chinese prose is no key, Sure needs
// a closed and complete key span (closedSpan), a clause asking for code is
// no demand; keys are read from a parenthesised list after JSON, from "a
// subject field and a body field", from "name（商品名）、price（价格）" lists,
// after terse demands ("Format: JSON object.", "JSON output with …", "When
// the player declares an action, reply in JSON …", "…并返回 JSON"), and the
// keys a partial reading left out in its own clause ("(key: pros)", "and
// preferences arrays") are added, never sure. With that reader: 167/196 =
// 85.2 %, 147 sure, 0 false schemas. The floor below is what it reaches.
//
// Session 9 (branch reader5): the key scorer, the rules' fallback, is fit on
// the tuning corpora, this one included: 183/196 = 93.4 %, 141 sure, 0
// false. Fit without this corpus (TestKeyScorerLeaveOneCorpusOut) it reads
// 14 of the 23 prompts the rules read no key from, 0 false, i.e. about
// 181/196 = 92.3 % for phrasings like these it was not fit on.
func TestImpliedHeldOut3Corpus(t *testing.T) {
	measureHeldOut(t, heldOut3Positives, heldOut3Negatives, 190, 85, 0.93, 0)
}
