package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/keelmesh/keel/internal/attempt"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
)

// Side is a call beside the model call — a token count, an embeddings
// request — that the engine routes as it routes model calls: among the
// endpoints of the named model (or alias) that can serve it, by live
// health, through the same policy chain (retry and free failover after a
// refusal, the retry budget, hedging, breakers, cooldowns), each attempt
// feeding health and the breaker, the call finished into one Record for
// the observers. Only the attempt differs: Request and Answer instead of
// a model call. The request goes as the client sent it but for personal
// data: when Texts is set, detection runs over them as over a model
// call's (pii.go) and the route's action applies (block refuses the call;
// redact and mask send the texts changed, through Redact). The other
// model-call stages (cache, structured output, fragments, shadow) do not
// apply.
type Side struct {
	// Kind names the call ("count_tokens", "embeddings"): Record.Side.
	Kind string
	// Model is the model or alias the client named.
	Model string
	// Format is the client's wire format.
	Format llm.Format
	// Embedding: the call is for an embedding model (models[].kind
	// embedding); otherwise for a chat model or alias, or on a
	// passthrough route of Format.
	Embedding bool
	// Serves reports whether an endpoint can serve the call; nil: all.
	Serves func(*provider.Endpoint) bool
	// Request is the attempt on ep: the URL and the body it posts
	// (provider.Client.Post).
	Request func(ep *provider.Endpoint) (url string, body []byte)
	// Answer reads a 200 answer's body: what it used (the attempt is
	// priced from it), or an error when it is not a valid answer (a
	// protocol failure of the endpoint: retried elsewhere).
	Answer func(body []byte) (llm.Usage, error)
	// Latency reports that an answer's latency tells how fast the
	// endpoint answers (embeddings on an embedding endpoint); when unset
	// (a token count on a chat endpoint) only its outcome feeds health.
	Latency bool
	// Texts, when set, holds the texts the call sends (a count's system
	// and messages, embeddings' inputs as user messages) for
	// personal-data detection; Redact is then required: it is called,
	// before any attempt, with Texts as the action changed them
	// (placeholders or masks), and makes Request send those instead.
	Texts  *llm.Request
	Redact func(changed *llm.Request) error
}

// SideOutcome is a served Side call.
type SideOutcome struct {
	Endpoint *provider.Endpoint
	Result   *provider.Result
	Record   *Record
}

// ErrNoSideEndpoint is returned by Side, before any attempt, when no
// endpoint of the model can serve the call (Serves refused them all).
var ErrNoSideEndpoint = errors.New("no endpoint of the model serves this call")

// sideKey names a route's candidates for one kind of Side call.
type sideKey struct {
	rs   *routeState
	kind string
}

// Side serves s for the client. Errors are *llm.APIError values ready for
// the client, or ErrNoSideEndpoint (wrapped) when no endpoint can serve;
// an unknown model is a 404.
func (e *Engine) Side(ctx context.Context, s Side, call Call) (*SideOutcome, error) {
	rs, ae := e.sideRoute(s)
	if ae != nil {
		return nil, ae
	}
	if rs == nil {
		return nil, fmt.Errorf("model %s: %w", s.Model, ErrNoSideEndpoint)
	}
	req := &llm.Request{Format: s.Format, Model: s.Model}
	c := &callState{call: call}
	c.rec = Record{Call: callPart(req, call, e.now())}
	c.rec.Side = s.Kind
	rec := &c.rec
	timeout := e.timeout
	if call.Timeout > 0 {
		timeout = call.Timeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errDeadline)
		defer cancel()
	}
	if s.Texts != nil {
		sent, ae := e.redactSide(ctx, c, s.Texts)
		rec.Request = nil // not a model call's request: the log has no prompt for it
		if ae == nil && sent != s.Texts {
			if err := s.Redact(sent); err != nil {
				ae = &llm.APIError{Status: http.StatusInternalServerError, Type: llm.ErrAPI, Message: "writing the request without its personal data: " + err.Error()}
			}
		}
		if ae != nil {
			c.err = ae
			e.finishCall(c)
			return nil, ae
		}
	}
	rs.retries.OnRequest()
	rs.hedges.OnRequest()
	rec.PrimaryModel, c.primaryCap = rs.cands[0].Model, rs.cands[0].Capability
	x := e.newExec(rs, req, call, rec)
	c.x = x
	x.Policy = e.policy(rs, call.Behavior)
	x.Side = &attempt.Side{Request: s.Request, Answer: s.Answer, Latency: s.Latency}
	won, err := x.Run(ctx, req, policy.AttemptPrimary)
	if err != nil {
		c.err = x.ClientError(ctx, err)
		e.finishCall(c)
		return nil, c.err
	}
	won.Succeeded()
	res := won.Result()
	if r := res.Response; r != nil {
		rec.Usage = r.Usage
	}
	c.served = won.Endpoint()
	e.finishCall(c)
	return &SideOutcome{Endpoint: c.served.Endpoint, Result: res, Record: rec}, nil
}

