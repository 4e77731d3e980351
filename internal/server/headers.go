package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/provider"
)

// The X-Mesh response headers, one function per family, each reading the
// record's part its stage filled.

// setter sets a header (a response header, a headerSet, a stream's
// trailer).
type setter interface{ Set(k, v string) }

// answerHeaders sets the X-Mesh headers of a served call: every family.
func answerHeaders(h setter, ep *provider.Endpoint, rec *engine.Record) {
	routingHeaders(h, ep.Model, ep.Region, ep.Provider, rec)
	tierHeaders(h, rec)
	cacheHeaders(h, rec)
	piiHeaders(h, rec)
	normalizationHeaders(h, rec)
	structuredHeaders(h, rec)
}

// tierHeaders is tiering's family: X-Mesh-Tier.
func tierHeaders(h setter, rec *engine.Record) {
	if t := TierHeader(rec); t != "" {
		h.Set("X-Mesh-Tier", t)
	}
}

// cacheHeaders is the caches' family: X-Mesh-Cache (known before the
// first byte, streams included: a header, never a trailer),
// X-Mesh-Cache-Similarity, and the prompt cache's X-Mesh-Cache-Moved (a
// conversation served off the endpoint its cache was warm on, known once
// the first attempt won).
func cacheHeaders(h setter, rec *engine.Record) {
	if c := rec.Cache; c != "" {
		h.Set("X-Mesh-Cache", c)
	}
	if m := rec.CacheMoved; m != "" {
		h.Set("X-Mesh-Cache-Moved", headerSafe(m))
	}
	if sim := engine.SimilarityHeader(rec); sim != "" {
		h.Set("X-Mesh-Cache-Similarity", sim)
	}
}

// piiHeaders is personal data's family: X-Mesh-PII.
func piiHeaders(h setter, rec *engine.Record) {
	if p := PIIHeader(rec); p != "" {
		h.Set("X-Mesh-PII", p)
	}
}

// normalizationHeaders is parameter normalisation's family: X-Mesh-Dropped,
// X-Mesh-Normalization-Offset and X-Mesh-Normalized.
func normalizationHeaders(h setter, rec *engine.Record) {
	if len(rec.Dropped) > 0 {
		h.Set("X-Mesh-Dropped", strings.Join(rec.Dropped, ","))
	}
	if rec.Calibrated {
		h.Set("X-Mesh-Normalization-Offset", normalize.FormatOffset(rec.NormalizationOffset))
	}
	if rec.Normalized != "" {
		h.Set("X-Mesh-Normalized", rec.Normalized)
	}
}

// structuredHeaders is structured output's family: X-Mesh-Repaired,
// X-Mesh-Reasked, X-Mesh-Schema and X-Mesh-Schema-Violation.
func structuredHeaders(h setter, rec *engine.Record) {
	if len(rec.Repairs) > 0 {
		h.Set("X-Mesh-Repaired", strings.Join(rec.Repairs, ","))
	}
	if rec.Reasked {
		h.Set("X-Mesh-Reasked", "true")
	}
	if src := rec.SchemaSource; src != "" {
		h.Set("X-Mesh-Schema", src)
	}
	if rec.SchemaViolation {
		// Set before a stream is sent only by strict mode, which checks
		// the whole answer first; relaxed mode reports in a trailer.
		h.Set("X-Mesh-Schema-Violation", SchemaViolationHeader(rec))
	}
}

// meshTrailers are the X-Mesh headers whose final value a stream can only
// know at its end (a continuation elsewhere changes them): a stream sends
// their first values in its header and declares them as trailers, which
// carry the final values, once each. X-Mesh-Cost is in the trailer only.
var meshTrailers = []string{"X-Mesh-Model", "X-Mesh-Region", "X-Mesh-Provider", "X-Mesh-Attempts", "X-Mesh-Fallback", "X-Mesh-Hedged", "X-Mesh-Recovered", "X-Mesh-Schema-Valid", "X-Mesh-Cost"}

