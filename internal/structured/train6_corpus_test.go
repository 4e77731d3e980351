package structured

import "testing"

const (
	train6Positives = "testdata/implied_positive_train6.txt"
	train6Negatives = "testdata/implied_negative_train6.txt"
)

// TestImpliedTrain6Corpus runs ExtractConstraints over a tuning corpus
// (testdata/implied_*_train6.txt) written naturally in session 10 for issue
// 25, build item 2, as training data for the engineer improving the reader
// (branch reader6). Its author read only the format (the first 40 lines of
// the heldout5 corpus files, readPhrasings, measureHeldOut, typesMatch),
// never the reader's source nor the blind6 corpus, and wrote the cases
// before running the reader on them. It is a TUNING set, not a blind one:
// its figures say what the reader reaches on phrasings it may be tuned on,
// not how it generalises.
//
// 309 positives (154 English, 155 Chinese) and 101 negatives (51 English,
// 50 Chinese). Positives span support, RAG, extraction, moderation,
// classification, grading, agents, code review, SQL, translation, finance,
// HR, medicine, law, 客服, 电商, 医疗, 政务, 教育, 金融 and 游戏, in the
// shapes readers find hard: keys named before the demand, counted fields,
// 、-separated and unseparated Chinese lists, bullets, numbered lists,
// Markdown tables, inline and fenced examples, JSON Schema, TypeScript,
// Pydantic, zod and Go structs, optional and nested keys, long
// multi-section prompts. Negatives mention JSON, fields, keys, schemas,
// tables or parameters in other senses.
//
// First sight (session 9's reader, before the key scorer was fit on it):
// 204/309 = 66.0 %, 2 false schemas, both sure (a table's optional row
// read as required; "names" read from a paragraph describing the fields),
// 0 on the negatives. With a scorer fit without it (leave one corpus out)
// 209/309 = 67.6 %, 0 false sure; fit with it (session 10, reader6)
// 221/309 = 71.5 %, 0 false schemas: the floor this test guards. minPos and
// minNeg guard against a truncated file.
func TestImpliedTrain6Corpus(t *testing.T) {
	measureHeldOut(t, train6Positives, train6Negatives, 300, 100, 0.71, 0)
}
