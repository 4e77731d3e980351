package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
)

// WordChangeProbability is the simulator's temperature sensitivity curve:
// at effective temperature t (the request's temperature times the model's
// TemperatureScale) each word of a text answer is, independently and with
// this probability, replaced by another vocabulary word. It is min(1, t/2)
// for t > 0 and 0 otherwise: monotone, linear up to saturation at t = 2.
func WordChangeProbability(t float64) float64 {
	if !(t > 0) {
		return 0
	}
	return min(1, t/2)
}

// EffectiveTemperature returns t × the model's TemperatureScale (a scale of
// 0 counts as 1).
func (m *ModelSpec) EffectiveTemperature(t float64) float64 {
	s := m.TemperatureScale
	if s == 0 {
		s = 1
	}
	return t * s
}

// AnswerSample returns the answer a fleet built from cfg gives to req on
// its sample-th call over the Anthropic format (a trailing assistant
// message is a prefill; AnswerFormat answers for either format): a fleet
// numbers its API calls 1, 2, 3 … from New (Reset does not restart the
// count) and draws the call's temperature sampling and extraction errors
// from that number. Answer(cfg, req) is AnswerSample(cfg, req, 0). When req
// has no temperature (or 0) and the model's ExtractionErrorRate is 0, every
// sample is the same answer. An unknown model samples with scale 1 and no
// extraction errors.
//
// The JSON output format is the one req's own wire carries (req.Format, set
// by the codecs): output_config.format or output_format for an Anthropic
// request, response_format for an OpenAI one; a request built by hand
// (Format unset) is read as OpenAI when it has a ResponseFormat, else as
// Anthropic. As the model's StructuredOutputs says, an "ignored" format is
// no format. AnswerSample does not check what an endpoint rejects (the other
// wire's format field, an Anthropic object schema without
// "additionalProperties": false, a model without structured outputs):
// AnswerFormat returns those 400s. Pure and safe for concurrent use.
func AnswerSample(cfg Config, req *llm.Request, sample uint64) *llm.Response {
	spec := cfg.model(req.Model)
	f := req.Format
	if f == llm.FormatUnknown {
		f = llm.FormatAnthropic
		if req.ResponseFormat != nil {
			f = llm.FormatOpenAI
		}
	}
	rf, _ := outputFormat(spec, f, req)
	a, _ := generate(context.Background(), cfg.Seed, req, samplingFor(spec, req, sample), true, rf) // never cancelled
	return a.response()
}

// model returns the spec of the model named name, or nil.
func (c *Config) model(name string) *ModelSpec {
	for i := range c.Models {
		if c.Models[i].Name == name {
			return &c.Models[i]
		}
	}
	return nil
}

// sampling is what varies between calls of one conversation.
type sampling struct {
	// p is the word change probability; 0 means the deterministic answer.
	p float64
	// errRate is the per-field extraction error probability; errPerKTok
	// adds to it per thousand input tokens (generate applies it).
	errRate    float64
	errPerKTok float64
	sample     uint64
	// drift is the model's Drift (nil: none).
	drift *Drift
}

// samplingFor returns the sampling of one call of spec (nil: defaults).
func samplingFor(spec *ModelSpec, req *llm.Request, sample uint64) sampling {
	s := sampling{sample: sample}
	if spec == nil {
		spec = &ModelSpec{}
	}
	if req.Temperature != nil {
		s.p = WordChangeProbability(spec.EffectiveTemperature(*req.Temperature))
	}
	s.errRate, s.errPerKTok = spec.ExtractionErrorRate, spec.ExtractionErrorPerKTok
	s.drift = spec.Drift
	return s
}

// rng returns the generator of the call's draws for purpose salt.
func (s sampling) rng(h uint64, salt string) rng {
	return newRNG(hashString(h^(s.sample+1)*0x9e3779b97f4a7c15, salt))
}

// changeWord returns the vocabulary index of word k after sampling: with
// probability s.p another word, drawn from pr.
func (s sampling) changeWord(k int, pr *rng) int {
	if s.p <= 0 || pr.float() >= s.p {
		return k
	}
	return (k + 1 + pr.intn(len(vocabulary)-1)) % len(vocabulary)
}

// continueSampled is the prefill rule at temperature > 0 when the prefill
// is not a prefix of this call's sample (it came from another sample): the
// answer continues word-aligned after as many words as the prefill holds,
// completing the prefill's last word when this sample has a word there that
// starts with it.
func continueSampled(tokens []string, prefill string) []string {
	pt := splitWords(prefill)
	k := len(pt)
	if k == 0 {
		return tokens
	}
	if k > len(tokens) {
		return nil
	}
	rest := slices.Clone(tokens[k:])
	if last, w := pt[k-1], tokens[k-1]; len(w) > len(last) && strings.HasPrefix(w, last) {
		rest = append([]string{w[len(last):]}, rest...)
	}
	return rest
}

// GroundTruth returns the fields an extraction answer reads from text: every
// line of the form "field: value" (an optional "- " or "* " bullet before
// it), keyed by the normalised field name (lower case, spaces and hyphens as
// underscores), the first occurrence of a field winning. A field name is 1–64
// letters, digits, underscores, hyphens or spaces and starts with a letter.
func GroundTruth(text string) map[string]string {
	out := map[string]string{}
	for _, f := range fieldLines(text) {
		out[f.key] = f.value
	}
	return out
}

