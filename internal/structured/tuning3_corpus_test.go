package structured

import "testing"

const (
	tuning3Positives = "testdata/implied_positive_tuning3.txt"
	tuning3Negatives = "testdata/implied_negative_tuning3.txt"
)

// TestImpliedTuning3Corpus runs ExtractConstraints over phrasings the
// reader's engineer wrote from scratch in session 8 (testdata/
// implied_*_tuning3.txt), in sixteen batches, each written before the
// reader was changed for it and measured once first: 13/43, 26/33, 17/20,
// 12/18, 12/17, 9/12, 5/6, 9/11, 10/12, 5/12, 6/12, 14/14, 12/12, 10/10,
// 8/10 and 6/8 exact key sets, with 3, 3, 1, 2, 2, 0, 0, 1, 0, 0, 0, 0, 0,
// 0, 0 and 0 false schemas;
// 13 more negatives aimed at the new demand rules first gave 3, and 8
// with JSON as an attribute ("JSON examples") 4, and 15 in the second
// held-out corpus's manner 1 ("tracked as a JSON object with keys …"). The
// first
// batch ran on the reader before any change, each later one after the
// changes the earlier ones led to: an estimate of how the reader does on
// phrasings it has not seen, biased because their author knew the reader
// and aimed at its gaps. They cover, in new words and domains, the kinds of
// phrasing the second held-out corpus missed — key lists after "with:",
// "—" or "：", typed items ("a (string)", "name（字符串）"), counted nouns
// ("three lists:"), numbered steps, key lines under a demand, markdown
// tables, tolerant example objects — and distractors: the fields of the
// input, a tool's arguments, JSON as a topic or a likeness. A tuning set:
// the reader must read all of it (the exact key set and the stated types),
// and no negative may yield a schema.
func TestImpliedTuning3Corpus(t *testing.T) {
	measureHeldOut(t, tuning3Positives, tuning3Negatives, 250, 180, 1, 0)
	for _, p := range readPhrasings(t, tuning3Positives) {
		if im, ok := ExtractConstraints(p.prompt); ok && sameKeys(im.Required, p.required) && !typesMatch(t, im, p.types) {
			t.Errorf("%s: schema %s, want types %v", p.name, im.Schema, p.types)
		}
	}
}
