package sim

import "time"

// KindSlowStream starts a stream at the endpoint's normal pace and, after
// AfterTokens tokens, sends each further token Factor times later
// (default 10): the answer is complete and correct, only slow. It copies
// an overloaded serving node: a provider under load keeps accepting
// requests and streams them slowly rather than refusing them (the same
// overload that ends other calls with a 529 overloaded_error or an
// OpenAI 503 slow_down, PROTOCOLS.md §1.5 and §2.3, shows in the calls it
// admits as a lower token rate; OpenAI's and Anthropic's status pages
// report such episodes as "elevated latency"), and a node whose batch
// filled up mid-answer slows every stream it holds. Nothing in the
// stream says so: only the pace tells.
const KindSlowStream = "slow_stream"

// slowStreamFactor is a slow_stream fault's slowdown when Factor is 0.
const slowStreamFactor = 10

// streamGap is the gap before the token after sent tokens of a stream
// whose normal gap is perToken, under fault (nil: none).
func streamGap(perToken time.Duration, sent int, fault *Fault) time.Duration {
	if fault == nil || fault.Kind != KindSlowStream || sent < fault.AfterTokens {
		return perToken
	}
	f := fault.Factor
	if f == 0 {
		f = slowStreamFactor
	}
	return scale(perToken, f)
}
