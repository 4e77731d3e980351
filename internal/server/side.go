package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/keys"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/wire"
)

// The calls beside the model call: POST /v1/messages/count_tokens and
// POST /v1/embeddings, routed by the engine (engine.Side) and forwarded
// as the client sent them but for the model name, which becomes the
// serving endpoint's upstream model, Keel's own mesh_behavior, which is
// left out, and personal data, which the route's action may change.

// TokenCountHeader marks a token count Keel estimated itself
// (TokenCountEstimated) because no endpoint that counts could answer.
const (
	TokenCountHeader    = "X-Mesh-Token-Count"
	TokenCountEstimated = "estimated"
)

// sideCall is what a side route hands to runSide.
type sideCall struct {
	f    llm.Format
	req  *llm.Request // for the key's admission: model, estimated prompt; MeshBehavior
	side engine.Side
}

// countTokens serves POST /v1/messages/count_tokens (with ?beta=true
// too): an Anthropic endpoint of the model counts, with failover; when
// none can (the model is served only by OpenAI-format endpoints, or every
// counting endpoint failed), Keel answers its own estimate, marked
// X-Mesh-Token-Count: estimated.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request, f llm.Format, caller Caller, _ string) {
	body, held, ok := s.sideBody(w, r, f)
	if !ok {
		return
	}
	defer s.release(held)
	req, err := wire.ParseCountTokens(body)
	if err != nil {
		writeError(w, f, asAPIError(err))
		return
	}
	if n := len(req.Messages); n > s.maxMessages {
		writeError(w, f, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: "messages",
			Message: fmt.Sprintf("the request has %d messages; server.max_messages allows at most %d", n, s.maxMessages)})
		return
	}
	path := wire.CountTokensPath
	if q := r.URL.RawQuery; q != "" {
		path += "?" + q // ?beta=true: the SDKs' beta namespace
	}
	send := body
	side := engine.Side{Kind: "count_tokens", Model: req.Model, Format: f,
		// A platform without a token count (Bedrock) has no URL for it.
		Serves: func(ep *provider.Endpoint) bool {
			return wire.CountsTokens(ep.Format) && !ep.Embedding && ep.PathURL(wire.CountTokensPath) != ""
		},
		Texts: req,
		Redact: func(changed *llm.Request) (err error) {
			send, err = wire.RewriteCountTokens(body, changed)
			return err
		},
		Request: func(ep *provider.Endpoint) (string, []byte) {
			return ep.PathURL(path), upstreamBody(send, ep.UpstreamModel)
		},
		Answer: func(b []byte) (llm.Usage, error) {
			var a struct {
				InputTokens *int `json:"input_tokens"`
			}
			if err := json.Unmarshal(b, &a); err != nil || a.InputTokens == nil {
				return llm.Usage{}, errors.New(`not a token count ({"input_tokens": N})`)
			}
			return llm.Usage{}, nil // counting is free (Anthropic's pricing)
		}}
	ae, served := s.runSide(w, r, caller, sideCall{f: f, req: req, side: side})
	if served || ae == nil {
		return
	}
	if !estimable(ae) || r.Context().Err() != nil {
		writeSideError(w, f, ae)
		return
	}
	n := keys.EstimatePrompt(req)
	s.log.Info("keel: token count estimated: no endpoint that counts answered", "model", req.Model, "input_tokens", n, "reason", ae.Message)
	b := strconv.AppendInt([]byte(`{"input_tokens":`), int64(n), 10)
	b = append(b, '}')
	h := w.Header()
	h.Set(TokenCountHeader, TokenCountEstimated)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// errNoCounter is runSide's error when no endpoint of the model counts.
var errNoCounter = &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, MeshCode: llm.MeshFallbackExhausted,
	Message: "no endpoint of the model counts tokens"}

// estimable reports whether a failed count may be answered with an
// estimate: Keel found no endpoint that counts, or every one failed or
// could not be tried in time; never for the caller's own error (a bad
// request, an unknown model, a key's refusal).
func estimable(ae *llm.APIError) bool {
	switch ae.MeshCode {
	case llm.MeshFallbackExhausted, llm.MeshCircuitOpen, llm.MeshTimeout, llm.MeshBudgetExhausted, llm.MeshUpstreamProtocolFailed:
		return true
	}
	return ae == errNoCounter
}

