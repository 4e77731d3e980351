package structured

import "testing"

const (
	heldOut6Positives = "testdata/implied_positive_heldout6.txt"
	heldOut6Negatives = "testdata/implied_negative_heldout6.txt"
)

// TestImpliedHeldOut6Corpus measures ExtractConstraints on a sixth held-out
// corpus (testdata/implied_*_heldout6.txt), written blind for issue 25, build
// item 2 (branch blind6), while another engineer improved the reader: its
// author read only the first 25 lines of the heldout5 corpus files (header
// comments and the first case, for the format), measureHeldOut,
// readPhrasings, typesMatch and TestImpliedHeldOut5Corpus's shape; never
// extract.go, answer.go, sure.go, nouns.go, lex.go, complete.go, keyscore*.go
// or any other non-test source of this package, never another corpus or
// testdata file, BENCHMARKS.md, the package's git history or another
// worktree, and never ran the reader or a corpus test on these cases before
// committing them.
//
// 175 positives (97 English, 78 Chinese) across support, RAG and its
// graders, LLM-as-judge, extraction (invoices, receipts, IDs, resumes,
// contracts, patents, medical notes, court judgments), moderation,
// classification, routing, grading, agent planning and tool selection, code
// review, SQL and Cypher generation, translation, summaries with metadata,
// e-commerce, finance, fraud, KYC, HR, education, security, logistics,
// gaming and Chinese apps (客服, 电商, 医疗, 法律, 政务, 教育, 金融, 游戏,
// 社交, 舆情, 物业, 保险): one-liners to long multi-section prompts with
// rules before and after the format; keys in prose lists (and, as well as,
// plus, 和, 及, 以及, 与, 、), named before the demand, in the same sentence
// as the input, single keys, counted fields in both languages, "Required:",
// bullets and numbered lists with descriptions, Markdown tables, inline and
// fenced example objects (placeholders, // comments, few-shot outputs), JSON
// Schema, TypeScript, Pydantic, zod and Go structs (with optional members
// left out of the expected set), backticks, quotes, “”, 「」, 《》, bold,
// snake_case, camelCase and Chinese keys, nested objects. The expected set
// is every top-level key the answer must have.
//
// 78 negatives (42 English, 36 Chinese) mention JSON, YAML, CSV, XML,
// fields, keys, schemas, columns, parameters, forms, tables, templates or
// example objects in other senses (the input's fields, tool arguments and
// tool-call objects, code or HTML that builds them, JSON to translate,
// repair, convert or diff keeping its keys, YAML, XML, CSV and Markdown-table
// answers with named fields), or ask for JSON, JSON Lines, a JSON array or a
// word-count object without naming keys.
//
// The targets are recall ≥ 95 % (the expected key set exactly) and
// 0 false schemas. Measured once each by the lead at the session's end
// (session 10), neither reader having been changed while reading these
// cases: reader6 (the key scorer fit on every earlier corpus, a second
// opinion on sure readings) 130/175 = 74.3 %, 87 sure, 2 false schemas —
// one SURE with a key the prompt calls optional (zh/kefu-refund-optional:
// coupon_code), one not sure on a negative (zh/word-freq-map: an object
// whose keys are the words, read as a key 词语); reader5 (session 9's)
// 129/175 = 73.7 %, 95 sure, the same 2 false schemas. The target is
// MISSED, a sixth time. Under the default (structured_output.implied:
// guess) no reading is sent upstream or re-asked for, so a false reading
// only names keys in X-Mesh-Schema-Violation; it acts only under implied:
// send or strict. This test guards the measured floor (recall ≥ 74 %, at
// most 2 false schemas). The cases must never be edited; once the reader
// is changed while reading its misses here, this corpus is a tuning set.
func TestImpliedHeldOut6Corpus(t *testing.T) {
	measureHeldOut(t, heldOut6Positives, heldOut6Negatives, 170, 75, 0.74, 2)
}
