package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/keelmesh/keel/internal/keys"
)

// keyMigrations are the key store's schema, versioned in its own table
// (keys_schema_version), so that it may share a file with the request log.
// Append only.
var keyMigrations = []string{
	// 1: keys (the secret's hash only) and spend per key and window.
	`CREATE TABLE keys (
		id          TEXT    PRIMARY KEY,
		hash        TEXT    NOT NULL UNIQUE, -- hex SHA-256 of the secret
		prefix      TEXT    NOT NULL,        -- the secret's first 12 characters, for display
		name        TEXT    NOT NULL,
		team        TEXT    NOT NULL,
		owner       TEXT    NOT NULL,
		models      TEXT    NOT NULL,        -- JSON array; [] allows every model
		rpm         INTEGER NOT NULL,
		tpm         INTEGER NOT NULL,
		daily_usd   REAL    NOT NULL,
		monthly_usd REAL    NOT NULL,
		created_ns  INTEGER NOT NULL,
		revoked_ns  INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE key_spend (
		key_id TEXT NOT NULL,
		period TEXT NOT NULL, -- day:YYYY-MM-DD or month:YYYY-MM (UTC)
		usd    REAL NOT NULL,
		PRIMARY KEY (key_id, period)
	) WITHOUT ROWID;`,
}

// KeyStore keeps virtual keys and their spend in an SQLite database: it
// implements keys.Store. Only each secret's SHA-256 hash is stored. It is
// safe for concurrent use, from several processes too (WAL, a busy
// timeout).
type KeyStore struct {
	db *sql.DB
}

var _ keys.Store = (*KeyStore)(nil)

// OpenKeys opens (creating if needed) the key store at path.
func OpenKeys(path string) (*KeyStore, error) {
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("opening key store %s: %w", path, err)
	}
	if err := migrateKeys(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening key store %s: %w", path, err)
	}
	return &KeyStore{db: db}, nil
}

// Close closes the database.
func (s *KeyStore) Close() error { return s.db.Close() }

func migrateKeys(db *sql.DB) error {
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS keys_schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("creating keys_schema_version: %w", err)
	}
	var v int
	err := db.QueryRowContext(ctx, `SELECT version FROM keys_schema_version`).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reading key schema version: %w", err)
	}
	if v > len(keyMigrations) {
		return fmt.Errorf("key schema version %d is newer than this keel (%d)", v, len(keyMigrations))
	}
	for ; v < len(keyMigrations); v++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrating keys to version %d: %w", v+1, err)
		}
		_, err = tx.ExecContext(ctx, keyMigrations[v])
		if err == nil {
			_, err = tx.ExecContext(ctx, `DELETE FROM keys_schema_version`)
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO keys_schema_version (version) VALUES (?)`, v+1)
		}
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
		if err != nil {
			return fmt.Errorf("migrating keys to version %d: %w", v+1, err)
		}
	}
	return nil
}

const keyCols = `id, hash, prefix, name, team, owner, models, rpm, tpm, daily_usd, monthly_usd, created_ns, revoked_ns`

func keyArgs(k keys.Key) []any {
	models, _ := json.Marshal(k.Models)
	if k.Models == nil {
		models = []byte("[]")
	}
	var revoked int64
	if !k.Revoked.IsZero() {
		revoked = k.Revoked.UnixNano()
	}
	return []any{k.ID, k.Hash, k.Prefix, k.Name, k.Team, k.Owner, string(models), k.RPM, k.TPM, k.DailyUSD, k.MonthlyUSD, k.Created.UnixNano(), revoked}
}

func scanKey(sc interface{ Scan(...any) error }) (keys.Key, error) {
	var k keys.Key
	var models string
	var created, revoked int64
	if err := sc.Scan(&k.ID, &k.Hash, &k.Prefix, &k.Name, &k.Team, &k.Owner, &models, &k.RPM, &k.TPM, &k.DailyUSD, &k.MonthlyUSD, &created, &revoked); err != nil {
		return k, err
	}
	if err := json.Unmarshal([]byte(models), &k.Models); err != nil {
		return k, fmt.Errorf("key %s: models: %w", k.ID, err)
	}
	if len(k.Models) == 0 {
		k.Models = nil
	}
	k.Created = time.Unix(0, created).UTC()
	if revoked != 0 {
		k.Revoked = time.Unix(0, revoked).UTC()
	}
	return k, nil
}

// CreateKey stores a new key.
func (s *KeyStore) CreateKey(ctx context.Context, k keys.Key) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO keys (`+keyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, keyArgs(k)...)
	return err
}

// UpdateKey replaces the stored key of k.ID.
func (s *KeyStore) UpdateKey(ctx context.Context, k keys.Key) error {
	a := keyArgs(k)
	res, err := s.db.ExecContext(ctx, `UPDATE keys SET hash = ?, prefix = ?, name = ?, team = ?, owner = ?, models = ?, rpm = ?, tpm = ?,
		daily_usd = ?, monthly_usd = ?, created_ns = ?, revoked_ns = ? WHERE id = ?`, append(a[1:], a[0])...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("%s: %w", k.ID, keys.ErrNotFound)
	}
	return nil
}

// Keys returns every key, oldest first.
func (s *KeyStore) Keys(ctx context.Context) ([]keys.Key, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+keyCols+` FROM keys ORDER BY created_ns, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []keys.Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// KeyByHash returns the key whose secret hashes to hash.
func (s *KeyStore) KeyByHash(ctx context.Context, hash string) (keys.Key, bool, error) {
	k, err := scanKey(s.db.QueryRowContext(ctx, `SELECT `+keyCols+` FROM keys WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return keys.Key{}, false, nil
	}
	return k, err == nil, err
}

// AddSpend adds each amount to its key's window, in one transaction.
func (s *KeyStore) AddSpend(ctx context.Context, spend []keys.Spend) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, sp := range spend {
		if _, err := tx.ExecContext(ctx, `INSERT INTO key_spend (key_id, period, usd) VALUES (?, ?, ?)
			ON CONFLICT (key_id, period) DO UPDATE SET usd = usd + excluded.usd`, sp.KeyID, sp.Window, sp.USD); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// SpendIn returns each key's spend in window.
func (s *KeyStore) SpendIn(ctx context.Context, window string) (map[string]float64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key_id, usd FROM key_spend WHERE period = ?`, window)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var id string
		var usd float64
		if err := rows.Scan(&id, &usd); err != nil {
			return nil, err
		}
		out[id] = usd
	}
	return out, rows.Err()
}