// embeddings serves POST /v1/embeddings across the endpoints of an
// embedding model (models[].kind embedding), with failover, health, the
// key's limits and spend.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request, f llm.Format, caller Caller, _ string) {
	body, held, ok := s.sideBody(w, r, f)
	if !ok {
		return
	}
	defer s.release(held)
	model, inputs, mesh, ae := parseEmbeddings(body)
	if ae != nil {
		writeError(w, f, ae)
		return
	}
	req := &llm.Request{Format: f, Model: model, MaxTokens: 1, HasMaxTokens: true, MeshBehavior: mesh}
	for _, in := range inputs {
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: in}}})
	}
	send := body
	side := engine.Side{Kind: "embeddings", Model: model, Format: f, Embedding: true, Latency: true,
		Serves: func(ep *provider.Endpoint) bool { return wire.ServesEmbeddings(ep.Format) },
		Texts:  req,
		Redact: func(changed *llm.Request) error {
			send = withInputs(body, changed.Messages)
			return nil
		},
		Request: func(ep *provider.Endpoint) (string, []byte) {
			return ep.PathURL(wire.EmbeddingsPath), upstreamBody(send, ep.UpstreamModel)
		},
		Answer: func(b []byte) (llm.Usage, error) {
			var a struct {
				Data  []json.RawMessage `json:"data"`
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(b, &a); err != nil || a.Data == nil {
				return llm.Usage{}, errors.New(`not an embeddings answer ({"data": [...]})`)
			}
			return llm.Usage{InputTokens: a.Usage.PromptTokens}, nil
		}}
	if ae, served := s.runSide(w, r, caller, sideCall{f: f, req: req, side: side}); !served && ae != nil {
		if ae == errNoCounter {
			ae = &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrInvalidRequest, Param: "model", Code: "model_not_found",
				Message: fmt.Sprintf("model %q has no endpoint that serves embeddings", model)}
		}
		writeSideError(w, f, ae)
	}
}

// writeSideError answers a side call's error; when Keel's routing decided
// it (every endpoint failed, a timeout; not a key's refusal, which says
// itself whether to retry), the SDK is told not to retry: Keel already
// tried elsewhere, and SDK retries would multiply the load.
func writeSideError(w http.ResponseWriter, f llm.Format, ae *llm.APIError) {
	if ae.MeshCode != "" && ae.MeshCode != llm.MeshBadRequest && ae != errNoCounter && !strings.HasPrefix(ae.MeshCode, "MESH_KEY_") {
		w.Header().Set("X-Should-Retry", "false")
	}
	writeError(w, f, ae)
}

// sideBody checks a side call's content type and reads its body; on
// failure it has answered. The caller releases held once done with body.
func (s *Server) sideBody(w http.ResponseWriter, r *http.Request, f llm.Format) ([]byte, int64, bool) {
	if !s.jsonBody(w, r, f) {
		return nil, 0, false
	}
	w.Header().Set("X-Mesh-Request-Id", s.requestID())
	body, held, ae := s.readBody(w, r)
	if ae != nil {
		writeError(w, f, ae)
		return nil, 0, false
	}
	return body, held, true
}

// runSide admits c's caller, runs the side call through the engine and,
// when it is served, writes the upstream's answer (served). Otherwise it
// returns the error to answer, not yet written: errNoCounter when no
// endpoint of the model can serve the call.
func (s *Server) runSide(w http.ResponseWriter, r *http.Request, caller Caller, c sideCall) (ae *llm.APIError, served bool) {
	start := time.Now()
	rid := w.Header().Get("X-Mesh-Request-Id")
	call := engine.Call{RequestID: rid, ClientHeader: r.Header, TraceParent: r.Header.Get("Traceparent")}
	if v := r.Header.Get("X-Mesh-Timeout"); v != "" {
		d, err := parseTimeout(v)
		if err != nil {
			return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: "X-Mesh-Timeout: " + err.Error()}, false
		}
		call.Timeout = d
	}
	beh, err := engine.ParseBehavior(c.req.MeshBehavior, r.Header.Get("X-Mesh-Behavior"))
	if err != nil {
		return asAPIError(err), false
	}
	call.Behavior = beh
	if caller != nil {
		call.KeyID, call.Team = caller.Labels()
		settle, ae := caller.Admit(r.Context(), c.req)
		if ae != nil {
			return ae, false
		}
		call.Done = func(rec *callrec.Record) { settle(rec.Cost, callTokens(rec)) }
	}
	out, err := s.eng.Side(r.Context(), c.side, call)
	if errors.Is(err, engine.ErrNoSideEndpoint) {
		if call.Done != nil {
			call.Done(&callrec.Record{}) // nothing was sent: the reservation is returned
		}
		return errNoCounter, false
	}
	if err != nil {
		ae := asAPIError(err)
		s.logRequest(r, rid, c.req, nil, ae, start)
		return ae, false
	}
	rec := out.Record
	hs := headerSet{h: w.Header(), vals: make([]string, 0, 8)}
	servedHeaders(&hs, out.Endpoint.Model, out.Endpoint.Region, out.Endpoint.Provider, rec)
	piiHeaders(&hs, rec)
	hs.Set("X-Mesh-Cost", FormatCost(rec.Cost))
	if id := upstreamRequestID(out.Result.Header); id != "" {
		hs.Set(wire.For(c.f).RequestIDHeader(), id)
	}
	hs.Set("Content-Type", "application/json")
	hs.Set("Content-Length", strconv.Itoa(len(out.Result.Body)))
	w.WriteHeader(http.StatusOK)
	w.Write(out.Result.Body)
	s.logRequest(r, rid, c.req, rec, nil, start)
	return nil, true
}

