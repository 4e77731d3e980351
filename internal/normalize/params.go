package normalize

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
)

// AnthropicVersionNoSampling is the Anthropic API version that answers 400
// to any temperature, top_p or top_k, even at default values (PROTOCOLS §0.1).
const AnthropicVersionNoSampling = "2026-10-21"

// Policy says what Params does with a sampling parameter the target does not
// accept. The zero value is PolicyDrop.
type Policy string

// The policies a route may choose.
const (
	// PolicyDrop removes a parameter the target does not accept.
	PolicyDrop Policy = "drop"
	// PolicyMap replaces it by the nearest accepted value (a temperature
	// clamped into range, the one temperature a model takes) and drops it
	// only where no accepted value exists.
	PolicyMap Policy = "map"
	// PolicyReject answers 400 naming the parameter.
	PolicyReject Policy = "reject"
)

// ErrBadPolicy is returned by ParsePolicy for an unknown policy name.
var ErrBadPolicy = errors.New("expected drop, map or reject")

// ParsePolicy maps "drop", "map", "reject" (and "" = drop) to a Policy.
func ParsePolicy(s string) (Policy, error) {
	switch Policy(strings.ToLower(s)) {
	case "", PolicyDrop:
		return PolicyDrop, nil
	case PolicyMap:
		return PolicyMap, nil
	case PolicyReject:
		return PolicyReject, nil
	}
	return "", fmt.Errorf("%w, got %q", ErrBadPolicy, s)
}

// UnmarshalText decodes normalization.parameter_policy (ParsePolicy: drop,
// map or reject in any case; empty is drop).
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := ParsePolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Target is the serving side of an attempt.
type Target struct {
	// Format is the serving endpoint's wire format.
	Format llm.Format
	// Model is the model name sent upstream.
	Model string
	// APIVersion is the anthropic-version sent upstream (Anthropic only).
	APIVersion string
}

// Caps is what a target accepts.
type Caps struct {
	// NoTemperature, NoTopP and NoTopK: the parameter is rejected outright.
	NoTemperature, NoTopP, NoTopK bool
	// MaxTemperature is the largest temperature accepted (0: no bound).
	MaxTemperature float64
	// FixedTemperature, when set, is the only temperature accepted.
	FixedTemperature *float64
	// NotTogether: temperature and top_p are rejected together; top_p is
	// the one dropped (as Bifrost does), since temperature carries the
	// calibration.
	NotTogether bool
}

// merge combines restrictions: a parameter rejected by either is rejected.
func (c Caps) merge(o Caps) Caps {
	c.NoTemperature = c.NoTemperature || o.NoTemperature
	c.NoTopP = c.NoTopP || o.NoTopP
	c.NoTopK = c.NoTopK || o.NoTopK
	c.NotTogether = c.NotTogether || o.NotTogether
	if o.MaxTemperature > 0 && (c.MaxTemperature == 0 || o.MaxTemperature < c.MaxTemperature) {
		c.MaxTemperature = o.MaxTemperature
	}
	if o.FixedTemperature != nil {
		c.FixedTemperature = o.FixedTemperature
	}
	return c
}

// Rule is one row of the parameter table: the restrictions Caps apply to
// the targets it matches.
type Rule struct {
	// Name says where the rule comes from; it is the Reason of its Actions.
	Name string
	// Format matches the target's format or its family (FormatOpenAI
	// matches both of OpenAI's APIs: their models take the same sampling
	// parameters); FormatUnknown matches any.
	Format llm.Format
	// APIVersion matches exactly when set.
	APIVersion string
	// Match, when set, must accept the model name.
	Match func(model string) bool
	Caps  Caps
}

func (r *Rule) matches(t Target) bool {
	return (r.Format == llm.FormatUnknown || r.Format == t.Format || r.Format == t.Format.Family()) &&
		(r.APIVersion == "" || r.APIVersion == t.APIVersion) &&
		(r.Match == nil || r.Match(t.Model))
}

// Table is the parameter table: every matching rule applies. A Table is
// immutable and safe for concurrent use.
type Table struct{ rules []Rule }

// NewTable returns a table of rules (copied).
func NewTable(rules ...Rule) *Table { return &Table{rules: append([]Rule(nil), rules...)} }

var one = 1.0

