package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/keys"
)

// Issue 17: a virtual key's secret is shown once and never stored: the
// database (and its WAL) holds its SHA-256 hash and a 12-character prefix.
func TestKeyStoreKeepsOnlyTheHash(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.db")
	st, err := OpenKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	k, secret, err := keys.Create(ctx, st, keys.Spec{Name: "ci", Team: "search", Owner: "ana", Limits: keys.Limits{Models: []string{"sim-haiku"}, RPM: 10, DailyUSD: 1.5}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Every byte on disk: the secret's body appears nowhere.
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret[len(keys.SecretPrefix)+4:])) {
			t.Errorf("%s holds the secret", f.Name())
		}
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id, hash, prefix string
	if err := db.QueryRow(`SELECT id, hash, prefix FROM keys`).Scan(&id, &hash, &prefix); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(secret))
	if got, want := []string{id, hash, prefix}, []string{k.ID, hex.EncodeToString(sum[:]), secret[:12]}; !reflect.DeepEqual(got, want) {
		t.Errorf("stored id, hash, prefix (-got +want)\n-%v\n+%v", got, want)
	}
}

func TestKeyStoreRoundTrip(t *testing.T) {
	st, err := OpenKeys(filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	k, secret, err := keys.Create(ctx, st, keys.Spec{Team: "t", Limits: keys.Limits{Models: []string{"a", "b"}, TPM: 5, MonthlyUSD: 2}}, now)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := st.KeyByHash(ctx, keys.Hash(secret))
	if err != nil || !ok || !reflect.DeepEqual(got, k) {
		t.Fatalf("KeyByHash (-got +want)\n-%+v %v %v\n+%+v", got, ok, err, k)
	}
	r, err := keys.Revoke(ctx, st, k.Prefix, now.Add(time.Hour))
	if err != nil || r.Revoked != now.Add(time.Hour) {
		t.Fatalf("revoke by prefix: %+v %v", r, err)
	}
	all, _ := st.Keys(ctx)
	if len(all) != 1 || !reflect.DeepEqual(all[0], r) {
		t.Errorf("Keys (-got +want)\n-%+v\n+%+v", all, r)
	}
	if err := st.UpdateKey(ctx, keys.Key{ID: "key_none"}); !errors.Is(err, keys.ErrNotFound) {
		t.Errorf("UpdateKey of no key: %v, want ErrNotFound", err)
	}
	if err := st.AddSpend(ctx, []keys.Spend{{KeyID: k.ID, Window: "day:2026-11-30", USD: 0.25}, {KeyID: k.ID, Window: "month:2026-11", USD: 0.25}}); err != nil {
		t.Fatal(err)
	}
	st.AddSpend(ctx, []keys.Spend{{KeyID: k.ID, Window: "day:2026-11-30", USD: 0.5}})
	day, _ := st.SpendIn(ctx, "day:2026-11-30")
	month, _ := st.SpendIn(ctx, "month:2026-11")
	if day[k.ID] != 0.75 || month[k.ID] != 0.25 {
		t.Errorf("spend day %v month %v, want 0.75 and 0.25", day, month)
	}
}
