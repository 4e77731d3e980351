// Package classify computes a request's domain signature: which of a small
// set of domains (finance, medical, legal, code, general, plus any added from
// config) a prompt belongs to, in English and Chinese; and its complexity
// (simple, medium or complex: see Complexity), which tiering routes by.
//
// The model is a multinomial logistic regression over hashed sparse features
// (see features.go): word unigrams and bigrams, character trigrams inside
// words, and CJK character unigrams, bigrams and trigrams. Its weights are
// trained from the labelled corpus in testdata/train.txt by
// `go test ./internal/classify -run TestTrain -update`, which rewrites
// model.bin; the package embeds that file. testdata/heldout.txt is a separate
// labelled set never used in training; TestHeldOutAccuracy measures it.
//
// Only the first MaxBytes of a text are classified, which bounds the cost of a
// call (about 15 µs of CPU for 2 KiB on a loaded 2-core machine; see
// BenchmarkClassify, which reports CPU time per call next to wall time).
//
// A *Classifier is immutable after construction and safe for concurrent use;
// Domain never blocks and does no I/O. The package imports only the standard
// library.
package classify

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

// MaxBytes is how much of a text Domain reads: the first 4 KiB (cut back to
// a UTF-8 boundary). The opening of a prompt carries its domain; reading more
// costs time without changing the answer in practice.
const MaxBytes = 4096

// Built-in domain names, in the model's column order.
const (
	Finance = "finance"
	Medical = "medical"
	Legal   = "legal"
	Code    = "code"
	General = "general"
)

// ErrInvalidLexicon reports a lexicon option that cannot be applied.
var ErrInvalidLexicon = errors.New("classify: invalid lexicon")

// Signature is the domain signature of one text.
type Signature struct {
	// Domain is the most probable domain.
	Domain string
	// Confidence is Domain's probability, in (0, 1].
	Confidence float64
	// Scores holds every domain's probability; they sum to 1. It is a fresh
	// map owned by the caller.
	Scores map[string]float64
}

// Classifier assigns domain signatures. Build one with New or take the shared
// Default. It is immutable and safe for concurrent use.
type Classifier struct {
	domains []string
	// w holds numBuckets rows of len(domains) weights, bucket-major, so one
	// feature touches one contiguous row. Weights are fixed-point: the real
	// weight is w×scale. int16 keeps the table at 640 KiB for 5 domains, which
	// stays in cache far better than float32 and sums exactly in int32.
	w     []int16
	scale float32
	bias  []float32
}

// Option configures New.
type Option func(*Classifier) error

//go:embed model.bin
var modelBin []byte

var base = sync.OnceValues(func() (*Classifier, error) { return decodeModel(modelBin) })

// Default returns the classifier trained from the shipped corpus, with no
// lexicons. It is built once and shared.
func Default() *Classifier {
	c, err := base()
	if err != nil {
		// The model is embedded and checked by TestTrain; a decode failure is
		// a build defect, not a runtime condition.
		panic(fmt.Sprintf("classify: embedded model: %v", err))
	}
	return c
}

