package fragment

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// ErrAllLost is returned (with a non-nil Result) when no fragment has a
// successful replica.
var ErrAllLost = errors.New("fragment: every fragment was lost")

// FragmentAnswer is one replica's answer for one fragment.
type FragmentAnswer struct {
	// Text is the answer: a JSON object for structured answers (optionally
	// inside a ``` fence), anything for free text.
	Text string
	// Confidence weighs the answer in votes and medians; values ≤ 0, NaN or
	// infinite count as 1.
	Confidence float64
	// Err marks a failed replica; its Text is ignored.
	Err error
}

// Mode selects how answers are fused.
type Mode uint8

const (
	// ModeAuto fuses structurally when every successful replica's Text is a
	// JSON object, else as free text.
	ModeAuto Mode = iota
	// ModeStructured requires JSON objects; a replica whose Text is not one
	// counts as failed (Result.Invalid).
	ModeStructured
	// ModeText fuses free text.
	ModeText
)

// FuseOptions controls Fuse. The zero value is the documented default.
type FuseOptions struct {
	Mode Mode
	// RelTolerance is the relative difference beyond which replicas' numbers
	// for one field are a conflict: |v − median| > RelTolerance × |median|.
	// 0 means any difference is a conflict.
	RelTolerance float64
	// ListQuorum is the share of a fragment's replica confidence an item
	// needs to stay in a list fused across replicas. 0 (default) is a plain
	// order-preserving union: any item a replica reports is kept (recall
	// first). 0.5 keeps items a weighted majority reports, which also rejects
	// items a single replica invented. Lists from different fragments are
	// always united without a quorum.
	ListQuorum float64
}

// Conflict is a field on which answers disagreed.
type Conflict struct {
	// Fragment is the fragment whose replicas disagreed, or -1 when
	// different fragments' fused answers disagreed.
	Fragment int
	// Path is the field's dotted path from the root object ("auditor.name").
	Path string
	// Values are the disagreeing values in replica (or fragment) order; nil
	// stands for a missing field.
	Values []any
}

// Result is the fused answer.
type Result struct {
	// Structured reports whether answers were fused as JSON objects.
	Structured bool
	// Value is the fused object when Structured. Numbers are json.Number,
	// kept verbatim from the answer that supplied them.
	Value map[string]any
	// Text is the fused free text, or Value encoded as JSON (keys sorted).
	Text string
	// Fields counts the fields (leaves and lists) fused across replicas, the
	// denominator of a conflict rate.
	Fields int
	// Conflicts lists every disagreement, in fragment then path order.
	Conflicts []Conflict
	// Lost holds the input range of every fragment without a successful
	// replica, in order; LostFragments their indices.
	Lost          []Range
	LostFragments []int
	// Invalid counts replicas that answered but could not be used
	// (not a JSON object under ModeStructured).
	Invalid int
}

