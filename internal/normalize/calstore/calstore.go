// Package calstore keeps temperature calibrations (normalize.Calibration) in
// SQLite (modernc.org/sqlite, pure Go, WAL): in a file of their own
// (DefaultPath) or in a table of a database the caller already has open.
// Rows are keyed by calibration_id and indexed by (reference, target); the
// calibration itself is stored as JSON.
//
// A *Store is safe for concurrent use (database/sql pools connections and
// SQLite serialises writers); every method blocks on disk I/O, so the request
// path reads calibrations from a normalize.Set loaded once (Store.Set), never
// from the Store.
package calstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/keelmesh/keel/internal/normalize"
)

// DefaultPath is the database file Open uses when given "".
const DefaultPath = "keel-calibrations.db"

// Store is a calibration table in a SQLite database.
type Store struct {
	db  *sql.DB
	own bool // Close closes db
}

const schema = `CREATE TABLE IF NOT EXISTS calibrations (
	calibration_id TEXT PRIMARY KEY,
	reference      TEXT NOT NULL,
	target         TEXT NOT NULL,
	created_at     INTEGER NOT NULL,
	body           TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS calibrations_pair ON calibrations (reference, target, created_at)`

// Open opens (creating if needed) the calibration database at path
// (DefaultPath when "") in WAL mode with a busy timeout.
func Open(path string) (*Store, error) {
	if path == "" {
		path = DefaultPath
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+esc+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("opening calibrations %s: %w", path, err)
	}
	s, err := New(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening calibrations %s: %w", path, err)
	}
	s.own = true
	return s, nil
}

// New uses db (opened with the "sqlite" driver), creating the calibrations
// table if it is missing. Close does not close db.
func New(db *sql.DB) (*Store, error) {
	for _, stmt := range strings.Split(schema, ";") {
		if _, err := db.ExecContext(context.Background(), stmt); err != nil {
			return nil, fmt.Errorf("creating the calibrations table: %w", err)
		}
	}
	return &Store{db: db}, nil
}

// Close closes the database when Open opened it.
func (s *Store) Close() error {
	if s.own {
		return s.db.Close()
	}
	return nil
}

// Save stores c under c.ID, replacing a calibration of that ID. c must have
// an ID and be valid; a zero CreatedAt is stored as now.
func (s *Store) Save(ctx context.Context, c *normalize.Calibration) error {
	if c.ID == "" {
		return errors.New("saving calibration: empty calibration_id")
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("saving calibration %q: %w", c.ID, err)
	}
	cc := *c
	if cc.CreatedAt.IsZero() {
		cc.CreatedAt = time.Now()
	}
	body, err := json.Marshal(&cc)
	if err != nil {
		return fmt.Errorf("saving calibration %q: %w", c.ID, err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO calibrations (calibration_id, reference, target, created_at, body) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (calibration_id) DO UPDATE SET reference = excluded.reference, target = excluded.target, created_at = excluded.created_at, body = excluded.body`,
		cc.ID, cc.Reference, cc.Target, cc.CreatedAt.UnixNano(), string(body))
	if err != nil {
		return fmt.Errorf("saving calibration %q: %w", c.ID, err)
	}
	return nil
}

func decode(body string) (*normalize.Calibration, error) {
	var c normalize.Calibration
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		return nil, fmt.Errorf("decoding calibration: %w", err)
	}
	return &c, nil
}

// All returns every stored calibration, oldest first.
func (s *Store) All(ctx context.Context) ([]*normalize.Calibration, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM calibrations ORDER BY created_at, calibration_id`)
	if err != nil {
		return nil, fmt.Errorf("listing calibrations: %w", err)
	}
	defer rows.Close()
	var out []*normalize.Calibration
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("listing calibrations: %w", err)
		}
		c, err := decode(body)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing calibrations: %w", err)
	}
	return out, nil
}