// New returns a classifier built from the shipped model with opts applied in
// order. The shared Default is never modified.
func New(opts ...Option) (*Classifier, error) {
	d := Default()
	c := &Classifier{
		domains: append([]string(nil), d.domains...),
		w:       append([]int16(nil), d.w...),
		scale:   d.scale,
		bias:    append([]float32(nil), d.bias...),
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// WithLexicon adds domain (if the model does not know it) and adds each
// term's weight, times LexiconScale, to that domain's weight for the term's
// feature. Logits are divided by the square root of the text's feature count,
// so one occurrence of a term of weight w raises the domain's logit by about w
// in a short prompt (~100 features) and by w/4 in a 2 KiB one. 1 is a mild
// hint, 3 to 5 a strong one; negative weights push away from the domain.
//
// A term is lower-cased and reduced to the features the classifier sees: a
// single word (or a single CJK character) is a unigram; several words or CJK
// characters are their bigrams, and the weight is shared equally between them.
// A new domain starts with a bias of NewDomainBias, so it wins only on
// evidence from its terms. Hash collisions mean a term may share its bucket
// with an unrelated feature; with 2^16 buckets that is rare.
func WithLexicon(domain string, terms map[string]float64) Option {
	return func(c *Classifier) error {
		domain = strings.TrimSpace(domain)
		if domain == "" {
			return fmt.Errorf("%w: empty domain name", ErrInvalidLexicon)
		}
		col := c.column(domain)
		if col < 0 {
			c.addDomain(domain)
			col = len(c.domains) - 1
		}
		// Sorted so that float accumulation is independent of map order.
		keys := make([]string, 0, len(terms))
		for t := range terms {
			keys = append(keys, t)
		}
		sort.Strings(keys)
		k := len(c.domains)
		for _, t := range keys {
			wt := terms[t]
			if math.IsNaN(wt) || math.IsInf(wt, 0) {
				return fmt.Errorf("%w: term %q of domain %q has weight %v", ErrInvalidLexicon, t, domain, wt)
			}
			feats := termFeatures(t)
			if len(feats) == 0 {
				return fmt.Errorf("%w: term %q of domain %q has no words", ErrInvalidLexicon, t, domain)
			}
			share := wt * LexiconScale / float64(len(feats)) / float64(c.scale)
			for _, f := range feats {
				// Saturates at the int16 range, hundreds of times the
				// largest trained weight.
				v := float64(c.w[int(f)*k+col]) + math.Round(share)
				c.w[int(f)*k+col] = int16(max(math.MinInt16, min(math.MaxInt16, v)))
			}
		}
		return nil
	}
}

// LexiconScale converts a lexicon weight to model units: the square root of
// the feature count of a typical short prompt.
const LexiconScale = 10

// NewDomainBias is the bias of a domain added by WithLexicon: a logit offset
// low enough that text without its terms stays in the trained domains.
const NewDomainBias = -1.5

func (c *Classifier) column(domain string) int {
	for i, d := range c.domains {
		if d == domain {
			return i
		}
	}
	return -1
}

func (c *Classifier) addDomain(domain string) {
	k := len(c.domains)
	w := make([]int16, numBuckets*(k+1))
	for b := 0; b < numBuckets; b++ {
		copy(w[b*(k+1):b*(k+1)+k], c.w[b*k:b*k+k])
	}
	c.w = w
	c.domains = append(c.domains, domain)
	c.bias = append(c.bias, NewDomainBias)
}

var featPool = sync.Pool{New: func() any { b := make([]uint32, 0, 4096); return &b }}

// Domain returns text's domain: the classifier's best-scoring one, without
// building the per-domain scores (the request path needs only the label). It
// reads at most MaxBytes of text; an empty or feature-less text is General.
func (c *Classifier) Domain(text string) string {
	var logits [maxDomains]float64
	_, best := c.logits(text, logits[:0])
	return c.domains[best]
}

// logits fills buf with the domains' probabilities for text and returns
// them with the index of the most likely.
func (c *Classifier) logits(text string, buf []float64) ([]float64, int) {
	k := len(c.domains)
	lg := buf[:0]
	if cap(buf) >= k {
		lg = buf[:k]
		clear(lg)
	} else {
		lg = make([]float64, k)
	}
	bp := featPool.Get().(*[]uint32)
	feats := appendFeatures((*bp)[:0], text)
	if len(feats) > 0 {
		c.accumulate(lg, feats)
		inv := float64(c.scale) / math.Sqrt(float64(len(feats)))
		for i := range lg {
			lg[i] *= inv
		}
	}
	*bp = feats
	featPool.Put(bp)
	for i := range lg {
		lg[i] += float64(c.bias[i])
	}
	softmax(lg)
	best := 0
	for i, p := range lg {
		if p > lg[best] {
			best = i
		}
	}
	return lg, best
}

// maxDomains sizes the on-stack logit array; more domains still work, with
// one allocation.
const maxDomains = 16

func (c *Classifier) accumulate(lg []float64, feats []uint32) {
	k := len(lg)
	if k == 5 {
		// The shipped model: an unrolled row keeps the loop to one bounds
		// check per feature.
		var a0, a1, a2, a3, a4 int32
		for _, f := range feats {
			r := c.w[int(f)*5 : int(f)*5+5 : int(f)*5+5]
			a0 += int32(r[0])
			a1 += int32(r[1])
			a2 += int32(r[2])
			a3 += int32(r[3])
			a4 += int32(r[4])
		}
		lg[0], lg[1], lg[2], lg[3], lg[4] = float64(a0), float64(a1), float64(a2), float64(a3), float64(a4)
		return
	}
	acc := make([]int32, k)
	for _, f := range feats {
		r := c.w[int(f)*k : int(f)*k+k]
		for i, v := range r {
			acc[i] += int32(v)
		}
	}
	for i, v := range acc {
		lg[i] = float64(v)
	}
}

func softmax(x []float64) {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	var s float64
	for i, v := range x {
		x[i] = math.Exp(v - m)
		s += x[i]
	}
	for i := range x {
		x[i] /= s
	}
}
