package structured

// String returns the kind's lower-case name.
func (k SpanKind) String() string {
	switch k {
	case SpanNumber:
		return "number"
	case SpanCurrency:
		return "currency"
	case SpanPercent:
		return "percent"
	case SpanDate:
		return "date"
	case SpanIdentifier:
		return "identifier"
	}
	return "unknown"
}
