package classify

import (
	"unicode"
	"unicode/utf8"
)

// Feature extraction. A text is read as a stream of tokens:
//
//   - words: runs of letters, digits and '_' (lower-cased; every digit
//     becomes '0' so that amounts and versions generalise);
//   - symbol runs: up to 3 consecutive ASCII punctuation characters ("():",
//     "=>", "{") or one non-ASCII symbol ("¥", "，");
//   - CJK characters (Han, kana, Hangul), each its own token.
//
// Features, each hashed into one of numBuckets buckets:
//
//   - every token (unigram) and every pair of adjacent tokens (bigram; for
//     Chinese this is the character bigram that carries most words);
//   - every triple of adjacent CJK characters;
//   - character trigrams inside each word, with '^' and '$' marking its ends
//     (so "dosage" gives ^do dos osa sag age ge$).
//
// featureVersion is mixed into the corpus hash stored with the model: change
// it whenever the extraction changes so TestTrain demands a retrain.
const featureVersion = 3

const (
	bucketBits = 16
	numBuckets = 1 << bucketBits
	maxWordLen = 32 // longer words hash fully but give no more trigrams
)

// Seeds keep the feature kinds apart in the hash space.
const (
	seedUni  = 0x9e3779b97f4a7c15
	seedBi   = 0xc2b2ae3d27d4eb4f
	seedTri  = 0x165667b19e3779f9
	seedChar = 0x27d4eb2f165667c5
	fnvOff   = 14695981039346656037
	fnvPrime = 1099511628211
)

// mix maps a 64-bit feature hash to a bucket by Fibonacci hashing: one
// multiply, keeping the well-mixed high bits.
func mix(h uint64) uint32 {
	h ^= h >> 29
	return uint32((h * 0x9e3779b97f4a7c15) >> (64 - bucketBits))
}

func isCJK(r rune) bool {
	return (r >= 0x3040 && r <= 0x30ff) || // kana
		(r >= 0x3400 && r <= 0x4dbf) || // CJK extension A
		(r >= 0x4e00 && r <= 0x9fff) || // CJK unified
		(r >= 0xac00 && r <= 0xd7af) || // Hangul
		(r >= 0xf900 && r <= 0xfaff) // compatibility ideographs
}

// tokenizer state shared by the two entry points.
type fx struct {
	dst        []uint32
	prev       uint64 // hash of the previous token; 0 at the start
	cjk1, cjk2 rune   // the last two tokens if they were CJK characters, else 0
	grams      bool   // emit character trigrams (off for lexicon terms)
}

func (s *fx) token(h uint64) {
	s.dst = append(s.dst, mix(h^seedUni))
	if s.prev != 0 {
		s.dst = append(s.dst, mix((s.prev*fnvPrime)^h^seedBi))
	}
	s.prev = h
}

// appendFeatures appends the bucket of every feature of text[:MaxBytes] to dst.
func appendFeatures(dst []uint32, text string) []uint32 {
	if len(text) > MaxBytes {
		n := MaxBytes
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		text = text[:n]
	}
	s := fx{dst: dst, grams: true}
	s.run(text)
	return s.dst
}

// termFeatures returns the features a lexicon term contributes: its unigram
// when it is one token, else its bigrams.
func termFeatures(term string) []uint32 {
	s := fx{}
	s.run(term)
	if len(s.dst) == 1 {
		return s.dst
	}
	var out []uint32
	for i := 2; i < len(s.dst); i += 2 {
		out = append(out, s.dst[i])
	}
	return out
}

// ASCII byte classes, looked up once per byte on the fast path.
const (
	clsOther = iota // control characters
	clsSpace
	clsWord
	clsPunct
)

// asciiClass maps an ASCII byte to its class; asciiFold maps a word byte to
// its folded form (lower case, digits to '0').
var asciiClass, asciiFold = func() (cls, fold [utf8.RuneSelf]byte) {
	for c := 0; c < utf8.RuneSelf; c++ {
		b := byte(c)
		switch {
		case b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f':
			cls[c] = clsSpace
		case b == '_' || 'a' <= b && b <= 'z':
			cls[c], fold[c] = clsWord, b
		case 'A' <= b && b <= 'Z':
			cls[c], fold[c] = clsWord, b+'a'-'A'
		case '0' <= b && b <= '9':
			cls[c], fold[c] = clsWord, '0'
		case b > ' ' && b < 0x7f:
			cls[c] = clsPunct
		}
	}
	return
}()

func (s *fx) run(text string) {
	var word [maxWordLen]rune
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			switch asciiClass[c] {
			case clsWord:
				i = s.word(text, i, &word)
			case clsPunct:
				h := uint64(fnvOff)
				j := i
				for j < len(text) && j-i < 3 && text[j] < utf8.RuneSelf && asciiClass[text[j]] == clsPunct {
					h = (h ^ uint64(text[j])) * fnvPrime
					j++
				}
				s.token(h)
				s.cjk1, s.cjk2 = 0, 0
				i = j
			default:
				// Separators only; bigrams span them.
				i++
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case isCJK(r):
			h := uint64(r) * fnvPrime
			s.token(h)
			if s.grams && s.cjk1 != 0 && s.cjk2 != 0 {
				s.dst = append(s.dst, mix(uint64(s.cjk1)<<42^uint64(s.cjk2)<<21^uint64(r)^seedTri))
			}
			s.cjk1, s.cjk2 = s.cjk2, r
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			i = s.word(text, i, &word)
			continue
		case unicode.IsSpace(r):
		default:
			// A non-ASCII symbol or punctuation mark: "¥", "€", "，", "。".
			s.token((uint64(r) ^ fnvOff) * fnvPrime)
			s.cjk1, s.cjk2 = 0, 0
		}
		i += size
	}
}

// word consumes the word starting at text[i], emits its features and returns
// the index just past it.
func (s *fx) word(text string, i int, buf *[maxWordLen]rune) int {
	h := uint64(fnvOff)
	n := 0
	j := i
	for j < len(text) {
		c := text[j]
		var r rune
		if c < utf8.RuneSelf {
			if asciiClass[c] != clsWord {
				break
			}
			r = rune(asciiFold[c])
			j++
		} else {
			var sz int
			r, sz = utf8.DecodeRuneInString(text[j:])
			if isCJK(r) || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
				break
			}
			r = unicode.ToLower(r)
			if unicode.IsDigit(r) {
				r = '0'
			}
			j += sz
		}
		h = (h ^ uint64(r)) * fnvPrime
		if n < maxWordLen {
			buf[n] = r
		}
		n++
	}
	s.token(h)
	s.cjk1, s.cjk2 = 0, 0
	if s.grams {
		s.wordGrams(buf[:min(n, maxWordLen)])
	}
	return j
}

func (s *fx) wordGrams(w []rune) {
	if len(w) < 2 {
		return
	}
	a, b := rune('^'), w[0]
	for _, r := range w[1:] {
		s.dst = append(s.dst, mix(uint64(a)<<42^uint64(b)<<21^uint64(r)^seedChar))
		a, b = b, r
	}
	s.dst = append(s.dst, mix(uint64(a)<<42^uint64(b)<<21^uint64('$')^seedChar))
}
