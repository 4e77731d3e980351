package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
)

// AdminPath is where AdminHandler is mounted (behind the admin token).
const AdminPath = "/admin/keys"

// Created is the answer to a creation or a rotation: the key and its
// secret, which is shown this once.
type Created struct {
	Key    Key    `json:"key"`
	Secret string `json:"secret"`
}

// AdminHandler serves the admin API's keys, the equivalents of `keel keys`:
//
//	GET    /admin/keys             list (with each key's spend today and this month)
//	POST   /admin/keys             create from a Spec; 201 with the secret, shown once
//	POST   /admin/keys/{id}/revoke revoke
//	POST   /admin/keys/{id}/rotate a new secret, shown once
//	DELETE /admin/keys/{id}        revoke
//
// {id} is a key's ID or its display prefix. The caller checks the admin
// token. Errors take the API's error shape (Anthropic's when the request
// sends anthropic-version, else OpenAI's).
func (m *Manager) AdminHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(status int, msg string) {
			body := wire.FromHeader(r.Header).EncodeError(&llm.APIError{Status: status, Type: llm.StatusErrorType(status), Message: msg})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write(body)
		}
		reply := func(status int, v any) {
			b, _ := json.Marshal(v)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store") // secrets
			w.WriteHeader(status)
			w.Write(b)
		}
		failErr := func(err error) {
			if errors.Is(err, ErrNotFound) {
				fail(http.StatusNotFound, err.Error())
				return
			}
			if errors.Is(err, ErrRevoked) || strings.Contains(err.Error(), "keys have this prefix") {
				fail(http.StatusConflict, err.Error())
				return
			}
			fail(http.StatusInternalServerError, err.Error())
		}
		rest := strings.Trim(strings.TrimPrefix(r.URL.Path, AdminPath), "/")
		id, action, _ := strings.Cut(rest, "/")
		ctx := r.Context()
		switch {
		case id == "" && r.Method == http.MethodGet:
			list, err := m.List(ctx)
			if err != nil {
				failErr(err)
				return
			}
			reply(http.StatusOK, map[string]any{"keys": list})
		case id == "" && r.Method == http.MethodPost:
			body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
			if err != nil {
				fail(http.StatusBadRequest, "reading body: "+err.Error())
				return
			}
			var spec Spec
			d := json.NewDecoder(bytes.NewReader(body))
			d.DisallowUnknownFields()
			if err := d.Decode(&spec); err != nil {
				fail(http.StatusBadRequest, "body: "+err.Error()+` (want {"name", "team", "owner", "models": [...], "rpm", "tpm", "daily_usd", "monthly_usd"})`)
				return
			}
			if err := spec.Limits.Validate(); err != nil {
				fail(http.StatusBadRequest, err.Error())
				return
			}
			k, secret, err := m.Create(ctx, spec)
			if err != nil {
				failErr(err)
				return
			}
			reply(http.StatusCreated, Created{Key: k, Secret: secret})
		case id != "" && (action == "revoke" && r.Method == http.MethodPost || action == "" && r.Method == http.MethodDelete):
			k, err := m.Revoke(ctx, id)
			if err != nil {
				failErr(err)
				return
			}
			reply(http.StatusOK, map[string]any{"key": k})
		case id != "" && action == "rotate" && r.Method == http.MethodPost:
			k, secret, err := m.Rotate(ctx, id)
			if err != nil {
				failErr(err)
				return
			}
			reply(http.StatusOK, Created{Key: k, Secret: secret})
		default:
			fail(http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path+": see GET/POST /admin/keys, POST /admin/keys/{id}/revoke|rotate, DELETE /admin/keys/{id}")
		}
	})
}
