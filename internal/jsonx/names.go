package jsonx

import "fmt"

// Names is a fixed table of strings a codec reads often (member names and
// enumerated values), so that decoding one of them returns the table's
// constant string and allocates nothing. It replaces a switch with a case
// per name: the table is data, and the lookup costs about the same.
//
// The table is open-addressed: 256 slots, at most half of them filled, a
// slot chosen by a hash of the length and three bytes of the name, linear
// probing on collision. A lookup reads one slot in the common case and
// compares the length before the bytes.
type Names struct {
	slots [namesSlots]string
}

const namesSlots = 256

// NewNames returns the table of names. It panics on an empty name, a
// duplicate or more than namesSlots/2 names: the tables are package-level
// literals, so a mistake shows at the first test run.
func NewNames(names ...string) *Names {
	if len(names) > namesSlots/2 {
		panic(fmt.Sprintf("jsonx.NewNames: %d names, at most %d", len(names), namesSlots/2))
	}
	t := new(Names)
	for _, s := range names {
		if s == "" {
			panic("jsonx.NewNames: empty name")
		}
		i := nameHash(s)
		for ; t.slots[i] != ""; i++ {
			if t.slots[i] == s {
				panic("jsonx.NewNames: duplicate name " + s)
			}
		}
		t.slots[i] = s
	}
	return t
}

// nameHash is the slot where a probe for s starts (s not empty). The uint8
// index wraps at namesSlots, so the probe needs no bounds check.
func nameHash[S ~string | ~[]byte](s S) uint8 {
	n := len(s)
	return uint8(n*0x25) ^ s[0]*3 ^ s[n-1]<<2 ^ s[n>>1]*0x11
}

// Lookup returns the table's string equal to raw and true, or "" and false
// when raw is not in the table.
func (t *Names) Lookup(raw []byte) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	for i := nameHash(raw); ; i++ {
		s := t.slots[i]
		if s == string(raw) {
			return s, true
		}
		if s == "" {
			return "", false
		}
	}
}
