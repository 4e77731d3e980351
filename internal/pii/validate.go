package pii

// The checks on candidate digits: each takes the value's characters without
// separators.

// luhn reports whether the digits d pass the Luhn (mod 10) check.
func luhn(d []byte) bool {
	sum := 0
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if (len(d)-1-i)%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// cardIIN reports whether d starts with the issuer prefix of a card scheme
// that issues numbers of len(d) digits.
func cardIIN(d []byte) bool {
	n := len(d)
	p2 := num(d[:2])
	p3 := num(d[:3])
	p4 := num(d[:4])
	switch {
	case d[0] == '4': // Visa (13-digit numbers are no longer issued; EAN-13 product codes are)
		return n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720: // Mastercard
		return n == 16
	case p2 == 34 || p2 == 37: // American Express
		return n == 15
	case p4 == 6011 || p2 == 65 || (p3 >= 644 && p3 <= 649): // Discover
		return n >= 16 && n <= 19
	case p4 >= 3528 && p4 <= 3589: // JCB
		return n >= 16 && n <= 19
	case p2 == 62: // UnionPay
		return n >= 16 && n <= 19
	case p2 == 36 || p2 == 38 || p2 == 39 || (p3 >= 300 && p3 <= 305): // Diners Club
		return n >= 14 && n <= 19
	case p2 == 50 || (p2 >= 56 && p2 <= 58) || p2 == 63 || p2 == 67: // Maestro
		return n >= 16 && n <= 19
	}
	return false
}

func num(d []byte) int {
	v := 0
	for _, c := range d {
		v = v*10 + int(c-'0')
	}
	return v
}

// cnIDValid reports whether d (17 digits and a digit or X) is a Chinese
// resident identity number: a province code, a real birth date and the
// ISO 7064 MOD 11-2 check character.
func cnIDValid(d []byte) bool {
	if len(d) != 18 || !cnProvince(num(d[:2])) {
		return false
	}
	weights := [17]int{7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2}
	sum := 0
	for i := 0; i < 17; i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
		sum += int(d[i]-'0') * weights[i]
	}
	check := "10X98765432"[sum%11]
	last := d[17]
	if last == 'x' {
		last = 'X'
	}
	if last != check {
		return false
	}
	return validDate(num(d[6:10]), num(d[10:12]), num(d[12:14]), 1900, 2099)
}

// cnProvince: the first two digits name a province-level division (GB/T
// 2260), or Taiwan, Hong Kong, Macau (71, 81, 82, 83) and 91 (abroad).
func cnProvince(p int) bool {
	switch {
	case p >= 11 && p <= 15, p >= 21 && p <= 23, p >= 31 && p <= 37, p >= 41 && p <= 46,
		p >= 50 && p <= 54, p >= 61 && p <= 65, p == 71, p >= 81 && p <= 83, p == 91:
		return true
	}
	return false
}

func validDate(y, m, day, minY, maxY int) bool {
	if y < minY || y > maxY || m < 1 || m > 12 || day < 1 {
		return false
	}
	days := [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[m]
	if m == 2 && y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		days = 29
	}
	return day <= days
}

// ssnValid reports whether the nine digits d are a possible US social
// security number: area not 000, 666 or 9xx, group not 00, serial not 0000.
func ssnValid(d []byte) bool {
	if len(d) != 9 {
		return false
	}
	area, group, serial := num(d[:3]), num(d[3:5]), num(d[5:])
	return area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

// ibanValid reports whether s (upper-case letters and digits, no spaces)
// has its country's length and passes the ISO 13616 mod-97 check.
func ibanValid(s []byte) bool {
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	want, ok := ibanLength[string(s[:2])]
	if !ok || want != len(s) {
		return false
	}
	rem := 0
	for i := 0; i < len(s); i++ {
		c := s[(i+4)%len(s)]
		switch {
		case c >= '0' && c <= '9':
			rem = (rem*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			rem = (rem*100 + int(c-'A') + 10) % 97
		default:
			return false
		}
	}
	return rem == 1
}

// ibanLength is the IBAN length of each country (SWIFT IBAN registry).
var ibanLength = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
	"BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
	"ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
	"HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
	"LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
	"RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}
