package structured

import "testing"

const (
	heldOut5Positives = "testdata/implied_positive_heldout5.txt"
	heldOut5Negatives = "testdata/implied_negative_heldout5.txt"
)

// TestImpliedHeldOut5Corpus measures ExtractConstraints on a fifth held-out
// corpus (testdata/implied_*_heldout5.txt), written blind for issue 25, build
// item 2, while another engineer improved the reader: its author read only
// the first 12 lines of the heldout4 corpus files (for the format),
// measureHeldOut, readPhrasings, typesMatch and TestImpliedHeldOut4Corpus's
// shape; never extract.go, answer.go, sure.go, nouns.go, lex.go or any other
// non-test source of this package, never another corpus or testdata file,
// BENCHMARKS.md, the package's git history or another worktree, and never
// ran the reader or a corpus test on these cases before committing them.
//
// 164 positives (92 English, 72 Chinese) written the way support bots, RAG
// apps, extraction pipelines (invoices, receipts, resumes, contracts,
// forms, labels), moderation and classification services, LLM-as-judge
// graders, planning agents, code reviewers, translation tools, medical and
// legal intake and Chinese apps (客服, 电商, 简历解析, 舆情, 工单, 合同,
// 政务热线) write system prompts: one-liners to long multi-section prompts
// with rules before and after the format; keys in prose lists with
// and/和/及/以及, under "Required:", "Fields:", "Schema:", "Keys:",
// 【输出格式】 and 【输出要求】 headers, in dash, asterisk and numbered
// bullets with descriptions, Markdown tables, inline and fenced example
// objects with values of several JSON types, JSON Schema (one with an
// optional property), TypeScript interfaces and type aliases, zod, Pydantic
// and dataclass shapes, counted fields in both languages, backticks,
// quotes, 「」, bold, snake_case, camelCase and Chinese keys, types in
// parentheses, nested objects. The expected set is every top-level key the
// answer must have: keys called optional and nested keys are not in it.
//
// 74 negatives (42 English, 32 Chinese) mention JSON, YAML, CSV, XML,
// fields, keys, schemas, columns, parameters, forms, tables or example
// objects in other senses (the input's fields, a tool's or function's
// arguments, code that builds JSON, a table or spreadsheet to read, a JSON
// document to translate or repair keeping its keys, JSON-lines logs to
// summarise in prose, API documentation, YAML, XML and CSV answers with
// named fields), or ask for JSON or a JSON array without naming keys.
//
// The target is recall ≥ 95 % (the expected key set exactly) and 0
// false schemas. Measured once each, blind (session 9; the harness's
// typesMatch learned nullable type lists first, as a prompt's own JSON
// Schema gave one): the session-8 reader (reader4) 111/164 = 67.7 %, 87
// sure, 7 false schemas, all SURE (four with a key left out, three with a
// nested object's keys raised to the top level), 0 on the negatives; the
// session-9 reader (reader5: completeness evidence for sure, a learned
// scorer where the rules read nothing) 128/164 = 78.0 %, 84 sure, 4 false
// schemas, all SURE with a key left out ("sql and explanation" without
// tables_used; score, feedback, strengths without weaknesses; a lead's
// three fields without score; 图片审核 without reason), 0 on the
// negatives. The target is MISSED. Since session 9 no reading is sent
// upstream or re-asked for under the default (structured_output.implied:
// guess), so a false sure reading only acts under implied: send or strict.
// The cases must never be edited. Since session 10 (branch reader6) it is
// a TUNING set: the key scorer is fit on it (keyscore_train_test.go). With
// a scorer fit without it the reader reads 128/164 = 78.0 % with 1 false
// schema (TestKeyScorerLeaveOneCorpusOut: the scorer's second opinion
// takes sure from three of the four); fit with it, 134/164 = 81.7 % and 1
// false schema (图片审核: safe, labels without reason, which the scorer
// reads alike), the floor this test guards.
func TestImpliedHeldOut5Corpus(t *testing.T) {
	measureHeldOut(t, heldOut5Positives, heldOut5Negatives, 160, 70, 0.81, 1)
}