// DefaultTable returns the built-in rules (PROTOCOLS §0.1 and §5.1):
//   - anthropic-range: Anthropic temperature is 0–1.
//   - anthropic-2026-10-21: that API version rejects temperature, top_p and
//     top_k, even at default values.
//   - anthropic-exclusive: Claude models from 4.1 on (claude-opus-4-1,
//     claude-sonnet-4-5, claude-haiku-4-5, …) reject temperature and top_p
//     together.
//   - openai-no-top-k: OpenAI has no top_k; temperature is 0–2.
//   - openai-reasoning: OpenAI reasoning models (o1, o3, o4 families and
//     gpt-5 except gpt-5-chat) accept only temperature 1 and no top_p.
func DefaultTable() *Table {
	return NewTable(
		Rule{Name: "anthropic-range", Format: llm.FormatAnthropic, Caps: Caps{MaxTemperature: 1}},
		Rule{Name: "anthropic-" + AnthropicVersionNoSampling, Format: llm.FormatAnthropic, APIVersion: AnthropicVersionNoSampling,
			Caps: Caps{NoTemperature: true, NoTopP: true, NoTopK: true}},
		Rule{Name: "anthropic-exclusive", Format: llm.FormatAnthropic, Match: claudeExclusive, Caps: Caps{NotTogether: true}},
		Rule{Name: "openai-no-top-k", Format: llm.FormatOpenAI, Caps: Caps{NoTopK: true, MaxTemperature: 2}},
		Rule{Name: "openai-reasoning", Format: llm.FormatOpenAI, Match: openAIReasoning, Caps: Caps{NoTopP: true, FixedTemperature: &one}},
	)
}

// claudeExclusive matches Claude model names of the 4.x scheme
// (claude-FAMILY-MAJOR[-MINOR][-DATE]) from version 4.1 on.
func claudeExclusive(model string) bool {
	parts := strings.Split(strings.ToLower(model), "-")
	if len(parts) < 3 || parts[0] != "claude" {
		return false
	}
	switch parts[1] {
	case "opus", "sonnet", "haiku":
	default:
		return false // claude-3-5-sonnet-… and older
	}
	major, err := strconv.Atoi(parts[2])
	if err != nil {
		return false
	}
	minor := 0
	if len(parts) > 3 && len(parts[3]) <= 2 {
		minor, _ = strconv.Atoi(parts[3])
	}
	return major > 4 || major == 4 && minor >= 1
}

// openAIReasoning matches OpenAI reasoning model names.
func openAIReasoning(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:] // "openai/o3" style names
	}
	for _, p := range []string{"o1", "o3", "o4"} {
		if m == p || strings.HasPrefix(m, p+"-") {
			return true
		}
	}
	return strings.HasPrefix(m, "gpt-5") && !strings.HasPrefix(m, "gpt-5-chat")
}

// Caps returns the combined restrictions of every rule matching target, and
// the names of the rules, in table order.
func (t *Table) Caps(target Target) (Caps, []string) {
	var c Caps
	var names []string
	for i := range t.rules {
		if t.rules[i].matches(target) {
			c = c.merge(t.rules[i].Caps)
			names = append(names, t.rules[i].Name)
		}
	}
	return c, names
}

// ActionKind is what Params did to a parameter.
type ActionKind string

// The kinds of Action.
const (
	Dropped ActionKind = "dropped"
	Mapped  ActionKind = "mapped"
)

// Action is one change Params made: the parameter, what was done, the value
// before (and after, when mapped) and the rule that required it.
type Action struct {
	Param  string
	Kind   ActionKind
	From   float64
	To     float64
	Reason string
}

// String is the action's form in the X-Mesh-Normalized header:
// "top_k:dropped" or "temperature:mapped:1.5->1".
func (a Action) String() string {
	if a.Kind == Mapped {
		return a.Param + ":mapped:" + fmtNum(a.From) + "->" + fmtNum(a.To)
	}
	return a.Param + ":dropped"
}

// Header is the X-Mesh-Normalized header value of actions: their String
// forms joined by commas ("" when none).
func Header(actions []Action) string {
	parts := make([]string, len(actions))
	for i, a := range actions {
		parts[i] = a.String()
	}
	return strings.Join(parts, ",")
}

