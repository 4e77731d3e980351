package keys

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The admin API does what keel keys does, with immediate effect: a
// rotated key's old secret and a revoked key stop working at once.
func TestAdminHandler(t *testing.T) {
	m := newManager(t, &memStore{}, time.Now, true)
	h := m.AdminHandler()
	do := func(method, path, body string) (int, []byte) {
		rw := httptest.NewRecorder()
		h.ServeHTTP(rw, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rw.Code, rw.Body.Bytes()
	}
	code, body := do("POST", "/admin/keys", `{"name":"ci","team":"search","models":["sim-haiku"],"daily_usd":2}`)
	var made Created
	if code != 201 || json.Unmarshal(body, &made) != nil || made.Key.Team != "search" || !strings.HasPrefix(made.Secret, SecretPrefix) {
		t.Fatalf("create: %d %s", code, body)
	}
	if strings.Contains(string(body), Hash(made.Secret)) {
		t.Error("the answer carries the hash")
	}
	code, body = do("POST", "/admin/keys/"+made.Key.ID+"/rotate", "")
	var rotated Created
	if code != 200 || json.Unmarshal(body, &rotated) != nil || rotated.Secret == made.Secret {
		t.Fatalf("rotate: %d %s", code, body)
	}
	if _, ae := m.Authenticate(withKey(made.Secret)); ae == nil || ae.Status != 401 {
		t.Errorf("the old secret after a rotation: %v, want 401 at once", ae)
	}
	if _, ae := m.Authenticate(withKey(rotated.Secret)); ae != nil {
		t.Errorf("the new secret: %v", ae)
	}
	if code, body = do("DELETE", "/admin/keys/"+rotated.Key.Prefix, ""); code != 200 {
		t.Fatalf("revoke by prefix: %d %s", code, body)
	}
	if _, ae := m.Authenticate(withKey(rotated.Secret)); ae == nil || ae.Status != 401 {
		t.Errorf("a revoked key: %v, want 401 at once", ae)
	}
	code, body = do("GET", "/admin/keys", "")
	var list struct{ Keys []View }
	if code != 200 || json.Unmarshal(body, &list) != nil || len(list.Keys) != 1 || list.Keys[0].Revoked.IsZero() || strings.Contains(string(body), rotated.Secret) {
		t.Errorf("list: %d %s", code, body)
	}
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/admin/keys", `{"rpm":-1}`, http.StatusBadRequest},
		{"POST", "/admin/keys", `{"budget":1}`, http.StatusBadRequest},
		{"POST", "/admin/keys/key_none/revoke", "", http.StatusNotFound},
		{"POST", "/admin/keys/" + rotated.Key.ID + "/rotate", "", http.StatusConflict},
		{"PUT", "/admin/keys", "", http.StatusNotFound},
	} {
		if code, body := do(c.method, c.path, c.body); code != c.want {
			t.Errorf("%s %s %s: %d %s, want %d", c.method, c.path, c.body, code, body, c.want)
		}
	}
}
