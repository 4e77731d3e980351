package jsonx

import (
	"math"
	"strconv"
)

// CountFault says why a number is not a count (see Count).
type CountFault uint8

// The faults of Count.
const (
	CountOK CountFault = iota
	// CountNotNumber: not a JSON number at all.
	CountNotNumber
	// CountNotInteger: a number with a fractional part.
	CountNotInteger
	// CountNegative: below 0.
	CountNegative
	// CountTooLarge: above max (an integer too large for int64 or float64
	// included: too large, not a non-integer).
	CountTooLarge
)

// Count reads v, a JSON value, as a whole count from 0 to max: an integral
// number however spelled (1024, 1024.0, 1e3). Each codec words the fault.
func Count(v []byte, max int64) (int64, CountFault) {
	if len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		return 0, CountNotNumber
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(v), 64)
		switch {
		case ferr == nil && f != math.Trunc(f), ferr != nil && !math.IsInf(f, 0):
			return 0, CountNotInteger
		case f < 0:
			n = -1
		case f > float64(max):
			n = max + 1
		default:
			n = int64(f)
		}
	}
	switch {
	case n < 0:
		return 0, CountNegative
	case n > max:
		return 0, CountTooLarge
	}
	return n, CountOK
}

// NumberText is v cut at 32 bytes for an error message.
func NumberText(v []byte) string {
	if len(v) > 32 {
		return string(v[:32]) + "…"
	}
	return string(v)
}