// Fuse combines answers[i], the replica answers for frags[i], into one
// Result. Structured answers are fused per fragment first (categorical values
// by confidence-weighted vote, numbers by weighted median, lists by
// order-preserving union, objects recursively; a field that some replicas
// omit stays when replicas holding a weighted majority report it) and then
// across fragments the same way, except that a field or null missing from a
// fragment is no vote. Free-text answers are chosen per fragment by
// confidence-weighted vote over their normalised text and concatenated in
// input order, dropping text repeated across the join (a suffix of one equal
// to a prefix of the next, or repeated sentences from the overlap).
// Vote and median ties go to the higher single confidence, then to the
// earlier replica.
func Fuse(frags []Fragment, answers [][]FragmentAnswer, opt FuseOptions) (*Result, error) {
	if len(frags) != len(answers) {
		return nil, fmt.Errorf("fusing answers: %d fragments but %d answer sets", len(frags), len(answers))
	}
	if opt.RelTolerance < 0 || opt.ListQuorum < 0 || opt.ListQuorum > 1 {
		return nil, fmt.Errorf("%w: RelTolerance %v, ListQuorum %v", ErrInvalidOptions, opt.RelTolerance, opt.ListQuorum)
	}
	res := &Result{}
	type parsed struct {
		ws   []weighted
		text []weighted
	}
	per := make([]parsed, len(frags))
	allObjects := true
	for i, reps := range answers {
		for r, a := range reps {
			if a.Err != nil {
				continue
			}
			w := a.Confidence
			if !(w > 0) || math.IsInf(w, 0) {
				w = 1
			}
			per[i].text = append(per[i].text, weighted{v: a.Text, w: w, order: r})
			if opt.Mode == ModeText {
				continue
			}
			if obj, ok := parseObject(a.Text); ok {
				per[i].ws = append(per[i].ws, weighted{v: obj, w: w, order: r})
			} else {
				allObjects = false
				if opt.Mode == ModeStructured {
					res.Invalid++
				}
			}
		}
	}
	res.Structured = opt.Mode == ModeStructured || (opt.Mode == ModeAuto && allObjects)
	f := &fuser{opt: opt, res: res}
	var fused []weighted
	var texts []string
	for i := range frags {
		cands := per[i].text
		if res.Structured {
			cands = per[i].ws
		}
		if len(cands) == 0 {
			res.Lost = append(res.Lost, Range{frags[i].Start, frags[i].End})
			res.LostFragments = append(res.LostFragments, frags[i].Index)
			continue
		}
		if res.Structured {
			f.frag = frags[i].Index
			v := f.fuse(cands, "", false)
			var sum float64
			for _, c := range cands {
				sum += c.w
			}
			fused = append(fused, weighted{v: v, w: sum / float64(len(cands)), order: i})
		} else {
			texts = append(texts, pickText(cands))
		}
	}
	if len(res.LostFragments) == len(frags) {
		if res.Structured {
			res.Value = map[string]any{}
			res.Text = "{}"
		}
		return res, ErrAllLost
	}
	if !res.Structured {
		res.Text = joinTexts(texts)
		return res, nil
	}
	f.frag = -1
	if len(fused) == 1 {
		res.Value = fused[0].v.(map[string]any)
	} else {
		res.Value = f.fuse(fused, "", true).(map[string]any)
	}
	b, err := json.Marshal(res.Value)
	if err != nil {
		return nil, fmt.Errorf("encoding fused answer: %w", err)
	}
	res.Text = string(b)
	return res, nil
}

type weighted struct {
	v     any
	w     float64
	order int
}

type fuser struct {
	opt  FuseOptions
	res  *Result
	frag int
}

func (f *fuser) conflict(path string, vals []any) {
	f.res.Conflicts = append(f.res.Conflicts, Conflict{Fragment: f.frag, Path: path, Values: vals})
}

// fuse fuses non-empty vs. across marks the cross-fragment stage, where
// nulls are no vote and lists need no quorum.
func (f *fuser) fuse(vs []weighted, path string, across bool) any {
	if across {
		nn := vs[:0:0]
		for _, v := range vs {
			if v.v != nil {
				nn = append(nn, v)
			}
		}
		if len(nn) == 0 {
			return nil
		}
		vs = nn
	}
	switch kindOf(vs) {
	case kindObject:
		return f.fuseObject(vs, path, across)
	case kindList:
		f.res.Fields++
		return f.fuseList(vs, across)
	case kindNumber:
		f.res.Fields++
		return f.fuseNumber(vs, path)
	default:
		f.res.Fields++
		return f.vote(vs, path)
	}
}

const (
	kindMixed = iota
	kindObject
	kindList
	kindNumber
)

func kindOf(vs []weighted) int {
	k := -1
	for _, v := range vs {
		var kk int
		switch v.v.(type) {
		case map[string]any:
			kk = kindObject
		case []any:
			kk = kindList
		case json.Number:
			kk = kindNumber
		default:
			kk = kindMixed
		}
		if k >= 0 && kk != k {
			return kindMixed
		}
		k = kk
	}
	return k
}

