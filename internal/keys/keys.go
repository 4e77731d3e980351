// Package keys is Keel's virtual keys: secrets Keel issues to the clients
// of a shared gateway, each with the models it may call, requests and
// tokens per minute, budgets in US dollars per UTC day and month, and team
// and owner labels; and the accounting that enforces them.
//
// A secret is "sk-keel-" and 52 base32 characters (256 random bits). It is
// shown once, when made; a Store keeps only its SHA-256 hash and a short
// prefix for display. Clients send it as the provider key they already
// send (x-api-key or Authorization: Bearer); Keel calls upstream with its
// own provider keys.
//
// The accounting reserves before a call and settles after it (Manager):
// a call is admitted only if what its key spent in each window, plus every
// reservation in flight, plus its own reservation, stays within each
// limit. See Manager for what that guarantees.
//
// Key values are plain data. The functions that change keys (Create,
// Revoke, Rotate) only talk to the Store; a running Manager sees their
// effect at its next refresh, or at once through its own methods. The
// package declares the Store it needs; internal/store/sqlite implements it.
package keys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// SecretPrefix starts every virtual key's secret.
const SecretPrefix = "sk-keel-"

// displayLen is how much of a secret Prefix keeps: "sk-keel-" and four
// characters (20 of its 256 bits), enough to tell keys apart in a list.
const displayLen = len(SecretPrefix) + 4

// Key is one virtual key as stored: never its secret.
type Key struct {
	// ID names the key in lists, logs, metrics and the request log; it is
	// not secret ("key_" and 16 hex digits).
	ID string `json:"id"`
	// Name is a free label.
	Name string `json:"name,omitempty"`
	// Prefix is the secret's first characters, for display.
	Prefix string `json:"prefix"`
	// Hash is the hex SHA-256 of the secret.
	Hash  string `json:"-"`
	Team  string `json:"team,omitempty"`
	Owner string `json:"owner,omitempty"`
	Limits
	Created time.Time `json:"created"`
	// Revoked is when the key was revoked; zero while it is valid.
	Revoked time.Time `json:"revoked,omitzero"`
}

// Limits are what a key may do. A zero limit is no limit.
type Limits struct {
	// Models are the model and alias names the key may call; empty: all.
	Models []string `json:"models,omitempty"`
	// RPM and TPM bound requests and tokens (prompt and output, every
	// attempt's) per minute.
	RPM int `json:"rpm,omitempty"`
	TPM int `json:"tpm,omitempty"`
	// DailyUSD and MonthlyUSD bound spend per UTC day and calendar month.
	DailyUSD   float64 `json:"daily_usd,omitempty"`
	MonthlyUSD float64 `json:"monthly_usd,omitempty"`
}

// Validate reports a negative or non-finite limit.
func (l Limits) Validate() error {
	var errs []error
	if l.RPM < 0 {
		errs = append(errs, fmt.Errorf("rpm: must not be negative, got %d", l.RPM))
	}
	if l.TPM < 0 {
		errs = append(errs, fmt.Errorf("tpm: must not be negative, got %d", l.TPM))
	}
	for _, b := range []struct {
		name string
		v    float64
	}{{"daily_usd", l.DailyUSD}, {"monthly_usd", l.MonthlyUSD}} {
		if b.v < 0 || math.IsNaN(b.v) || math.IsInf(b.v, 0) {
			errs = append(errs, fmt.Errorf("%s: expected 0 (no budget) or more US dollars, got %v", b.name, b.v))
		}
	}
	for _, m := range l.Models {
		if strings.TrimSpace(m) == "" {
			errs = append(errs, errors.New("models: an empty model name"))
		}
	}
	return errors.Join(errs...)
}

// Allows reports whether the limits let a call name model.
func (l Limits) Allows(model string) bool {
	return len(l.Models) == 0 || slices.Contains(l.Models, model)
}

// Spec is what a new key is made with.
type Spec struct {
	Name  string `json:"name"`
	Team  string `json:"team"`
	Owner string `json:"owner"`
	Limits
}

// Spend is an amount spent by a key in a window.
type Spend struct {
	KeyID string
	// Window is "day:2026-11-30" or "month:2026-11" (UTC).
	Window string
	USD    float64
}

