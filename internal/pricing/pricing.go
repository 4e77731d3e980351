// Package pricing is Keel's price table: what a model's tokens cost in US
// dollars per million, by kind — input, output, cache read and cache write
// — with built-in entries for the simulator's models and for common hosted
// models, which a config's pricing section and a model's own price
// override.
//
// A Price is plain data and a Table is immutable once built: both are safe
// for concurrent use, and nothing here blocks. The package imports only the
// standard library (config decodes straight into Price).
package pricing

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Price is a model's price in US dollars per million tokens. Cache reads
// and cache writes at 0 are priced as input: a provider that names no cache
// price bills cached prompt tokens as ordinary input (OpenAI bills no
// cache write surcharge; its cache_write tokens, when reported, are input).
type Price struct {
	InputPerMTok  float64 `yaml:"input_per_mtok" json:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok" json:"output_per_mtok"`
	// CacheReadPerMTok prices prompt tokens read from the provider's
	// prompt cache (Anthropic cache_read_input_tokens, OpenAI
	// prompt_tokens_details.cached_tokens); 0 means InputPerMTok.
	CacheReadPerMTok float64 `yaml:"cache_read_per_mtok" json:"cache_read_per_mtok,omitempty"`
	// CacheWritePerMTok prices prompt tokens written to the cache
	// (Anthropic cache_creation_input_tokens, 5-minute writes); 0 means
	// InputPerMTok.
	CacheWritePerMTok float64 `yaml:"cache_write_per_mtok" json:"cache_write_per_mtok,omitempty"`
	// CacheWrite1hPerMTok prices prompt tokens written to the cache with
	// the 1-hour TTL (Anthropic cache_creation.ephemeral_1h_input_tokens:
	// 2× the input price, against 1.25× for a 5-minute write); 0 means the
	// 5-minute write price.
	CacheWrite1hPerMTok float64 `yaml:"cache_write_1h_per_mtok" json:"cache_write_1h_per_mtok,omitempty"`
}

// IsZero reports whether p prices nothing (an unpriced model).
func (p Price) IsZero() bool { return p == Price{} }

// Cost is the price in USD of input (uncached prompt), output, cache-read
// and cache-write (5-minute) tokens; Bill prices every kind.
func (p Price) Cost(input, output, cacheRead, cacheWrite int) float64 {
	p = p.effective()
	return (float64(input)*p.InputPerMTok + float64(output)*p.OutputPerMTok + float64(cacheRead)*p.CacheReadPerMTok + float64(cacheWrite)*p.CacheWritePerMTok) / 1e6
}

// Max is the dearer of p and q, kind by kind (a cache price at 0 counting
// as the input price): what a reservation assumes when a call may be
// served by either.
func (p Price) Max(q Price) Price {
	set1h := p.CacheWrite1hPerMTok != 0 || q.CacheWrite1hPerMTok != 0
	p, q = p.effective(), q.effective()
	m := Price{InputPerMTok: max(p.InputPerMTok, q.InputPerMTok), OutputPerMTok: max(p.OutputPerMTok, q.OutputPerMTok),
		CacheReadPerMTok: max(p.CacheReadPerMTok, q.CacheReadPerMTok), CacheWritePerMTok: max(p.CacheWritePerMTok, q.CacheWritePerMTok)}
	if set1h { // else 0: the 5-minute write price, the dearer one already
		m.CacheWrite1hPerMTok = max(p.write1h(), q.write1h())
	}
	return m
}

// write1h is the effective 1-hour write price of an effective p.
func (p Price) write1h() float64 {
	if p.CacheWrite1hPerMTok == 0 {
		return p.CacheWritePerMTok
	}
	return p.CacheWrite1hPerMTok
}

// Tokens is one answer's usage by the kinds providers bill, each counted
// once: Input is the uncached prompt (Anthropic input_tokens; OpenAI
// prompt_tokens less cached_tokens), CacheRead the prompt read from the
// cache, CacheWrite5m and CacheWrite1h the prompt written to it with each
// TTL, Output every generated token, Reasoning the part of Output spent on
// reasoning (Anthropic's thinking and OpenAI's reasoning tokens are both
// billed as output tokens: platform.claude.com/docs/en/build-with-claude/extended-thinking,
// "Pricing"; developers.openai.com/api/docs/guides/reasoning, "reasoning
// tokens … are billed as output tokens").
type Tokens struct {
	Input, CacheRead, CacheWrite5m, CacheWrite1h, Output, Reasoning int
}