// upstreamBody is the JSON object body as an upstream gets it: its
// top-level "model" member set to model, mesh_behavior (Keel's own) left
// out, every other member as it was; body itself when nothing changes.
func upstreamBody(body []byte, model string) []byte {
	out := make([]byte, 0, len(body)+len(model))
	out = append(out, '{')
	same := true
	jsonx.EachMember(body, func(k, v []byte) error {
		key, _ := jsonx.Unquote(k)
		if key == "mesh_behavior" {
			same = false
			return nil
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, k...)
		out = append(out, ':')
		if key == "model" {
			if m, _ := jsonx.Unquote(v); m != model {
				same = false
			}
			out = jsonx.AppendString(out, model)
			return nil
		}
		out = append(out, v...)
		return nil
	})
	if same {
		return body
	}
	return append(out, '}')
}

// parseEmbeddings reads what Keel needs of an Embeddings API request (a
// JSON object): the model, the input texts (a string, a list of strings,
// or token ids, which count as one word each) for the key's admission,
// and Keel's own mesh_behavior. Everything else is the upstream's to
// judge. Errors are 400s in OpenAI's words.
func parseEmbeddings(body []byte) (model string, inputs []string, mesh json.RawMessage, ae *llm.APIError) {
	bad := func(param, msg string) (string, []string, json.RawMessage, *llm.APIError) {
		return "", nil, nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: param, Message: msg}
	}
	body = jsonx.TrimSpace(body)
	if !jsonx.Valid(body) || len(body) == 0 || body[0] != '{' {
		return bad("", "the request body is not a JSON object (the Embeddings API takes {\"model\": ..., \"input\": ...})")
	}
	var in json.RawMessage
	var sawModel bool
	var err error
	jsonx.EachMember(body, func(k, v []byte) error {
		switch key, _ := jsonx.Unquote(k); key {
		case "model":
			sawModel = true
			if model, err = jsonx.Unquote(v); err != nil {
				model = ""
			}
		case "input":
			in = v
		case "mesh_behavior":
			mesh = json.RawMessage(bytes.Clone(v))
		}
		return nil
	})
	switch {
	case !sawModel:
		return bad("model", "you must provide a model parameter")
	case model == "":
		return bad("model", "model: expected a non-empty string")
	case in == nil:
		return bad("input", "you must provide an input parameter")
	}
	var one string
	if json.Unmarshal(in, &one) == nil {
		return model, []string{one}, mesh, nil
	}
	var many []string
	if json.Unmarshal(in, &many) == nil {
		return model, many, mesh, nil
	}
	var ids [][]json.Number
	if bytes.HasPrefix(bytes.TrimSpace(in), []byte("[[")) && json.Unmarshal(in, &ids) == nil {
		for _, t := range ids {
			inputs = append(inputs, tokenWords(len(t)))
		}
		return model, inputs, mesh, nil
	}
	var flat []json.Number
	if json.Unmarshal(in, &flat) == nil {
		return model, []string{tokenWords(len(flat))}, mesh, nil
	}
	return bad("input", "input: expected a string, a list of strings, a list of token ids or a list of lists of token ids")
}

// withInputs is the embeddings body with its input written from msgs,
// one text per message in order (parseEmbeddings made them): a string
// when the body sent one, else a list of strings. Only a text input can
// have been changed (token ids hold no personal data Keel can find).
func withInputs(body []byte, msgs []llm.Message) []byte {
	var in json.RawMessage
	jsonx.EachMember(body, func(k, v []byte) error {
		if key, _ := jsonx.Unquote(k); key == "input" {
			in = v
		}
		return nil
	})
	texts := make([]string, len(msgs))
	for i, m := range msgs {
		texts[i] = m.Text()
	}
	var v any = texts
	if len(in) > 0 && in[0] == '"' && len(texts) == 1 {
		v = texts[0]
	}
	b, _ := json.Marshal(v)
	return jsonx.ReplaceMembers(body, map[string][]byte{"input": b})
}

// tokenWords is a text of n one-token words, standing for n token ids in
// the key's prompt estimate.
func tokenWords(n int) string { return string(bytes.Repeat([]byte("t "), n)) }
