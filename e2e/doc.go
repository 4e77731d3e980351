// Package e2e holds end-to-end tests that run the keel binary as users run
// it and drive it with real, unmodified client programs: the official
// OpenAI and Anthropic SDKs, the Vercel AI SDK, Codex CLI and Claude Code,
// pinned in ../clients/package-lock.json (docs/CLIENTS.md). It has no
// non-test code.
package e2e
