package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Admin API errors use the API's error shape and types (authentication_error,
// not_found_error), never an HTTP status text such as "Unauthorized".
func TestAdminErrorsUseAPIErrorTypes(t *testing.T) {
	cases := []struct {
		name      string
		token     string // server.admin_token
		auth      string // Authorization header
		anthropic bool   // the caller sends anthropic-version
		status    int
		typ       string
	}{
		{"openai shape, no token", "s3cret", "", false, 401, "authentication_error"},
		{"openai shape, wrong token", "s3cret", "Bearer nope", false, 401, "authentication_error"},
		{"anthropic shape, wrong token", "s3cret", "Bearer nope", true, 401, "authentication_error"},
		{"admin API disabled", "", "Bearer x", true, 404, "not_found_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(Options{AdminToken: c.token})
			req := httptest.NewRequest(http.MethodGet, "/admin/features", nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			if c.anthropic {
				req.Header.Set("anthropic-version", "2023-06-01")
			}
			rw := httptest.NewRecorder()
			s.ServeHTTP(rw, req)
			if rw.Code != c.status {
				t.Fatalf("status %d, want %d", rw.Code, c.status)
			}
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rw.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rw.Body, err)
			}
			if body.Error.Type != inShape(c.typ, c.anthropic) || body.Error.Message == "" {
				t.Errorf("error %+v, want type %q with a message", body.Error, c.typ)
			}
			if c.anthropic && body.Type != "error" {
				t.Errorf("anthropic shape wants top-level type \"error\", got %q in %s", body.Type, rw.Body)
			}
		})
	}
}
