package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/rollout"
)

// features is the admin API's view of the runtime switches.
type features struct {
	Hedging     *bool            `json:"hedging,omitempty"`
	Recovery    *bool            `json:"recovery,omitempty"`
	Rollout     *rollout.Rollout `json:"rollout,omitempty"`
	SafetyValve *rollout.State   `json:"safety_valve,omitempty"`
}

// adminAuthorized checks the admin token, answering 404 when the admin
// API is disabled and 401 for a missing or wrong token.
func (s *Server) adminAuthorized(w http.ResponseWriter, r *http.Request) bool {
	fail := func(status int, msg string) {
		writeError(w, headerFormat(r), &llm.APIError{Status: status, Type: llm.StatusErrorType(status), Message: msg})
	}
	if s.adminToken == "" {
		fail(http.StatusNotFound, "the admin API is disabled: set server.admin_token in the config")
		return false
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !tokenIs(tok, s.adminToken) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="keel-admin"`)
		fail(http.StatusUnauthorized, "missing or wrong admin token (Authorization: Bearer <server.admin_token>)")
		return false
	}
	return true
}

// admin serves GET and POST /admin/features, protected by the admin token.
// A POST switches features for every call that starts after it; no restart.
func (s *Server) admin(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(status int, v any) {
		b, _ := json.Marshal(v)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(b)
	}
	// Errors take the API's shape and types (authentication_error,
	// not_found_error, invalid_request_error), Anthropic's when the caller
	// sends anthropic-version and OpenAI's otherwise, as for unknown paths,
	// so an SDK's HTTP client can parse them.
	f := headerFormat(r)
	fail := func(status int, msg string) {
		writeError(w, f, &llm.APIError{Status: status, Type: llm.StatusErrorType(status), Message: msg})
	}
	if !s.adminAuthorized(w, r) {
		return
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			fail(http.StatusBadRequest, "reading body: "+err.Error())
			return
		}
		var req struct {
			Hedging  *bool            `json:"hedging"`
			Recovery *bool            `json:"recovery"`
			Rollout  *rollout.Rollout `json:"rollout"`
		}
		d := json.NewDecoder(bytes.NewReader(body))
		d.DisallowUnknownFields()
		if err := d.Decode(&req); err != nil {
			fail(http.StatusBadRequest, "body: "+err.Error()+` (want {"hedging": bool, "recovery": bool, "rollout": {"stage": "monitor|hedging|full", "percent": 0-100}})`)
			return
		}
		if req.Rollout != nil {
			if err := s.eng.SetRollout(*req.Rollout); err != nil {
				fail(http.StatusBadRequest, err.Error())
				return
			}
		}
		if req.Hedging != nil {
			s.eng.SetHedging(*req.Hedging)
		}
		if req.Recovery != nil {
			s.eng.SetRecovery(*req.Recovery)
		}
		s.log.Info("keel: features switched", "hedging", s.eng.Hedging(), "recovery", s.eng.Recovery())
	default:
		w.Header().Set("Allow", "GET, POST")
		fail(http.StatusMethodNotAllowed, "use GET or POST")
		return
	}
	h, rc, v, ro := s.eng.Hedging(), s.eng.Recovery(), s.eng.Valve(), s.eng.Rollout()
	writeJSON(http.StatusOK, features{Hedging: &h, Recovery: &rc, Rollout: &ro, SafetyValve: &v})
}
