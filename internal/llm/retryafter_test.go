package llm

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"absent", http.Header{}, 0},
		{"ms wins", http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}, 1500 * time.Millisecond},
		{"seconds", http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{"fractional seconds", http.Header{"Retry-After": {"0.25"}}, 250 * time.Millisecond},
		{"http date", http.Header{"Retry-After": {"Mon, 30 Nov 2026 12:00:07 GMT"}}, 7 * time.Second},
		{"date in the past", http.Header{"Retry-After": {"Mon, 30 Nov 2026 11:00:00 GMT"}}, 0},
		{"negative", http.Header{"Retry-After": {"-1"}}, 0},
		{"absurd", http.Header{"Retry-After": {"1e12"}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"bad ms falls back", http.Header{"Retry-After-Ms": {"x"}, "Retry-After": {"2"}}, 2 * time.Second},
	} {
		if got := ParseRetryAfter(tc.h, now); got != tc.want {
			t.Errorf("%s: ParseRetryAfter = %v, want %v", tc.name, got, tc.want)
		}
	}
}
