// Package difftest is Keel's differential check (issue 25, STYLE 23: never
// worse than direct). Its test sends a corpus of requests written to look
// like real traffic — the three client APIs (Anthropic Messages, OpenAI
// Chat Completions, OpenAI Responses), streaming and not, tools and tool
// results, the JSON modes of the common client libraries, documents and
// images, thinking and cache_control, long inputs, system prompts in
// English and Chinese that ask for JSON and ones that only mention it —
// once straight to a deterministic simulator and once through Keel (with
// its defaults, and with every opt-in feature on) against a simulator in
// the same state, and classifies each pair identical, improved (by a named
// criterion) or worse. Any worse pair fails the test, printed in full,
// unless it is a known case left to another change, which the output names
// as such.
//
// The package has no code of its own: everything is in its tests.
package difftest