// Bill is the cost in USD of Tokens at a Price, by kind. Total sums Input,
// CacheRead, CacheWrite5m, CacheWrite1h and Output (Reasoning is the part
// of Output spent on reasoning, not added again). CacheSaved is what the
// prompt cache saved against sending the same prompt uncached: the reads
// at the input price less their price, less the writes' premium over the
// input price (negative when the writes cost more than the reads saved).
type Bill struct {
	Input, CacheRead, CacheWrite5m, CacheWrite1h, Output, Reasoning, Total, CacheSaved float64
}

// Bill prices t kind by kind.
func (p Price) Bill(t Tokens) Bill {
	p = p.effective()
	w1h := p.write1h()
	b := Bill{
		Input:        float64(t.Input) * p.InputPerMTok / 1e6,
		CacheRead:    float64(t.CacheRead) * p.CacheReadPerMTok / 1e6,
		CacheWrite5m: float64(t.CacheWrite5m) * p.CacheWritePerMTok / 1e6,
		CacheWrite1h: float64(t.CacheWrite1h) * w1h / 1e6,
		Output:       float64(t.Output) * p.OutputPerMTok / 1e6,
		Reasoning:    float64(t.Reasoning) * p.OutputPerMTok / 1e6,
	}
	b.Total = b.Input + b.CacheRead + b.CacheWrite5m + b.CacheWrite1h + b.Output
	b.CacheSaved = (float64(t.CacheRead)*(p.InputPerMTok-p.CacheReadPerMTok) -
		float64(t.CacheWrite5m)*(p.CacheWritePerMTok-p.InputPerMTok) -
		float64(t.CacheWrite1h)*(w1h-p.InputPerMTok)) / 1e6
	return b
}

// effective is p with its cache prices at 0 replaced by the input price.
func (p Price) effective() Price {
	if p.CacheReadPerMTok == 0 {
		p.CacheReadPerMTok = p.InputPerMTok
	}
	if p.CacheWritePerMTok == 0 {
		p.CacheWritePerMTok = p.InputPerMTok
	}
	return p
}

// Validate reports the first negative, NaN or infinite figure.
func (p Price) Validate() error {
	for _, v := range [...]float64{p.InputPerMTok, p.OutputPerMTok, p.CacheReadPerMTok, p.CacheWritePerMTok, p.CacheWrite1hPerMTok} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("expected a price of 0 or more US dollars per million tokens, got %v", v)
		}
	}
	return nil
}

// Entry is one row of a price table: a model name as sent upstream and its
// price. A name also prices its dated snapshots: "claude-sonnet-4-5"
// covers "claude-sonnet-4-5-20250929" (the longest listed name followed by
// "-" wins).
type Entry struct {
	Model string `yaml:"model" json:"model"`
	Price `yaml:",inline"`
	// Source says where a built-in price comes from; empty in config.
	Source string `yaml:"-" json:"source,omitempty"`
}

// Table looks prices up by model name. Build it with New; the zero value
// prices nothing.
type Table struct {
	exact map[string]Price
	names []string // longest first, for prefix lookups
}

// New builds a table from the built-in entries (Builtin) overridden, model
// by model, by entries. A later entry for the same model wins.
func New(entries []Entry) Table {
	t := Table{exact: map[string]Price{}}
	for _, e := range Builtin() {
		t.exact[e.Model] = e.Price
	}
	for _, e := range entries {
		t.exact[e.Model] = e.Price
	}
	for n := range t.exact {
		t.names = append(t.names, n)
	}
	slices.SortFunc(t.names, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b)) })
	return t
}

// Lookup returns model's price: its own entry, else the entry of the
// longest listed name that model starts with followed by "-" (a dated
// snapshot of a listed model); ok is false when none matches.
//
// A Claude model id of Amazon Bedrock (anthropic.claude-…-v1:0, or an
// inference profile us.anthropic.…) or Google Vertex AI
// (claude-…@20250929) that is not listed itself is priced as the
// Anthropic id it names, Anthropic's list price: both list Claude at it
// on demand, but Bedrock's and Vertex's regional endpoints may cost more —
// list such an id in the pricing section to override it.
func (t Table) Lookup(model string) (p Price, ok bool) {
	if p, ok := t.lookup(model); ok {
		return p, true
	}
	if id := anthropicID(model); id != model {
		return t.lookup(id)
	}
	return Price{}, false
}

func (t Table) lookup(model string) (p Price, ok bool) {
	if p, ok := t.exact[model]; ok {
		return p, true
	}
	for _, n := range t.names {
		if len(model) > len(n) && model[len(n)] == '-' && strings.HasPrefix(model, n) {
			return t.exact[n], true
		}
	}
	return Price{}, false
}

