package outcome

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
)

func TestOf(t *testing.T) {
	h := http.Header{"X-Ratelimit-Remaining-Requests": {"3"}}
	res := &provider.Result{Status: 200, Header: h}
	base := Attempt{Latency: 900 * time.Millisecond, TTFT: 200 * time.Millisecond, Stream: true, Result: res}
	cases := []struct {
		name   string
		a      Attempt
		f      *policy.Failure
		want   health.Outcome
		wantOK bool
	}{
		{name: "success", a: base, want: health.Outcome{Latency: base.Latency, TTFT: base.TTFT, Status: 200, Header: h}, wantOK: true},
		{name: "success telling no latency", a: Attempt{Latency: time.Second, NoLatency: true},
			want: health.Outcome{Latency: time.Second, NoLatency: true}, wantOK: true},
		{name: "connect failure: its kind, a fault, the breaker counts it",
			a:    Attempt{Latency: time.Second},
			f:    &policy.Failure{Kind: policy.KindServerError, Reason: "connect", Decision: policy.DecideRetry, Err: &provider.Error{Kind: provider.KindConnect}},
			want: health.Outcome{Latency: time.Second, Kind: health.KindConnect, Failure: true}},
		{name: "timeout wrapped", a: Attempt{Latency: time.Second},
			f: &policy.Failure{Kind: policy.KindServerError, Reason: "timeout", Decision: policy.DecideRetry,
				Err: errWrap(&provider.Error{Kind: provider.KindTimeout})},
			want: health.Outcome{Latency: time.Second, Kind: health.KindTimeout, Failure: true}},
		{name: "5xx: the reason names it, the status is the failure's", a: base,
			f: &policy.Failure{Kind: policy.KindServerError, Reason: "server_error", Decision: policy.DecideRetry, Status: 503,
				Err: &provider.Error{Kind: provider.KindStatus}},
			want: health.Outcome{Latency: base.Latency, TTFT: base.TTFT, Status: 503, Header: h, Kind: "server_error", Failure: true}},
		{name: "429: a fault for health, not for the breaker", a: Attempt{Latency: time.Second},
			f: &policy.Failure{Kind: policy.KindRateLimited, Reason: "rate_limited", Decision: policy.DecideRetry, Capacity: true, Status: 429,
				RetryAfter: 3 * time.Second},
			want: health.Outcome{Latency: time.Second, Status: 429, RetryAfter: 3 * time.Second, Failure: true}, wantOK: true},
		{name: "unreachable: the prober, not the breaker", a: Attempt{Latency: time.Second},
			f:    &policy.Failure{Kind: policy.KindServerError, Reason: "connect", Decision: policy.DecideRetry, Unreachable: true},
			want: health.Outcome{Latency: time.Second, Failure: true}, wantOK: true},
		{name: "breaker refusal: not the endpoint's fault", a: Attempt{Latency: time.Second},
			f:    &policy.Failure{Kind: policy.KindBreakerOpen, Reason: "breaker_open", Decision: policy.DecideRetry},
			want: health.Outcome{Latency: time.Second}, wantOK: true},
		{name: "caller's bad request: not a fault", a: Attempt{Latency: time.Second},
			f:    &policy.Failure{Kind: policy.KindServerError, Reason: "bad_request", Status: 400},
			want: health.Outcome{Latency: time.Second, Status: 400}, wantOK: true},
		{name: "cancelled: a lower bound, never a fault", a: Attempt{Latency: time.Second, Stream: true},
			f:    &policy.Failure{Kind: policy.KindCanceled, Reason: "canceled"},
			want: health.Outcome{Cancelled: true, Latency: time.Second, TTFT: time.Second}, wantOK: true},
		{name: "a hedge's loser", a: Attempt{Latency: time.Second, TTFT: 300 * time.Millisecond, Stream: true},
			f:    &policy.Failure{Kind: policy.KindCancelledLoser, Reason: "cancelled_loser"},
			want: health.Outcome{Cancelled: true, Latency: time.Second, TTFT: 300 * time.Millisecond}, wantOK: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := Of(tc.a, tc.f)
			if ok != tc.wantOK {
				t.Errorf("breaker ok = %v, want %v", ok, tc.wantOK)
			}
			if !reflect.DeepEqual(o, tc.want) {
				t.Fatalf("outcome = %+v, want %+v", o, tc.want)
			}
		})
	}
}

func errWrap(err error) error { return errors.Join(errors.New("attempt"), err) }

// A cancelled stream tells its time to first token, or its whole wait as
// a lower bound of it; a cancelled non-stream tells none.
func TestCancelled(t *testing.T) {
	d := 2 * time.Second
	for _, tc := range []struct {
		a    Attempt
		want time.Duration
	}{
		{Attempt{Stream: true, TTFT: time.Second}, time.Second},
		{Attempt{Stream: true}, d},
		{Attempt{TTFT: time.Second}, 0},
	} {
		o := Cancelled(tc.a, d)
		if !o.Cancelled || o.Latency != d || o.TTFT != tc.want || o.Failure {
			t.Fatalf("Cancelled(%+v) = %+v, want TTFT %v", tc.a, o, tc.want)
		}
	}
}