// DroppedParams returns the names of the dropped parameters, for the
// X-Mesh-Dropped header and Record.Dropped.
func DroppedParams(actions []Action) []string {
	var out []string
	for _, a := range actions {
		if a.Kind == Dropped {
			out = append(out, a.Param)
		}
	}
	return out
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Params applies DefaultTable; see Table.Params.
func Params(req *llm.Request, target Target, policy Policy) (*llm.Request, []Action, error) {
	return defaultTable.Params(req, target, policy)
}

var defaultTable = DefaultTable()

// Params returns req as target accepts it under policy, and the actions
// taken, in the order temperature, top_p, top_k. req is never modified: out
// is req itself when nothing changes, else a shallow copy with new parameter
// pointers. Under PolicyReject the first parameter the target does not accept
// is a 400 *llm.APIError (invalid_request_error, mesh code
// MESH_NORMALIZATION_FAILED, Param set to the parameter's name).
func (t *Table) Params(req *llm.Request, target Target, policy Policy) (*llm.Request, []Action, error) {
	if req.Temperature == nil && req.TopP == nil && req.TopK == nil {
		return req, nil, nil
	}
	caps, _ := t.Caps(target)
	rule := func(pred func(Caps) bool) string {
		for i := range t.rules {
			if t.rules[i].matches(target) && pred(t.rules[i].Caps) {
				return t.rules[i].Name
			}
		}
		return ""
	}
	var actions []Action
	temp, topP, topK := req.Temperature, req.TopP, req.TopK
	reject := func(param, why string) error {
		return &llm.APIError{
			Status:   http.StatusBadRequest,
			Type:     llm.ErrInvalidRequest,
			MeshCode: llm.MeshNormalizationFailed,
			Param:    param,
			Message:  fmt.Sprintf("%s: %s is not accepted by model %s%s, and this route's normalization policy is reject", param, why, target.Model, versionNote(target)),
		}
	}
	drop := func(param string, v float64, reason string) {
		actions = append(actions, Action{Param: param, Kind: Dropped, From: v, Reason: reason})
	}

	if temp != nil {
		v := *temp
		switch {
		case caps.NoTemperature:
			if policy == PolicyReject {
				return nil, nil, reject("temperature", "temperature")
			}
			drop("temperature", v, rule(func(c Caps) bool { return c.NoTemperature }))
			temp = nil
		case caps.FixedTemperature != nil && v != *caps.FixedTemperature:
			reason := rule(func(c Caps) bool { return c.FixedTemperature != nil })
			switch policy {
			case PolicyReject:
				return nil, nil, reject("temperature", "temperature "+fmtNum(v)+" (only "+fmtNum(*caps.FixedTemperature)+")")
			case PolicyMap:
				f := *caps.FixedTemperature
				actions = append(actions, Action{Param: "temperature", Kind: Mapped, From: v, To: f, Reason: reason})
				temp = &f
			default:
				drop("temperature", v, reason)
				temp = nil
			}
		case caps.MaxTemperature > 0 && v > caps.MaxTemperature || v < 0:
			reason := rule(func(c Caps) bool { return c.MaxTemperature > 0 })
			if reason == "" || v < 0 {
				reason = "temperature-range"
			}
			switch policy {
			case PolicyReject:
				return nil, nil, reject("temperature", "temperature "+fmtNum(v)+" (range 0–"+fmtNum(caps.MaxTemperature)+")")
			case PolicyMap:
				f := min(max(v, 0), caps.MaxTemperature)
				if caps.MaxTemperature == 0 {
					f = max(v, 0)
				}
				actions = append(actions, Action{Param: "temperature", Kind: Mapped, From: v, To: f, Reason: reason})
				temp = &f
			default:
				drop("temperature", v, reason)
				temp = nil
			}
		}
	}
	if topP != nil {
		v := *topP
		switch {
		case caps.NoTopP:
			if policy == PolicyReject {
				return nil, nil, reject("top_p", "top_p")
			}
			drop("top_p", v, rule(func(c Caps) bool { return c.NoTopP }))
			topP = nil
		case caps.NotTogether && temp != nil:
			if policy == PolicyReject {
				return nil, nil, reject("top_p", "top_p together with temperature")
			}
			drop("top_p", v, rule(func(c Caps) bool { return c.NotTogether }))
			topP = nil
		case v <= 0 || v > 1:
			switch policy {
			case PolicyReject:
				return nil, nil, reject("top_p", "top_p "+fmtNum(v)+" (range (0, 1])")
			case PolicyMap:
				f := min(max(v, 0.01), 1)
				actions = append(actions, Action{Param: "top_p", Kind: Mapped, From: v, To: f, Reason: "top-p-range"})
				topP = &f
			default:
				drop("top_p", v, "top-p-range")
				topP = nil
			}
		}
	}
	if topK != nil && caps.NoTopK {
		if policy == PolicyReject {
			return nil, nil, reject("top_k", "top_k")
		}
		drop("top_k", float64(*topK), rule(func(c Caps) bool { return c.NoTopK }))
		topK = nil
	}
	if len(actions) == 0 {
		return req, nil, nil
	}
	out := *req
	out.Temperature, out.TopP, out.TopK = temp, topP, topK
	return &out, actions, nil
}

// versionNote names the API version a parameter was dropped for (only
// versioned APIs have one: Anthropic's).
func versionNote(t Target) string {
	if t.APIVersion != "" {
		return " (API version " + t.APIVersion + ")"
	}
	return ""
}