// Store keeps keys and their spend. Implementations must be safe for
// concurrent use.
type Store interface {
	// CreateKey stores a new key.
	CreateKey(ctx context.Context, k Key) error
	// UpdateKey replaces the stored key of k.ID (ErrNotFound if none).
	UpdateKey(ctx context.Context, k Key) error
	// Keys returns every key, revoked ones included, oldest first.
	Keys(ctx context.Context) ([]Key, error)
	// KeyByHash returns the key whose secret hashes to hash.
	KeyByHash(ctx context.Context, hash string) (k Key, ok bool, err error)
	// AddSpend adds each amount to its key's window.
	AddSpend(ctx context.Context, s []Spend) error
	// SpendIn returns each key's spend in window.
	SpendIn(ctx context.Context, window string) (map[string]float64, error)
}

// Errors of the key operations.
var (
	ErrNotFound = errors.New("no such key")
	ErrRevoked  = errors.New("key is revoked")
)

// NewSecret returns a fresh secret: SecretPrefix and 32 random bytes in
// lower-case base32 without padding.
func NewSecret() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return SecretPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// Hash is the hex SHA-256 of a secret: what a Store keeps.
func Hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// display is a secret's displayable prefix.
func display(secret string) string { return secret[:min(len(secret), displayLen)] }

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "key_" + hex.EncodeToString(b[:])
}

// Create makes a key from spec and stores it. The secret is returned once;
// only its hash is stored.
func Create(ctx context.Context, st Store, spec Spec, now time.Time) (Key, string, error) {
	if err := spec.Limits.Validate(); err != nil {
		return Key{}, "", err
	}
	secret := NewSecret()
	k := Key{ID: newID(), Name: spec.Name, Team: spec.Team, Owner: spec.Owner, Limits: spec.Limits,
		Prefix: display(secret), Hash: Hash(secret), Created: now.UTC()}
	if err := st.CreateKey(ctx, k); err != nil {
		return Key{}, "", fmt.Errorf("creating key: %w", err)
	}
	return k, secret, nil
}

// Revoke revokes the key id (or the key whose prefix is id): its secret
// stops working. Revoking a revoked key changes nothing.
func Revoke(ctx context.Context, st Store, id string, now time.Time) (Key, error) {
	k, err := find(ctx, st, id)
	if err != nil {
		return Key{}, err
	}
	if !k.Revoked.IsZero() {
		return k, nil
	}
	k.Revoked = now.UTC()
	if err := st.UpdateKey(ctx, k); err != nil {
		return Key{}, fmt.Errorf("revoking key: %w", err)
	}
	return k, nil
}

// Rotate gives the key id a new secret, returned once; the old one stops
// working. Its limits, labels and spend stay.
func Rotate(ctx context.Context, st Store, id string) (Key, string, error) {
	k, err := find(ctx, st, id)
	if err != nil {
		return Key{}, "", err
	}
	if !k.Revoked.IsZero() {
		return Key{}, "", fmt.Errorf("rotating %s: %w", k.ID, ErrRevoked)
	}
	secret := NewSecret()
	k.Hash, k.Prefix = Hash(secret), display(secret)
	if err := st.UpdateKey(ctx, k); err != nil {
		return Key{}, "", fmt.Errorf("rotating key: %w", err)
	}
	return k, secret, nil
}

// find returns the key whose ID is id, or whose display prefix is id when
// one key alone has it.
func find(ctx context.Context, st Store, id string) (Key, error) {
	all, err := st.Keys(ctx)
	if err != nil {
		return Key{}, err
	}
	var found []Key
	for _, k := range all {
		if k.ID == id {
			return k, nil
		}
		if k.Prefix == id {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		return Key{}, fmt.Errorf("%q: %w", id, ErrNotFound)
	case 1:
		return found[0], nil
	}
	return Key{}, fmt.Errorf("%q: %d keys have this prefix; name one by its id", id, len(found))
}

// DayWindow and MonthWindow name the UTC day and month of t, as Spend
// windows.
func DayWindow(t time.Time) string   { return "day:" + t.UTC().Format(time.DateOnly) }
func MonthWindow(t time.Time) string { return "month:" + t.UTC().Format("2006-01") }