type fieldLine struct{ key, value string }

// fieldLines parses "field: value" lines in order of first appearance.
func fieldLines(text string) []fieldLine {
	var out []fieldLine
	seen := map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimPrefix(strings.TrimPrefix(line, "- "), "* ")
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if v == "" || !fieldName(k) {
			continue
		}
		k = normKey(k)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, fieldLine{k, v})
	}
	return out
}

func fieldName(k string) bool {
	if k == "" || len(k) > 64 || !(k[0] >= 'a' && k[0] <= 'z' || k[0] >= 'A' && k[0] <= 'Z') {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == ' ') {
			return false
		}
	}
	return true
}

// keySeparators turns a field name's spaces and hyphens into underscores.
var keySeparators = strings.NewReplacer(" ", "_", "-", "_")

func normKey(k string) string {
	return keySeparators.Replace(strings.ToLower(strings.TrimSpace(k)))
}

// extractionAnswer returns the JSON text of a field-extraction answer, or
// false when req is not an extraction request. See Answer for the rules.
func extractionAnswer(req *llm.Request, sys string, turns []turn, rf *llm.ResponseFormat, h uint64, s sampling) (string, bool) {
	var props map[string]any
	if rf != nil && rf.Type == "json_schema" {
		if sc := parseSchema(rf.Schema); sc != nil && schemaType(sc) == "object" {
			props, _ = sc["properties"].(map[string]any)
		}
	}
	if rf != nil && rf.Type == "json_schema" && len(props) == 0 {
		return "", false
	}
	var input []string
	for _, t := range turns {
		if t.role == llm.RoleUser {
			input = append(input, t.text)
		}
	}
	lines := fieldLines(strings.Join(input, "\n"))
	found := make(map[string]string, len(lines))
	for _, f := range lines {
		found[f.key] = f.value
	}
	// "extract" or 提取 / 抽取: a model asked in English or Chinese.
	asked := strings.Contains(strings.ToLower(sys), "extract") || strings.Contains(sys, "提取") || strings.Contains(sys, "抽取")

	type field struct {
		name   string
		schema map[string]any
	}
	var fields []field
	hit := false
	if len(props) > 0 {
		for name, ps := range props {
			m, _ := ps.(map[string]any)
			fields = append(fields, field{name, m})
			if _, ok := found[normKey(name)]; ok {
				hit = true
			}
		}
		slices.SortFunc(fields, func(a, b field) int { return strings.Compare(a.name, b.name) })
	} else {
		for _, fl := range lines {
			fields = append(fields, field{name: fl.key})
		}
		hit = len(fields) > 0
	}
	if !hit || len(props) == 0 && !asked {
		return "", false
	}
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		raw, ok := found[normKey(f.name)]
		if !ok {
			out[f.name] = nil
			continue
		}
		v := typedValue(raw, f.schema)
		if s.errRate > 0 {
			r := s.rng(h, "extract\x00"+f.name)
			if r.float() < s.errRate {
				v = wrongValue(v, f.schema, &r)
			}
		}
		out[f.name] = v
	}
	b, _ := json.Marshal(out)
	return string(b), true
}

// typedValue converts a field's text to the JSON type its schema asks for;
// text that does not convert stays a string.
func typedValue(raw string, ps map[string]any) any {
	typ := "string"
	if ps != nil {
		typ = schemaType(ps)
	}
	switch typ {
	case "integer", "number":
		n, err := strconv.ParseFloat(strings.NewReplacer(",", "", "$", "", "%", "", "€", "", "£", "").Replace(raw), 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return raw
		}
		if typ == "integer" && n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n)
		}
		return n
	case "boolean":
		switch strings.ToLower(raw) {
		case "true", "yes", "y":
			return true
		case "false", "no", "n":
			return false
		}
	}
	return raw
}

// wrongValue returns a value of v's type that differs from v.
func wrongValue(v any, ps map[string]any, r *rng) any {
	if e, ok := ps["enum"].([]any); ok && len(e) > 1 {
		var others []any
		for _, x := range e {
			if fmt.Sprint(x) != fmt.Sprint(v) {
				others = append(others, x)
			}
		}
		if len(others) > 0 {
			return others[r.intn(len(others))]
		}
	}
	sign := int64(1)
	if r.next()&1 == 1 {
		sign = -1
	}
	switch x := v.(type) {
	case bool:
		return !x
	case int64:
		d := int64(1 + r.intn(9))
		if a := abs64(x); a >= 20 {
			d = max(1, a*int64(5+r.intn(46))/100)
		}
		return x + sign*d
	case float64:
		if x == 0 {
			return float64(1 + r.intn(9))
		}
		w := x * (1 + float64(sign)*(0.05+0.45*r.float()))
		w, _ = strconv.ParseFloat(strconv.FormatFloat(w, 'f', 2, 64), 64)
		if w == x {
			w = x + float64(sign)
		}
		return w
	case string:
		for {
			w := vocabulary[r.intn(len(vocabulary))]
			if !strings.EqualFold(w, x) {
				return w
			}
		}
	}
	return v
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
