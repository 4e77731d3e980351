package server

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
)

// Conversations keeps the conversations of the Responses API Keel served
// (store, previous_response_id, GET and DELETE /v1/responses/{id});
// convstate.Store implements it. owner is the caller's virtual key id, ""
// without one: a conversation is read and continued only by its owner.
type Conversations interface {
	// Begin is called with every parsed request of a stateful API (the
	// codec's Stateful: the Responses API). It expands
	// previous_response_id into its history, or refuses it (404
	// previous_response_not_found), and returns keep, which stores the
	// answer and must be called before the client has all of it; keep is
	// nil for store false.
	Begin(ctx context.Context, req *llm.Request, owner string) (keep func(ctx context.Context, resp *llm.Response, served []byte, endpoint string), ae *llm.APIError)
	// Echo returns the members a response object to req echoes from it
	// (store, previous_response_id); called before Begin.
	Echo(req *llm.Request) llm.Extra
	// Response is the response object stored under id, as served.
	Response(ctx context.Context, id, owner string) ([]byte, *llm.APIError)
	// Delete removes what is stored under id.
	Delete(ctx context.Context, id, owner string) *llm.APIError
}

// keepFunc stores a Responses answer (Conversations.Begin).
type keepFunc = func(ctx context.Context, resp *llm.Response, served []byte, endpoint string)

// responsesItemPath reports whether path is /v1/responses/{id} (or
// /responses/{id}, as OpenAI-compatible servers accept paths without
// /v1; embedded, any prefix) and returns the id.
func responsesItemPath(path string, embedded bool) (string, bool) {
	var rest string
	switch {
	case strings.HasPrefix(path, "/v1/responses/"):
		rest = path[len("/v1/responses/"):]
	case strings.HasPrefix(path, "/responses/"):
		rest = path[len("/responses/"):]
	case embedded && strings.Contains(path, "/responses/"):
		rest = path[strings.LastIndex(path, "/responses/")+len("/responses/"):]
	default:
		return "", false
	}
	if rest == "" || strings.Contains(rest, "/") {
		return "", false // input_items and cancel are not served
	}
	return rest, true
}

// responseItem serves GET and DELETE /v1/responses/{id} for what Keel
// stored, in OpenAI's shapes: GET the response object as served, DELETE
// {"id","object":"response.deleted","deleted":true}; an id Keel does not
// hold (or another key's) is OpenAI's 404 (docs/RESPONSES-STATE.md).
func (s *Server) responseItem(w http.ResponseWriter, r *http.Request, id string, caller Caller) {
	f := llm.FormatResponses
	if r.Method != http.MethodGet && r.Method != http.MethodDelete {
		w.Header().Set("Allow", "GET, DELETE")
		writeError(w, f, &llm.APIError{Status: http.StatusMethodNotAllowed, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest,
			Message: "method " + r.Method + " not allowed on " + r.URL.Path + "; use GET or DELETE"})
		return
	}
	if s.conv == nil {
		writeError(w, f, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrInvalidRequest, Message: "Response with id '" + id + "' not found."})
		return
	}
	owner := ""
	if caller != nil {
		owner, _ = caller.Labels()
	}
	var body []byte
	if r.Method == http.MethodGet {
		if isTrue(r.URL.Query().Get("stream")) {
			// Replaying a stored response as events is not built.
			writeError(w, f, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: "stream",
				Message: "stream: Keel serves a stored response whole; retrieve it without stream=true"})
			return
		}
		b, ae := s.conv.Response(r.Context(), id, owner)
		if ae != nil {
			writeError(w, f, ae)
			return
		}
		body = b
	} else {
		if ae := s.conv.Delete(r.Context(), id, owner); ae != nil {
			writeError(w, f, ae)
			return
		}
		body, _ = json.Marshal(struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Deleted bool   `json:"deleted"`
		}{id, "response.deleted", true})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// withEcho returns a copy of resp whose Extra holds echo's members: the
// request settings a response object Keel encodes itself echoes.
func withEcho(resp *llm.Response, echo llm.Extra) *llm.Response {
	if echo == nil {
		return resp
	}
	cp := *resp
	cp.Extra = make(llm.Extra, len(resp.Extra)+len(echo))
	maps.Copy(cp.Extra, resp.Extra)
	maps.Copy(cp.Extra, echo)
	cp.Touch()
	return &cp
}

// streamKeeper rebuilds a Responses stream's answer and stores it (keep)
// when its end reaches the writer, before the end is written: the client
// may send its follow-up the moment it reads response.completed.
type streamKeeper struct {
	keep     keepFunc
	acc      llm.Accumulator
	codec    wire.Codec
	endpoint func() string
	// echo, when set, is put into a message_start the writer encodes
	// (withEcho) and into the answer kept.
	echo llm.Extra
}

// echoed returns ev with k's echo in its message when ev is a
// message_start the writer will encode (not its upstream bytes in the
// client's format).
func (k *streamKeeper) echoed(ev *llm.Event) *llm.Event {
	if k == nil || k.echo == nil || ev.Type != llm.EventMessageStart || ev.Message == nil ||
		ev.Raw != nil && ev.RawFormat == k.codec.Format() {
		return ev
	}
	cp := ev.Detach()
	cp.Message = withEcho(ev.Message, k.echo)
	return cp
}

// see adds ev, and stores the answer at the first event that ends it
// (message_delta or message_stop, whichever comes first).
func (k *streamKeeper) see(ctx context.Context, ev *llm.Event) {
	if k == nil || k.keep == nil {
		return
	}
	k.acc.Add(ev)
	if ev.Type != llm.EventMessageDelta && ev.Type != llm.EventMessageStop {
		return
	}
	keep := k.keep
	k.keep = nil
	resp := k.acc.Response()
	if k.echo != nil {
		resp = withEcho(resp, k.echo)
	}
	b, err := k.codec.EncodeResponse(resp)
	if err != nil {
		return
	}
	keep(ctx, resp, b, k.endpoint())
}
