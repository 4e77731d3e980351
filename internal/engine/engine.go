// Package engine runs one client call through the mesh: it resolves the
// requested model or alias to candidate endpoints, sends attempts through
// the provider client, falls back on errors that another endpoint may not
// have, and hands back the first good answer or stream.
//
// An Engine is immutable after New and safe for concurrent use. Do blocks
// until an answer (or the first event of a stream) arrives or ctx ends.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// Options configure an Engine.
type Options struct {
	// Endpoints are every upstream, in config order; a model's endpoints are
	// tried in this order.
	Endpoints []*provider.Endpoint
	// Aliases map an alias to an ordered chain of model names.
	Aliases map[string][]string
	Client  *provider.Client
	Logger  *slog.Logger
	// MaxAttempts bounds attempts per call across all candidates; default 4.
	MaxAttempts int
	// Passthrough endpoints serve model names no model or alias claims: the
	// one whose Format matches the client's (else the first) is used with
	// its Model and UpstreamModel set to the requested name. Used when Keel
	// proxies to the real providers without a config.
	Passthrough []*provider.Endpoint
}

// Engine is the mesh's request pipeline.
type Engine struct {
	client      *provider.Client
	log         *slog.Logger
	maxAttempts int
	// chains maps a model or alias name to its candidate endpoints, in order.
	chains      map[string][]*provider.Endpoint
	models      []ModelInfo
	passthrough []*provider.Endpoint
}

// ModelInfo describes a name clients may call.
type ModelInfo struct {
	Name          string
	Alias         bool
	Capability    int
	ContextWindow int
	Regions       []string
}

