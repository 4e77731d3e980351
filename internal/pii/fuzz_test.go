package pii

import (
	"net/netip"
	"testing"
)

// FuzzFind: Find never panics, its spans are in range, sorted and
// disjoint, and every checksum kind it reports validates.
func FuzzFind(f *testing.F) {
	for _, tc := range findCases {
		f.Add(tc.text)
	}
	d, err := New(Config{Dictionaries: []Dictionary{{Name: "WORD", Words: []string{"falcon", "猎鹰"}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		end := 0
		for _, m := range d.Find(text) {
			if m.Start < end || m.End <= m.Start || m.End > len(text) {
				t.Fatalf("span [%d,%d) after %d in %d bytes", m.Start, m.End, end, len(text))
			}
			end = m.End
			if !validates(m.Kind, text[m.Start:m.End]) {
				t.Fatalf("%s %q does not validate", m.Kind, text[m.Start:m.End])
			}
		}
	})
}

// validates checks a found value on its own, separators removed and
// full-width digits read as ASCII.
func validates(k Kind, v string) bool {
	var b []byte
	for _, r := range v {
		switch {
		case r < 0x80 && isAlnum(byte(r)):
			b = append(b, byte(r))
		case r >= '０' && r <= '９':
			b = append(b, byte('0'+r-'０'))
		case r == 'Ｘ' || r == 'ｘ':
			b = append(b, 'X')
		}
	}
	switch k {
	case Card:
		return len(b) >= 13 && len(b) <= 19 && luhn(b) && cardIIN(b)
	case IBAN:
		return ibanValid(b)
	case CNID:
		return cnIDValid(b)
	case SSN:
		return ssnValid(b)
	case IPv4:
		a, err := netip.ParseAddr(v)
		return err == nil && a.Is4()
	case IPv6:
		a, err := netip.ParseAddr(v)
		return err == nil && a.Is6()
	}
	return true
}
