package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/semcache"
)

// The X-Mesh response headers, one function per family, each reading the
// record's part its stage filled.

// setter sets a header (a response header, a headerSet, a stream's
// trailer).
type setter interface{ Set(k, v string) }

// answerHeaders sets the X-Mesh headers of a served call: every family.
func answerHeaders(h setter, ep *provider.Endpoint, rec *callrec.Record) {
	servedHeaders(h, ep.Model, ep.Region, ep.Provider, rec)
	tierHeaders(h, rec)
	cacheHeaders(h, rec)
	piiHeaders(h, rec)
	normalizationHeaders(h, rec)
	structuredHeaders(h, rec)
}

// servedHeaders are the families a stream sets again in its trailer, with
// their final values: routing, the call's path and fragmentation.
func servedHeaders(h setter, model, region, prov string, rec *callrec.Record) {
	routingHeaders(h, model, region, prov, rec)
	pathHeaders(h, rec)
	fragmentHeaders(h, rec)
}

// tierHeaders is tiering's family: X-Mesh-Tier.
func tierHeaders(h setter, rec *callrec.Record) {
	if t := TierHeader(rec); t != "" {
		h.Set("X-Mesh-Tier", t)
	}
}

// cacheHeaders is the caches' family: X-Mesh-Cache (known before the
// first byte, streams included: a header, never a trailer),
// X-Mesh-Cache-Similarity, and the prompt cache's X-Mesh-Cache-Moved (a
// conversation served off the endpoint its cache was warm on, known once
// the first attempt won).
func cacheHeaders(h setter, rec *callrec.Record) {
	if c := rec.CacheStatus(); c != "" {
		h.Set("X-Mesh-Cache", c)
	}
	if m := rec.CacheMoved(); m != "" {
		h.Set("X-Mesh-Cache-Moved", headerSafe(m))
	}
	if sim := SimilarityHeader(rec); sim != "" {
		h.Set("X-Mesh-Cache-Similarity", sim)
	}
}

// SimilarityHeader is X-Mesh-Cache-Similarity's value for a semantic hit
// (the cosine similarity to 4 decimals), "" for any other call.
func SimilarityHeader(rec *callrec.Record) string {
	if rec.SemanticStatus() != semcache.StatusHit {
		return ""
	}
	return strconv.FormatFloat(rec.Semantic.Similarity, 'f', 4, 64)
}

// piiHeaders is personal data's family: X-Mesh-PII.
func piiHeaders(h setter, rec *callrec.Record) {
	if p := PIIHeader(rec); p != "" {
		h.Set("X-Mesh-Pii", p) // X-Mesh-PII, canonical as it is sent
	}
}

// normalizationHeaders is parameter normalisation's and translation's
// family: X-Mesh-Dropped, X-Mesh-Normalization-Offset and X-Mesh-Normalized.
func normalizationHeaders(h setter, rec *callrec.Record) {
	n := rec.Normalization
	if n == nil {
		return
	}
	if len(n.Dropped) > 0 {
		h.Set("X-Mesh-Dropped", strings.Join(n.Dropped, ","))
	}
	if n.Calibrated {
		h.Set("X-Mesh-Normalization-Offset", normalize.FormatOffset(n.Offset))
	}
	if n.Normalized != "" {
		h.Set("X-Mesh-Normalized", n.Normalized)
	}
}

// structuredHeaders is structured output's family: X-Mesh-Repaired,
// X-Mesh-Reasked, X-Mesh-Schema and X-Mesh-Schema-Violation.
func structuredHeaders(h setter, rec *callrec.Record) {
	st := rec.Structured
	if st == nil {
		return
	}
	if len(st.Repairs) > 0 {
		h.Set("X-Mesh-Repaired", strings.Join(st.Repairs, ","))
	}
	if st.Reasked {
		h.Set("X-Mesh-Reasked", "true")
	}
	if src := st.Source(); src != "" {
		h.Set("X-Mesh-Schema", src)
	}
	if st.Violation {
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
// region, provider, attempts, fallback, hedge, continuation).
func routingHeaders(h setter, model, region, prov string, rec *callrec.Record) {
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
}

// pathHeaders is the call's path family (the rollout stage and the safety
// valve): X-Mesh-Mode (legacy) and X-Mesh-Stage (below full).
func pathHeaders(h setter, rec *callrec.Record) {
	if rec.Legacy {
		h.Set("X-Mesh-Mode", "legacy")
	}
	if rec.Stage != "" && rec.Stage != "full" {
		h.Set("X-Mesh-Stage", rec.Stage)
	}
}

// fragmentHeaders is fragmentation's family: X-Mesh-Fragments
// (answered/sent), X-Mesh-Fragments-Lost and X-Mesh-Fusion-Conflicts.
func fragmentHeaders(h setter, rec *callrec.Record) {
	f := rec.Fragments
	if f == nil || f.Count == 0 {
		return
	}
	h.Set("X-Mesh-Fragments", strconv.Itoa(f.OK)+"/"+strconv.Itoa(f.Count))
	if len(f.LostRanges) > 0 {
		h.Set("X-Mesh-Fragments-Lost", strings.Join(f.LostRanges, ","))
	}
	if f.FusionConflicts > 0 {
		h.Set("X-Mesh-Fusion-Conflicts", strconv.Itoa(f.FusionConflicts))
	}
}

// errorHeaders is the error family: on an error Keel answers, what the
// call tried: X-Mesh-Attempts always, and from its last attempt
// X-Mesh-Model, X-Mesh-Region and X-Mesh-Provider; X-Mesh-Fallback,
// X-Mesh-Dropped and X-Mesh-Normalized when they apply.
func errorHeaders(h http.Header, rec *callrec.Record) {
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
	if n := rec.Normalization; n != nil {
		if len(n.Dropped) > 0 {
			h.Set("X-Mesh-Dropped", strings.Join(n.Dropped, ","))
		}
		if n.Normalized != "" {
			h.Set("X-Mesh-Normalized", n.Normalized)
		}
	}
}

// SchemaViolationHeader is the X-Mesh-Schema-Violation value of a call
// whose answer stayed invalid and was delivered as the model gave it: the
// keys the schema requires, comma-separated (a key with bytes outside
// printable ASCII, or a comma, percent-encoded as UTF-8: 姓名 is
// %E5%A7%93%E5%90%8D), or "true" for a schema that names none (JSON mode:
// any JSON object).
func SchemaViolationHeader(rec *callrec.Record) string {
	var st *callrec.StructuredTrace
	if rec.Structured != nil {
		st = rec.Structured.Contract
	}
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
func PIIHeader(r *callrec.Record) string {
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
func TierHeader(r *callrec.Record) string {
	t := r.Tier
	if t == nil || t.Name == "" {
		return ""
	}
	v := t.Complexity + "/" + t.Name
	if t.Escalated {
		v += "; escalated"
	}
	return v
}
