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
	// eviction, size is len(data).
	`CREATE TABLE responses (
		id         TEXT    PRIMARY KEY, -- the response id the client got
		seq        INTEGER NOT NULL UNIQUE,
		expires_ns INTEGER NOT NULL,    -- Unix nanoseconds
		size       INTEGER NOT NULL,
		data       BLOB    NOT NULL     -- convstate.Conversation as JSON
	);
	CREATE INDEX responses_expires ON responses (expires_ns);`,
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
func (c *Conversations) Put(ctx context.Context, id string, data []byte, now, expires time.Time) (err error) {
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
	if _, err = tx.ExecContext(ctx, `DELETE FROM responses WHERE id = ? OR expires_ns <= ?`, id, now.UnixNano()); err != nil {
		return err
	}
	size := int64(len(data))
	if !expires.After(now) || c.bounds.MaxBytes > 0 && size > c.bounds.MaxBytes {
		return tx.Commit()
	}
	if _, err = tx.ExecContext(ctx, `INSERT INTO responses (id, seq, expires_ns, size, data)
		VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM responses), ?, ?, ?)`, id, expires.UnixNano(), size, data); err != nil {
		return err
	}
	if n := c.bounds.MaxEntries; n > 0 {
		if _, err = tx.ExecContext(ctx, `DELETE FROM responses WHERE seq <= (SELECT seq FROM responses ORDER BY seq DESC LIMIT 1 OFFSET ?)`, n); err != nil {
			return err
		}
	}
	if max := c.bounds.MaxBytes; max > 0 {
		// The newest rows whose running total (newest first) stays within
		// the bound are kept.
		if _, err = tx.ExecContext(ctx, `DELETE FROM responses WHERE seq <= (
			SELECT seq FROM (SELECT seq, sum(size) OVER (ORDER BY seq DESC) AS total FROM responses)
			WHERE total > ? ORDER BY seq DESC LIMIT 1)`, max); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Get implements convstate.Backend.
func (c *Conversations) Get(ctx context.Context, id string, now time.Time) ([]byte, error) {
	var data []byte
	err := c.db.QueryRowContext(ctx, `SELECT data FROM responses WHERE id = ? AND expires_ns > ?`, id, now.UnixNano()).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, convstate.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading response %s: %w", id, err)
	}
	return data, nil
}

// Delete implements convstate.Backend.
func (c *Conversations) Delete(ctx context.Context, id string, now time.Time) (bool, error) {
	var exp int64
	err := c.db.QueryRowContext(ctx, `DELETE FROM responses WHERE id = ? RETURNING expires_ns`, id).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("deleting response %s: %w", id, err)
	}
	return exp > now.UnixNano(), nil // an expired row was no longer there for the caller
}