// redactSide runs the personal-data stage over a Side call's texts (as a
// request) and returns what may be sent.
func (e *Engine) redactSide(ctx context.Context, c *callState, texts *llm.Request) (*llm.Request, *llm.APIError) {
	call := c.call
	pc := pipeline.Call{Request: texts, ID: call.RequestID, Header: call.ClientHeader, Behavior: call.Behavior, TraceParent: call.TraceParent,
		KeyID: call.KeyID, Team: call.Team, Record: c}
	sent := texts
	_, err := e.piiStage(pipeline.HandlerFunc(func(_ context.Context, pc *pipeline.Call) (*pipeline.Answer, error) {
		sent = pc.Request
		return &pipeline.Answer{}, nil
	})).Serve(ctx, &pc)
	if err != nil {
		return nil, asAPIError(err)
	}
	return sent, nil
}

// sideRoute is the route of s's model restricted to the endpoints that
// can serve it, built once per route and kind; nil when none can.
func (e *Engine) sideRoute(s Side) (*routeState, *llm.APIError) {
	rs, noProvider, ae := e.lookup(s.Model, s.Format, s.Embedding)
	if noProvider {
		// Every name is some provider's here, but none of the call's
		// format can serve it.
		return nil, nil
	}
	if ae != nil {
		return nil, ae
	}
	if s.Serves == nil {
		return rs, nil
	}
	e.sideMu.Lock()
	defer e.sideMu.Unlock()
	k := sideKey{rs, s.Kind}
	if sr, ok := e.sides[k]; ok {
		return sr, nil
	}
	var cands []*endpoint
	for _, ep := range rs.cands {
		if s.Serves(ep.Endpoint) {
			cands = append(cands, ep)
		}
	}
	var sr *routeState
	if len(cands) > 0 {
		var err error
		if sr, err = e.newRoute(rs.name, cands, rs.strategy); err != nil {
			return nil, &llm.APIError{Status: http.StatusInternalServerError, Type: llm.ErrAPI, Message: err.Error()}
		}
	}
	if e.sides == nil {
		e.sides = map[sideKey]*routeState{}
	}
	e.sides[k] = sr
	return sr, nil
}

// notServed is the message of the 404 for a call naming model, which the
// call's kind (what: "model" for model calls and token counts, "embedding
// model" for embeddings) has no route for: a name the mesh serves for the
// other kind says so, since GET /v1/models lists it.
func (e *Engine) notServed(what, model string) string {
	switch {
	case what == "model" && e.embed[model] != nil:
		return fmt.Sprintf("model: %q is an embedding model: it is served by POST /v1/embeddings only", model)
	case what != "model" && e.routes[model] != nil:
		return fmt.Sprintf("%s: %q is a chat model, not an embedding model (models[].kind: embedding)", what, model)
	}
	return fmt.Sprintf("%s: %q is not served by this mesh (GET /v1/models lists the names)", what, model)
}
