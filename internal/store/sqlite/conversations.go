package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/keelmesh/keel/internal/convstate"
)

// conversationMigrations are the Responses API's stored conversations
// (convstate), versioned in their own table (responses_schema_version) so
// that they share the request log's file without touching its schema.
// Append only.
var conversationMigrations = []string{
	// 1: one row per stored response; seq orders them oldest first for
	// eviction, size is the conversation's Size; responses_total holds their count and
	// total size (one row), kept by every write, so a bound is checked
	// without a scan.
	`CREATE TABLE responses (
		id         TEXT    PRIMARY KEY, -- the response id the client got
		seq        INTEGER NOT NULL UNIQUE,
		expires_ns INTEGER NOT NULL,    -- Unix nanoseconds
		size       INTEGER NOT NULL,
		data       BLOB    NOT NULL     -- convstate.Encode of the conversation
	);
	CREATE INDEX responses_expires ON responses (expires_ns);
	CREATE TABLE responses_total (entries INTEGER NOT NULL, bytes INTEGER NOT NULL);
	INSERT INTO responses_total VALUES (0, 0);`,
}

// Conversations is a convstate.Backend in an SQLite database (by default
// the request log's file). Each Put is one transaction that replaces the
// entry, deletes the expired ones and then the oldest while the bounds are
// exceeded, so the table never holds more than the bounds after a Put.
// Safe for concurrent use, from several processes too (WAL, a busy
// timeout); each method is one round trip to the database.
type Conversations struct {
	db     *sql.DB
	bounds convstate.Bounds
}

var _ convstate.Backend = (*Conversations)(nil)

// OpenConversations opens (creating if needed) the conversation store at
// path, enforcing b.
func OpenConversations(path string, b convstate.Bounds) (*Conversations, error) {
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("opening response store %s: %w", path, err)
	}
	if err := migrateVersioned(db, "responses_schema_version", conversationMigrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening response store %s: %w", path, err)
	}
	return &Conversations{db: db, bounds: b}, nil
}

// Close closes the database.
func (c *Conversations) Close() error { return c.db.Close() }

// Put implements convstate.Backend.
func (c *Conversations) Put(ctx context.Context, id string, conv *convstate.Conversation, now, expires time.Time) (err error) {
	data, err := convstate.Encode(conv)
	if err != nil {
		return fmt.Errorf("storing response %s: %w", id, err)
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storing response %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
			err = fmt.Errorf("storing response %s: %w", id, err)
		}
	}()
	var entries, total int64
	if err = tx.QueryRowContext(ctx, `SELECT entries, bytes FROM responses_total`).Scan(&entries, &total); err != nil {
		return err
	}
	n, freed, err := deleteSizes(ctx, tx, `DELETE FROM responses WHERE id = ? OR expires_ns <= ? RETURNING size`, id, now.UnixNano())
	if err != nil {
		return err
	}
	entries, total = entries-n, total-freed
	if size := conv.Size(); expires.After(now) && (c.bounds.MaxBytes <= 0 || size <= c.bounds.MaxBytes) {
		if _, err = tx.ExecContext(ctx, `INSERT INTO responses (id, seq, expires_ns, size, data)
			VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM responses), ?, ?, ?)`, id, expires.UnixNano(), size, data); err != nil {
			return err
		}
		entries, total = entries+1, total+size
	}
	for c.bounds.MaxEntries > 0 && entries > int64(c.bounds.MaxEntries) || c.bounds.MaxBytes > 0 && total > c.bounds.MaxBytes {
		n, freed, err := deleteSizes(ctx, tx, `DELETE FROM responses WHERE seq = (SELECT min(seq) FROM responses) RETURNING size`)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		entries, total = entries-n, total-freed
	}
	if _, err = tx.ExecContext(ctx, `UPDATE responses_total SET entries = ?, bytes = ?`, entries, total); err != nil {
		return err
	}
	return tx.Commit()
}

// deleteSizes runs a DELETE … RETURNING size and returns the rows and
// bytes it deleted.
func deleteSizes(ctx context.Context, tx *sql.Tx, q string, args ...any) (n, bytes int64, err error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var size int64
		if err := rows.Scan(&size); err != nil {
			return 0, 0, err
		}
		n, bytes = n+1, bytes+size
	}
	return n, bytes, rows.Err()
}

// Get implements convstate.Backend.
func (c *Conversations) Get(ctx context.Context, id string, now time.Time) (*convstate.Conversation, error) {
	var data []byte
	err := c.db.QueryRowContext(ctx, `SELECT data FROM responses WHERE id = ? AND expires_ns > ?`, id, now.UnixNano()).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, convstate.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading response %s: %w", id, err)
	}
	conv, err := convstate.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("reading response %s: %w", id, err)
	}
	return conv, nil
}

// Delete implements convstate.Backend.
func (c *Conversations) Delete(ctx context.Context, id string, now time.Time) (live bool, err error) {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("deleting response %s: %w", id, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
			err = fmt.Errorf("deleting response %s: %w", id, err)
		}
	}()
	var exp, size int64
	err = tx.QueryRowContext(ctx, `DELETE FROM responses WHERE id = ? RETURNING expires_ns, size`, id).Scan(&exp, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return false, tx.Commit()
	}
	if err != nil {
		return false, err
	}
	if _, err = tx.ExecContext(ctx, `UPDATE responses_total SET entries = entries - 1, bytes = bytes - ?`, size); err != nil {
		return false, err
	}
	return exp > now.UnixNano(), tx.Commit() // an expired row was no longer there for the caller
}