// anthropicID is the Anthropic model id a Bedrock or Vertex Claude id
// names, or model itself: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
// and "claude-sonnet-4-5@20250929" are "claude-sonnet-4-5-20250929".
func anthropicID(model string) string {
	if before, date, ok := strings.Cut(model, "@"); ok && strings.HasPrefix(before, "claude-") {
		return before + "-" + date
	}
	m := model
	if geo, rest, ok := strings.Cut(m, "."); ok && !strings.HasPrefix(m, "anthropic.") && len(geo) <= 7 {
		m = rest // a cross-region inference profile's us., eu., apac., global., …
	}
	m, ok := strings.CutPrefix(m, "anthropic.")
	if !ok {
		return model
	}
	if i := strings.LastIndex(m, "-v"); i > 0 && isVersion(m[i+2:]) {
		m = m[:i]
	}
	return m
}

// isVersion reports whether s is a Bedrock model version: "1:0", "2".
func isVersion(s string) bool {
	n, minor, _ := strings.Cut(s, ":")
	return n != "" && strings.Trim(n, "0123456789") == "" && strings.Trim(minor, "0123456789") == ""
}

// Sources for the built-in prices. They are list prices at the date shown,
// copied by hand: check them against the provider's page before relying on
// a figure, and override any that changed in the config's pricing section.
const (
	SourceAnthropic = "platform.claude.com/docs/en/about-claude/pricing (cache reads 0.1×, 5-minute writes 1.25×, 1-hour writes 2× the input price), read 2026-11"
	SourceOpenAI    = "developers.openai.com/api/docs/pricing (cached input; no cache write surcharge), read 2026-11"
	SourceSim       = "Keel's simulator (sim.DefaultConfig); cache reads at a tenth of input, 5-minute writes at 1.25× and 1-hour writes at 2×, as Anthropic prices them"
)

// Builtin returns the built-in entries: the simulator's models, the Claude
// families and OpenAI's GPT-4o and GPT-4.1 families. Each says its source;
// they must be checked (see the Source constants).
func Builtin() []Entry {
	a := func(model string, in, out float64) Entry {
		return Entry{Model: model, Price: Price{InputPerMTok: in, OutputPerMTok: out, CacheReadPerMTok: in / 10, CacheWritePerMTok: in * 1.25, CacheWrite1hPerMTok: in * 2}, Source: SourceAnthropic}
	}
	o := func(model string, in, out, cached float64) Entry {
		return Entry{Model: model, Price: Price{InputPerMTok: in, OutputPerMTok: out, CacheReadPerMTok: cached, CacheWritePerMTok: in}, Source: SourceOpenAI}
	}
	s := func(model string, in, out float64) Entry {
		return Entry{Model: model, Price: Price{InputPerMTok: in, OutputPerMTok: out, CacheReadPerMTok: in / 10, CacheWritePerMTok: in * 1.25, CacheWrite1hPerMTok: in * 2}, Source: SourceSim}
	}
	return []Entry{
		s("sim-opus", 15, 75), s("sim-sonnet", 3, 15), s("sim-haiku", 0.8, 4), s("sim-llama", 0.2, 0.6), s("sim-claude", 3, 15),

		a("claude-opus-4-6", 5, 25), a("claude-opus-4-5", 5, 25),
		a("claude-opus-4-1", 15, 75), a("claude-opus-4-0", 15, 75), a("claude-opus-4", 15, 75), a("claude-3-opus", 15, 75),
		a("claude-sonnet-4-6", 3, 15), a("claude-sonnet-4-5", 3, 15), a("claude-sonnet-4-0", 3, 15), a("claude-sonnet-4", 3, 15),
		a("claude-3-7-sonnet", 3, 15), a("claude-3-5-sonnet", 3, 15),
		a("claude-haiku-4-5", 1, 5), a("claude-3-5-haiku", 0.8, 4), {Model: "claude-3-haiku", Price: Price{InputPerMTok: 0.25, OutputPerMTok: 1.25, CacheReadPerMTok: 0.03, CacheWritePerMTok: 0.3, CacheWrite1hPerMTok: 0.5}, Source: SourceAnthropic},

		o("gpt-4o", 2.5, 10, 1.25), o("gpt-4o-mini", 0.15, 0.6, 0.075),
		o("gpt-4.1", 2, 8, 0.5), o("gpt-4.1-mini", 0.4, 1.6, 0.1), o("gpt-4.1-nano", 0.1, 0.4, 0.025),
	}
}