func (f *fuser) fuseObject(vs []weighted, path string, across bool) any {
	var total float64
	keys := map[string]bool{}
	for _, v := range vs {
		total += v.w
		for k := range v.v.(map[string]any) {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	out := make(map[string]any, len(sorted))
	for _, k := range sorted {
		p := k
		if path != "" {
			p = path + "." + k
		}
		var have []weighted
		var haveW float64
		for _, v := range vs {
			if x, ok := v.v.(map[string]any)[k]; ok {
				have = append(have, weighted{v: x, w: v.w, order: v.order})
				haveW += v.w
			}
		}
		if !across && len(have) < len(vs) {
			// Some replicas omit the field: a disagreement in itself.
			vals := make([]any, len(vs))
			for i, v := range vs {
				vals[i] = v.v.(map[string]any)[k]
			}
			f.conflict(p, vals)
			if 2*haveW < total {
				continue
			}
		}
		out[k] = f.fuse(have, p, across)
	}
	return out
}

func (f *fuser) fuseList(vs []weighted, across bool) any {
	type item struct {
		v     any
		w     float64
		first int // position of first appearance
	}
	var total float64
	idx := map[string]int{}
	var items []item
	for _, v := range vs {
		total += v.w
		seen := map[string]bool{}
		for _, x := range v.v.([]any) {
			key := canon(x)
			if seen[key] {
				continue
			}
			seen[key] = true
			if i, ok := idx[key]; ok {
				items[i].w += v.w
				continue
			}
			idx[key] = len(items)
			items = append(items, item{v: x, w: v.w, first: len(items)})
		}
	}
	q := f.opt.ListQuorum
	if across {
		q = 0
	}
	out := make([]any, 0, len(items))
	for _, it := range items {
		if q == 0 || it.w >= q*total-1e-12 {
			out = append(out, it.v)
		}
	}
	return out
}

func (f *fuser) fuseNumber(vs []weighted, path string) any {
	type group struct {
		x float64
		v any // the value as the earliest replica wrote it
		stats
	}
	var gs []group
	var total float64
	for _, v := range vs {
		// Decoded JSON numbers are well-formed; out-of-range ones yield ±Inf
		// with an error, and still sort correctly.
		x, _ := v.v.(json.Number).Float64()
		total += v.w
		i := slices.IndexFunc(gs, func(g group) bool { return g.x == x })
		if i < 0 {
			i = len(gs)
			gs = append(gs, group{x: x, v: v.v, stats: stats{first: v.order}})
		}
		g := &gs[i]
		g.w += v.w
		g.maxW = max(g.maxW, v.w)
		if v.order < g.first {
			g.first, g.v = v.order, v.v
		}
	}
	slices.SortFunc(gs, func(a, b group) int { return cmp.Compare(a.x, b.x) })
	// Weighted median: the first value at which the cumulative weight
	// reaches half. When it reaches exactly half, the next value is an equal
	// candidate and the vote tie-break decides.
	const eps = 1e-12
	pick := len(gs) - 1
	var cum float64
	for i, g := range gs {
		cum += g.w
		if cum >= total/2-eps {
			pick = i
			if math.Abs(cum-total/2) < eps && i+1 < len(gs) && better(gs[i+1].stats, g.stats) {
				pick = i + 1
			}
			break
		}
	}
	med := gs[pick]
	tol := f.opt.RelTolerance * math.Abs(med.x)
	for _, g := range gs {
		if math.Abs(g.x-med.x) > tol {
			vals := make([]any, len(vs))
			for i, v := range vs {
				vals[i] = v.v
			}
			f.conflict(path, vals)
			break
		}
	}
	return med.v
}

type stats struct {
	w, maxW float64
	first   int
}

// better orders vote candidates: more weight, then a higher single
// confidence, then the earlier replica.
func better(a, b stats) bool {
	const eps = 1e-12
	if math.Abs(a.w-b.w) > eps {
		return a.w > b.w
	}
	if math.Abs(a.maxW-b.maxW) > eps {
		return a.maxW > b.maxW
	}
	return a.first < b.first
}

// vote picks the categorical value with the most confidence.
func (f *fuser) vote(vs []weighted, path string) any {
	type cand struct {
		v any
		stats
	}
	var cands []cand
	idx := map[string]int{}
	for _, v := range vs {
		key := canon(v.v)
		i, ok := idx[key]
		if !ok {
			i = len(cands)
			idx[key] = i
			cands = append(cands, cand{v: v.v, stats: stats{first: v.order}})
		}
		cands[i].w += v.w
		cands[i].maxW = max(cands[i].maxW, v.w)
		cands[i].first = min(cands[i].first, v.order)
	}
	best := 0
	for i := 1; i < len(cands); i++ {
		if better(cands[i].stats, cands[best].stats) {
			best = i
		}
	}
	if len(cands) > 1 {
		vals := make([]any, len(vs))
		for i, v := range vs {
			vals[i] = v.v
		}
		f.conflict(path, vals)
	}
	return cands[best].v
}

// canon is a value's identity for votes and list de-duplication: its JSON
// encoding with sorted keys and strings compared after trimming and case
// folding.
func canon(v any) string {
	if s, ok := v.(string); ok {
		return "s:" + strings.ToLower(strings.Join(strings.Fields(s), " "))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// parseObject decodes text as a JSON object, tolerating surrounding white
// space and a markdown code fence.
func parseObject(text string) (map[string]any, bool) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") {
		if nl := strings.IndexByte(t, '\n'); nl >= 0 {
			t = strings.TrimSuffix(strings.TrimSpace(t[nl+1:]), "```")
		}
	}
	if !strings.HasPrefix(strings.TrimSpace(t), "{") {
		return nil, false
	}
	d := json.NewDecoder(strings.NewReader(t))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	if _, err := d.Token(); err == nil {
		return nil, false // trailing data
	}
	return m, true
}

// pickText votes among free-text answers by their white-space-normalised
// text.
func pickText(cands []weighted) string {
	f := &fuser{res: &Result{}}
	norm := make([]weighted, len(cands))
	orig := map[string]string{}
	for i, c := range cands {
		n := strings.Join(strings.Fields(c.v.(string)), " ")
		norm[i] = weighted{v: n, w: c.w, order: c.order}
		if _, ok := orig[n]; !ok {
			orig[n] = c.v.(string)
		}
	}
	return orig[f.vote(norm, "").(string)]
}

// minJoinOverlap is the shortest literal suffix/prefix repeat removed at a
// join; shorter matches are likely coincidence ("the ").
const minJoinOverlap = 16

// joinTexts concatenates fragment answers with a blank line between them,
// removing text the next answer repeats from the end of the previous one.
func joinTexts(ts []string) string {
	var b strings.Builder
	prev := ""
	for _, t := range ts {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if prev != "" {
			t = strings.TrimSpace(dropRepeat(prev, t))
			if t == "" {
				continue
			}
			b.WriteString("\n\n")
		}
		b.WriteString(t)
		prev = t
	}
	return b.String()
}

// dropRepeat removes from next the longest prefix that is a suffix of prev
// (at least minJoinOverlap bytes, bounded to 4 KiB), then any leading
// sentences of next that also end prev.
func dropRepeat(prev, next string) string {
	const window = 4096
	p := prev
	if len(p) > window {
		p = p[len(p)-window:]
	}
	n := next
	if len(n) > window {
		n = n[:window]
	}
	if k := suffixPrefix(p, n); k >= minJoinOverlap {
		next = next[k:]
	}
	tail := sentences(p)
	if len(tail) > 5 {
		tail = tail[len(tail)-5:]
	}
	seen := map[string]bool{}
	for _, s := range tail {
		seen[normSentence(s)] = true
	}
	for {
		head := sentences(next)
		if len(head) == 0 || !seen[normSentence(head[0])] || normSentence(head[0]) == "" {
			return next
		}
		next = strings.TrimSpace(next[len(head[0]):])
	}
}

// suffixPrefix returns the length of the longest suffix of a that is a
// prefix of b, by the KMP failure function of b + "\x00" + a.
func suffixPrefix(a, b string) int {
	s := make([]byte, 0, len(a)+len(b)+1)
	s = append(append(append(s, b...), 0), a...)
	pi := make([]int32, len(s))
	for i := 1; i < len(s); i++ {
		k := pi[i-1]
		for k > 0 && s[i] != s[k] {
			k = pi[k-1]
		}
		if s[i] == s[k] {
			k++
		}
		pi[i] = k
	}
	return int(min(pi[len(s)-1], int32(len(b))))
}

// sentences splits s after sentence punctuation followed by white space (or
// after CJK sentence punctuation); each piece keeps its trailing space.
func sentences(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		end := -1
		switch r {
		case '.', '!', '?':
			if i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t') {
				end = i
			}
		case '。', '！', '？':
			end = i
		}
		if end >= 0 {
			for end < len(s) && (s[end] == ' ' || s[end] == '\n' || s[end] == '\t') {
				end++
			}
			out = append(out, s[start:end])
			start, i = end, end
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func normSentence(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), " "))
}