// routingHeaders is the routing family: who served and how (model,
// region, provider, attempts, fallback, hedge, continuation), the legacy
// mode, the rollout stage and fragmentation. A stream sets it again in its
// trailer.
func routingHeaders(h setter, model, region, prov string, rec *engine.Record) {
	h.Set("X-Mesh-Model", model)
	h.Set("X-Mesh-Region", region)
	h.Set("X-Mesh-Provider", prov)
	h.Set("X-Mesh-Attempts", strconv.Itoa(len(rec.Attempts)))
	if rec.Fallback != "" {
		h.Set("X-Mesh-Fallback", rec.Fallback)
	}
	if rec.Hedges > 0 {
		if rec.HedgeWon {
			h.Set("X-Mesh-Hedged", "won")
		} else {
			h.Set("X-Mesh-Hedged", "lost")
		}
	}
	if rec.Recovered > 0 {
		h.Set("X-Mesh-Recovered", strconv.Itoa(rec.Recovered))
	}
	if rec.Legacy {
		h.Set("X-Mesh-Mode", "legacy")
	}
	if rec.Fragments > 0 {
		h.Set("X-Mesh-Fragments", strconv.Itoa(rec.FragmentsOK)+"/"+strconv.Itoa(rec.Fragments))
		if len(rec.LostRanges) > 0 {
			h.Set("X-Mesh-Fragments-Lost", strings.Join(rec.LostRanges, ","))
		}
		if rec.FusionConflicts > 0 {
			h.Set("X-Mesh-Fusion-Conflicts", strconv.Itoa(rec.FusionConflicts))
		}
	}
	if rec.Stage != "" && rec.Stage != "full" {
		h.Set("X-Mesh-Stage", rec.Stage)
	}
}

// setErrorMeshHeaders says, on an error Keel answers, what the call tried:
// X-Mesh-Attempts always, and from its last attempt X-Mesh-Model,
// X-Mesh-Region and X-Mesh-Provider; X-Mesh-Fallback, X-Mesh-Dropped and
// X-Mesh-Normalized when they apply.
func errorHeaders(h http.Header, rec *engine.Record) {
	h.Set("X-Mesh-Attempts", strconv.Itoa(len(rec.Attempts)))
	if n := len(rec.Attempts); n > 0 {
		last := rec.Attempts[n-1]
		h.Set("X-Mesh-Model", last.Model)
		h.Set("X-Mesh-Region", last.Region)
		h.Set("X-Mesh-Provider", last.Provider)
	}
	if rec.Fallback != "" {
		h.Set("X-Mesh-Fallback", rec.Fallback)
	}
	if len(rec.Dropped) > 0 {
		h.Set("X-Mesh-Dropped", strings.Join(rec.Dropped, ","))
	}
	if rec.Normalized != "" {
		h.Set("X-Mesh-Normalized", rec.Normalized)
	}
}

// SchemaViolationHeader is the X-Mesh-Schema-Violation value of a call
// whose answer stayed invalid and was delivered as the model gave it: the
// keys the schema requires, comma-separated (a key with bytes outside
// printable ASCII, or a comma, percent-encoded as UTF-8: 姓名 is
// %E5%A7%93%E5%90%8D), or "true" for a schema that names none (JSON mode:
// any JSON object).
func SchemaViolationHeader(rec *engine.Record) string {
	st := rec.Structured
	if st == nil || len(st.Required) == 0 {
		return "true"
	}
	keys := make([]string, len(st.Required))
	for i, k := range st.Required {
		keys[i] = headerSafe(k)
	}
	return strings.Join(keys, ",")
}

// headerSafe percent-encodes the bytes of s that a header value should not
// carry raw (outside printable ASCII, the comma, the percent sign).
func headerSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == ',' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// PIIHeader is the X-Mesh-PII value of a call in which personal data was
// found: the action, then each kind with its count in the order first
// found ("redact; EMAIL=1, PHONE=2"); empty when nothing was found. Kinds
// and counts only, never a value.
func PIIHeader(r *engine.Record) string {
	if r.PII == nil || len(r.PII.Findings) == 0 {
		return ""
	}
	var kinds []string
	counts := map[string]int{}
	for _, f := range r.PII.Findings {
		if counts[f.Kind] == 0 {
			kinds = append(kinds, f.Kind)
		}
		counts[f.Kind]++
	}
	var b strings.Builder
	b.WriteString(r.PII.Action)
	for i, k := range kinds {
		if i == 0 {
			b.WriteString("; ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(k + "=" + strconv.Itoa(counts[k]))
	}
	return b.String()
}

// TierHeader is the X-Mesh-Tier value of a call to a tiered alias:
// "<class>/<tier>" (simple/cheap, medium/middle, complex/strong), with
// "; escalated" when a failed validation moved the re-ask up a tier; empty
// for any other call.
func TierHeader(r *engine.Record) string {
	if r.Tier == "" {
		return ""
	}
	v := r.Complexity + "/" + r.Tier
	if r.Escalated {
		v += "; escalated"
	}
	return v
}
