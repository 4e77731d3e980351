package normalize

import (
	"strings"
	"unicode"
)

// Tokens splits an answer into the words Diversity compares: split at white
// space, lower-cased, with leading and trailing punctuation removed (a word
// that is only punctuation is dropped).
func Tokens(text string) []string {
	fields := strings.Fields(text)
	out := fields[:0]
	for _, f := range fields {
		f = strings.TrimFunc(f, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) })
		if f != "" {
			out = append(out, strings.ToLower(f))
		}
	}
	return out
}

// Distance is the normalised word-level edit distance of a and b: the
// Levenshtein distance over words (insert, delete, substitute, each 1)
// divided by the longer length; 0 for identical sequences, 1 for sequences
// with nothing in common, 0 when both are empty.
func Distance(a, b []string) float64 {
	n := max(len(a), len(b))
	if n == 0 {
		return 0
	}
	if len(a) < len(b) {
		a, b = b, a
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return float64(prev[len(b)]) / float64(n)
}

// Diversity is the mean pairwise Distance over samples (several answers to
// one prompt at one temperature): 0 when every sample is the same, towards
// 1 when no two share words in order. Fewer than two samples give 0.
func Diversity(samples [][]string) float64 {
	sum, pairs := 0.0, 0
	for i := range samples {
		for j := i + 1; j < len(samples); j++ {
			sum += Distance(samples[i], samples[j])
			pairs++
		}
	}
	if pairs == 0 {
		return 0
	}
	return sum / float64(pairs)
}

// MeanDiversity averages Diversity over prompts: perPrompt[p] holds the
// samples of prompt p. No prompts give 0.
func MeanDiversity(perPrompt [][][]string) float64 {
	if len(perPrompt) == 0 {
		return 0
	}
	sum := 0.0
	for _, s := range perPrompt {
		sum += Diversity(s)
	}
	return sum / float64(len(perPrompt))
}