// New builds an Engine.
func New(o Options) (*Engine, error) {
	if o.Client == nil {
		return nil, errors.New("engine: nil provider client")
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 4
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{client: o.Client, log: log, maxAttempts: o.MaxAttempts, chains: map[string][]*provider.Endpoint{}, passthrough: o.Passthrough}
	infos := map[string]*ModelInfo{}
	var order []string
	for _, ep := range o.Endpoints {
		e.chains[ep.Model] = append(e.chains[ep.Model], ep)
		mi := infos[ep.Model]
		if mi == nil {
			mi = &ModelInfo{Name: ep.Model, Capability: ep.Capability, ContextWindow: ep.ContextWindow}
			infos[ep.Model] = mi
			order = append(order, ep.Model)
		}
		if !contains(mi.Regions, ep.Region) {
			mi.Regions = append(mi.Regions, ep.Region)
		}
	}
	aliasNames := make([]string, 0, len(o.Aliases))
	for a := range o.Aliases {
		aliasNames = append(aliasNames, a)
	}
	sort.Strings(aliasNames)
	for _, a := range aliasNames {
		if _, clash := e.chains[a]; clash {
			return nil, fmt.Errorf("engine: alias %q has the name of a model", a)
		}
		var chain []*provider.Endpoint
		for _, m := range o.Aliases[a] {
			eps := e.chains[m]
			if len(eps) == 0 {
				return nil, fmt.Errorf("engine: alias %q names unknown model %q", a, m)
			}
			chain = append(chain, eps...)
		}
		e.chains[a] = chain
		first := infos[o.Aliases[a][0]]
		e.models = append(e.models, ModelInfo{Name: a, Alias: true, Capability: first.Capability, ContextWindow: first.ContextWindow, Regions: first.Regions})
	}
	for _, m := range order {
		e.models = append(e.models, *infos[m])
	}
	sort.SliceStable(e.models, func(i, j int) bool { return e.models[i].Name < e.models[j].Name })
	return e, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Models lists the names clients may call, sorted.
func (e *Engine) Models() []ModelInfo { return e.models }

// Outcome is a served call.
type Outcome struct {
	Endpoint *provider.Endpoint
	Attempts int
	// Fallback is the reason the first candidate did not serve, empty when it did.
	Fallback string
	Result   *provider.Result
}

// Do serves req. On success with a stream, Outcome.Result.Stream starts with
// the already-received first event and the caller must Close it. Errors are
// *llm.APIError values ready for the client, with MeshCode set when Keel
// decided the outcome.
func (e *Engine) Do(ctx context.Context, req *llm.Request, call provider.Call) (*Outcome, error) {
	chain := e.chains[req.Model]
	if len(chain) == 0 && len(e.passthrough) > 0 && req.Model != "" {
		chain = []*provider.Endpoint{e.passthroughFor(req)}
	}
	if len(chain) == 0 {
		return nil, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound,
			Message: fmt.Sprintf("model: %q is not served by this mesh (GET /v1/models lists the names)", req.Model)}
	}
	var lastErr error
	fallback := ""
	attempts := 0
	for i := 0; i < len(chain) && attempts < e.maxAttempts; i++ {
		ep := chain[i]
		attempts++
		res, err := e.client.Do(ctx, ep, req, call)
		if err == nil && res.Stream != nil {
			err = peekFirst(res)
		}
		if err == nil {
			return &Outcome{Endpoint: ep, Attempts: attempts, Fallback: fallback, Result: res}, nil
		}
		lastErr = err
		reason, retry := classify(err)
		e.log.LogAttrs(ctx, slog.LevelDebug, "attempt failed", slog.String("endpoint", ep.ID), slog.String("reason", reason), slog.Any("err", err))
		if !retry || ctx.Err() != nil {
			break
		}
		if fallback == "" {
			fallback = reason
		}
	}
	return nil, clientError(ctx, lastErr, attempts)
}

func (e *Engine) passthroughFor(req *llm.Request) *provider.Endpoint {
	tmpl := e.passthrough[0]
	for _, p := range e.passthrough {
		if p.Format == req.Format {
			tmpl = p
			break
		}
	}
	ep := *tmpl
	ep.Model, ep.UpstreamModel = req.Model, req.Model
	ep.ID = req.Model + "/" + ep.Region + "/" + ep.Provider
	return &ep
}

// peekFirst reads the stream's first event so an upstream that fails before
// sending anything can still be replaced by another endpoint.
func peekFirst(res *provider.Result) error {
	ev, err := res.Stream.Next()
	if err == io.EOF {
		err = &provider.Error{Kind: provider.KindProtocol, Err: errors.New("empty stream")}
	}
	if err == nil && ev.Type == llm.EventError {
		err = &provider.Error{Kind: provider.KindStatus, API: ev.Err}
	}
	if err != nil {
		res.Stream.Close()
		return err
	}
	res.Stream = &peeked{Stream: res.Stream, first: ev}
	return nil
}

type peeked struct {
	provider.Stream
	first *llm.Event
}

func (p *peeked) Next() (*llm.Event, error) {
	if ev := p.first; ev != nil {
		p.first = nil
		return ev, nil
	}
	return p.Stream.Next()
}

// classify says why an attempt failed and whether another attempt may succeed.
func classify(err error) (reason string, retry bool) {
	var pe *provider.Error
	if !errors.As(err, &pe) {
		return "internal", false
	}
	switch pe.Kind {
	case provider.KindCanceled:
		return "canceled", false
	case provider.KindConnect:
		return "connect_error", true
	case provider.KindReset:
		return "connection_reset", true
	case provider.KindTimeout:
		return "timeout", true
	case provider.KindProtocol:
		return "protocol_error", true
	}
	if pe.API == nil {
		return "unknown", false
	}
	switch s := pe.API.Status; {
	case s == http.StatusTooManyRequests:
		return "rate_limited", true
	case s == 529 || pe.API.Type == llm.ErrOverloaded:
		return "overloaded", true
	case s == http.StatusRequestTimeout || s == http.StatusConflict:
		return fmt.Sprintf("status_%d", s), true
	case s >= 500:
		return fmt.Sprintf("status_%d", s), true
	case s == 200:
		// An error event inside a 200 stream.
		return "stream_error", true
	}
	return fmt.Sprintf("status_%d", pe.API.Status), false
}

// clientError turns the last attempt's failure into the client's error.
func clientError(ctx context.Context, err error, attempts int) *llm.APIError {
	if ctx.Err() != nil {
		return &llm.APIError{Status: 499, Type: llm.ErrAPI, MeshCode: llm.MeshTimeout, Message: "request cancelled or timed out: " + context.Cause(ctx).Error()}
	}
	var pe *provider.Error
	if errors.As(err, &pe) && pe.API != nil {
		out := *pe.API
		if _, retry := classify(err); retry {
			out.MeshCode = llm.MeshFallbackExhausted
			out.Message = fmt.Sprintf("all %d attempts failed; last: %s", attempts, pe.API.Message)
			if out.Status == 200 {
				out.Status = llm.TypeStatus(out.Type)
			}
		}
		return &out
	}
	msg := "upstream failed"
	if err != nil {
		msg = err.Error()
	}
	return &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted,
		Message: fmt.Sprintf("all %d attempts failed; last: %s", attempts, msg)}
}
