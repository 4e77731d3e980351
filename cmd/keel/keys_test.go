package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/keys"
)

// Issue 17 item 1: keel keys create shows the secret once; list shows
// ids, prefixes, labels and limits but never a secret; revoke and rotate
// take an id or a prefix; rotate shows the new secret once and the old one
// stops matching; --config's keys.path names the store.
func TestKeysCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "keys.db")
	out, err := runKeel("keys", "create", "--db", db, "--name", "ci", "--team", "search", "--owner", "ana", "--models", "sim-haiku,fast",
		"--rpm", "600", "--daily-usd", "5")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	var secret string
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, keys.SecretPrefix) && len(f) == len(keys.SecretPrefix)+52 {
			secret = f
		}
	}
	if secret == "" || strings.Count(out, secret) != 1 || !strings.Contains(out, "shown this once") {
		t.Fatalf("create printed %q: want the secret once and the warning", out)
	}

	list, err := runKeel("keys", "list", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(list, secret[12:]) || !strings.Contains(list, secret[:12]+"…") ||
		!strings.Contains(list, "sim-haiku,fast") || !strings.Contains(list, "$5") || !strings.Contains(list, "active") {
		t.Errorf("list:\n%s\nwant the prefix, models, budget and status, never the secret", list)
	}

	// rotate by prefix, JSON: a new secret; the old one no longer matches.
	out, err = runKeel("keys", "rotate", "--db", db, "--json", secret[:12])
	if err != nil {
		t.Fatalf("rotate: %v\n%s", err, out)
	}
	var rotated keys.Created
	if err := json.Unmarshal([]byte(out), &rotated); err != nil || rotated.Secret == secret || !strings.HasPrefix(rotated.Secret, keys.SecretPrefix) {
		t.Fatalf("rotate printed %q (%v)", out, err)
	}
	if strings.Contains(out, `"Hash"`) || strings.Contains(out, keys.Hash(rotated.Secret)) {
		t.Errorf("rotate printed the hash: %s", out)
	}

	// --config's keys.path is the same store; revoke by id.
	cfg := filepath.Join(dir, "keel.yaml")
	os.WriteFile(cfg, []byte("keys:\n  path: "+db+"\n"), 0o600)
	out, err = runKeel("keys", "revoke", "--config", cfg, rotated.Key.ID)
	if err != nil || !strings.Contains(out, "revoked "+rotated.Key.ID) {
		t.Fatalf("revoke: %v\n%s", err, out)
	}
	list, _ = runKeel("keys", "list", "--config", cfg, "--json")
	var views struct{ Keys []keys.View }
	if err := json.Unmarshal([]byte(list), &views); err != nil || len(views.Keys) != 1 || views.Keys[0].Revoked.IsZero() || views.Keys[0].Team != "search" {
		t.Errorf("list --json after revoke: %s (%v)", list, err)
	}

	if out, err := runKeel("keys", "create", "--db", db, "--rpm", "-1"); err == nil || !strings.Contains(err.Error(), "rpm") {
		t.Errorf("create --rpm -1: %v %s, want a refusal naming rpm", err, out)
	}
	if _, err := runKeel("keys", "revoke", "--db", db, "key_none"); err == nil {
		t.Error("revoking an unknown key succeeded")
	}
}
