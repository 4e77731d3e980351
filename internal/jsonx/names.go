package jsonx

import (
	"encoding/binary"
	"fmt"
)

// Names is a fixed table of strings a codec reads often (member names and
// enumerated values), so that decoding one of them returns the table's
// constant string and allocates nothing. It replaces a switch with a case
// per name: the table is data, and a lookup costs about what the switch
// did (instructions per parse in BENCHMARKS.md, issue 26).
//
// The table is open-addressed: 256 slots, at most half of them filled,
// linear probing on collision. Each slot keeps its name's fingerprint: the
// length and two words that together hold every byte of a name of up to 16
// bytes (see fingerprint). A lookup computes the fingerprint of its input
// with a few loads, hashes it to a slot and compares words, so that a name
// of up to 16 bytes is matched without a call to compare bytes.
type Names struct {
	lens  uint64 // bit n set: some name is n bytes long
	slots [namesSlots]nameSlot
}

type nameSlot struct {
	a, b uint64
	s    string
}

const namesSlots = 256

// NewNames returns the table of names. It panics on an empty name, one
// longer than 63 bytes, a duplicate or more than namesSlots/2 names: the tables are package-level
// literals, so a mistake shows at the first test run.
func NewNames(names ...string) *Names {
	if len(names) > namesSlots/2 {
		panic(fmt.Sprintf("jsonx.NewNames: %d names, at most %d", len(names), namesSlots/2))
	}
	t := new(Names)
	for _, s := range names {
		if s == "" || len(s) > 63 {
			panic(fmt.Sprintf("jsonx.NewNames: name %q: want 1 to 63 bytes", s))
		}
		t.lens |= 1 << len(s)
		a, b := fingerprint([]byte(s))
		i := slotOf(a, b)
		for ; t.slots[i].s != ""; i++ {
			if t.slots[i].s == s {
				panic("jsonx.NewNames: duplicate name " + s)
			}
		}
		t.slots[i] = nameSlot{a: a, b: b, s: s}
	}
	return t
}

// fingerprint returns two words that hold every byte of p when len(p) ≤ 16
// (p not empty): its first and last 8 bytes (overlapping when shorter than
// 16), its first and last 4 when shorter than 8, and its first, middle and
// last byte when shorter than 4. For a given length, equal fingerprints are
// equal strings up to 16 bytes; beyond, the bytes between the words are
// compared as well.
func fingerprint(p []byte) (a, b uint64) {
	n := len(p)
	switch {
	case n >= 8:
		return binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[n-8:])
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(p)), uint64(binary.LittleEndian.Uint32(p[n-4:]))
	default:
		return uint64(p[0]) | uint64(p[n>>1])<<8 | uint64(p[n-1])<<16, 0
	}
}

// slotOf is the slot where a probe for a name with fingerprint a, b starts.
// The uint8 index wraps at namesSlots, so the probe needs no bounds check.
func slotOf(a, b uint64) uint8 {
	return uint8((a*0x9E3779B97F4A7C15 ^ b*0xC2B2AE3D27D4EB4F) >> 56)
}

// Lookup returns the table's string equal to raw and true, or "" and false
// when raw is not in the table. A length no name has (a prompt's text, most
// values) is answered before any hashing, as a switch answers it.
func (t *Names) Lookup(raw []byte) (string, bool) {
	n := len(raw)
	if t.lens>>uint(n)&1 == 0 { // a shift of 64 or more is 0
		return "", false
	}
	a, b := fingerprint(raw)
	for i := slotOf(a, b); ; i++ {
		sl := &t.slots[i]
		if sl.a == a && sl.b == b && len(sl.s) == n && (n <= 16 || sl.s[8:n-8] == string(raw[8:n-8])) {
			return sl.s, true
		}
		if sl.s == "" {
			return "", false
		}
	}
}
