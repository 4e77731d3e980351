package engine

import (
	"context"
	"slices"
	"sync"

	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// FragmentOptions tune long-input fragmentation (fragment.Settings, built from fragment.Config).
type FragmentOptions = fragment.Settings

// replicas sends a call's fragments as execs of their own on its route
// (fragment.Replicas); their attempts join the call's record.
type replicas struct {
	x *exec

	mu  sync.Mutex // guards following and the call record's attempts during the fan-out
	eps map[*provider.Endpoint]*endpoint
}

func (r *replicas) Width() int { return r.x.Width() }

// Replica is an exec of its own, pinned to the first candidate no earlier
// replica of the fragment started on. JSON mode is the client's own demand
// on every answer: each fragment is asked in the form its endpoint takes.
func (r *replicas) Replica(req *llm.Request, used []bool) fragment.Replica {
	x := r.x
	rx := x.Fork(req)
	rx.Policy, rx.Legacy = x.Policy, x.Legacy
	if x.Spec != nil && x.Spec.JSONMode {
		rx.Spec = x.Spec
	}
	rx.PinFirst(used)
	return &replica{r: r, rx: rx, req: req, won: -1}
}

// Merge sends the merge request on the route; its attempts join the
// record, the answering one marked the winner when it has text.
func (r *replicas) Merge(ctx context.Context, req *llm.Request) *llm.Response {
	x := r.x
	mx := x.Fork(req)
	mx.Policy = x.Policy
	var out *llm.Response
	if a, err := mx.Run(ctx, req, policy.AttemptMerge); err == nil {
		a.Succeeded()
		if a.Result().Response.Text() != "" {
			out = a.Result().Response
			mx.Record().Attempts[a.Index()].Winner = true
		}
	}
	mx.Seal()
	x.Record().Attempts = append(x.Record().Attempts, mx.Record().Attempts...)
	return out
}

// replica is one replica's exec.
type replica struct {
	r   *replicas
	rx  *exec
	req *llm.Request
	// won is the index in the call's record of its answering attempt (-1:
	// none); ep the endpoint that answered; endpoints every endpoint its
	// attempts went to.
	won       int
	ep        *endpoint
	endpoints []string
}

func (p *replica) Run(ctx context.Context) (*llm.Response, error) {
	a, err := p.rx.Run(ctx, p.req, policy.AttemptFragment)
	var resp *llm.Response
	at := -1
	if err == nil {
		a.Succeeded()
		resp = a.Result().Response
		if a.Tool() {
			translate.FoldOutputTool(resp)
		}
		p.ep, at = a.Endpoint(), a.Index()
	}
	p.rx.Seal()
	r, rec := p.r, p.r.x.Record()
	r.mu.Lock()
	defer r.mu.Unlock()
	if at >= 0 {
		at += len(rec.Attempts)
	}
	p.won = at
	prec := p.rx.Record()
	rec.Attempts = append(rec.Attempts, prec.Attempts...)
	rec.Retries += prec.Retries
	rec.Hedges += prec.Hedges
	for _, at := range prec.Attempts {
		if !slices.Contains(p.endpoints, at.Endpoint) {
			p.endpoints = append(p.endpoints, at.Endpoint)
		}
	}
	if p.ep != nil {
		r.eps[p.ep.Endpoint] = p.ep
	}
	return resp, err
}

func (p *replica) Endpoints() []string { return p.endpoints }

func (p *replica) Served() *provider.Endpoint {
	if p.ep == nil {
		return nil
	}
	return p.ep.Endpoint
}

func (p *replica) Won() {
	if p.won >= 0 {
		p.r.x.Record().Attempts[p.won].Winner = true
	}
}
