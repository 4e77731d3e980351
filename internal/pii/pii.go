// Package pii finds personal data and secrets in text: e-mail addresses,
// phone numbers, payment card numbers, IBANs, Chinese resident identity
// numbers, US social security numbers, IP addresses, provider and cloud
// keys, bearer tokens, and the custom patterns and dictionaries of Config.
// It knows nothing of requests: the engine hands it each text the model
// would see and decides what to do with the matches.
//
// A Detector is immutable after New and safe for concurrent use; Find does
// no I/O. The package imports only the standard library.
package pii

import "errors"

// Kind names one kind of personal data; it is what placeholders, errors,
// audit rows and metrics show (never the value).
type Kind string

// The built-in kinds.
const (
	Email  Kind = "EMAIL"
	Phone  Kind = "PHONE"
	Card   Kind = "CARD"
	IBAN   Kind = "IBAN"
	CNID   Kind = "CN_ID"
	SSN    Kind = "SSN"
	IPv4   Kind = "IPV4"
	IPv6   Kind = "IPV6"
	Secret Kind = "SECRET"
)

// Match is one finding: Kind and the byte offsets [Start, End) of the value
// in the text given to Find.
type Match struct {
	Kind       Kind
	Start, End int
}

// ErrConfig is wrapped by every error New returns.
var ErrConfig = errors.New("invalid pii config")

// Config adds custom kinds to the built-in ones. The zero value detects the
// built-in kinds only.
type Config struct {
	// Patterns are custom kinds found by a regular expression (Go RE2
	// syntax); each match of Regex is a value of kind Name.
	Patterns []Pattern `yaml:"patterns"`
	// Dictionaries are custom kinds found by listed words or phrases,
	// matched case-insensitively on word boundaries.
	Dictionaries []Dictionary `yaml:"dictionaries"`
}

// Pattern is a custom kind found by a regular expression.
type Pattern struct {
	Name  string `yaml:"name"`
	Regex string `yaml:"regex"`
}

// Dictionary is a custom kind found by a list of words or phrases.
type Dictionary struct {
	Name  string   `yaml:"name"`
	Words []string `yaml:"words"`
}
