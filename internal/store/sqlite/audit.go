package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
)

// The personal-data audit log (issue 18 item 4) lives in a database file of
// its own, independent of the request log and of Redis: one row per value
// found in a call, with a keyed hash of the value, never the value, and a
// row for a call whose detection failed. An *Audit is an callrec.Observer:
// RequestDone never blocks and does no I/O (a bounded queue, dropped and
// counted when full); one writer goroutine inserts batches and deletes rows
// past the retention at Open and hourly. Every method is safe for
// concurrent use.

// Audit defaults.
const (
	DefaultAuditPath          = "keel-audit.db"
	DefaultAuditRetentionDays = 90
)

// AuditConfig configures OpenAudit; zero fields take the defaults.
type AuditConfig struct {
	// Path is the database file (default keel-audit.db).
	Path string
	// RetentionDays is how long rows are kept (default 90).
	RetentionDays int
	// HashKey is the HMAC key of the value hashes; empty reads the key
	// stored in the database, generating and storing one the first time.
	HashKey []byte
	// QueueSize bounds the Records waiting for the writer (default 4096).
	QueueSize int
	// FlushInterval is the longest a queued Record waits (default 200ms).
	FlushInterval time.Duration
	// Now is the clock of timestamps and retention (default time.Now).
	Now func() time.Time
	// Logger receives write failures; nil discards.
	Logger *slog.Logger
}

// Audit is the audit log writer.
type Audit struct {
	lifecycle
	cfg   AuditConfig
	key   []byte
	queue chan *callrec.Record

	dropped atomic.Uint64
}

var _ callrec.Observer = (*Audit)(nil)

const auditSchema = `
CREATE TABLE IF NOT EXISTS audit_meta (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS pii_audit (
	seq        INTEGER PRIMARY KEY,
	ts         INTEGER NOT NULL, -- unix nanoseconds, UTC
	request_id TEXT NOT NULL,
	key_id     TEXT NOT NULL,
	team       TEXT NOT NULL,
	model      TEXT NOT NULL,
	action     TEXT NOT NULL,    -- redact, mask, block, log
	outcome    TEXT NOT NULL,    -- sent, blocked, unavailable, sent_unscanned
	kind       TEXT NOT NULL,    -- '' on a failed detection's row
	location   TEXT NOT NULL,
	start_byte INTEGER NOT NULL,
	end_byte   INTEGER NOT NULL,
	hash       TEXT NOT NULL     -- hex HMAC-SHA256 of the value
);
CREATE INDEX IF NOT EXISTS pii_audit_ts ON pii_audit (ts);
`

// OpenAudit opens (creating if needed) the audit log, reads or creates its
// hash key, deletes rows past the retention and starts the writer.
func OpenAudit(cfg AuditConfig) (*Audit, error) {
	if cfg.Path == "" {
		cfg.Path = DefaultAuditPath
	}
	if cfg.RetentionDays == 0 {
		cfg.RetentionDays = DefaultAuditRetentionDays
	}
	if cfg.RetentionDays < 0 {
		return nil, fmt.Errorf("opening audit log: retention_days: want a positive number of days, got %d", cfg.RetentionDays)
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 4096
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	db, err := sql.Open("sqlite", dsn(cfg.Path, false))
	if err != nil {
		return nil, fmt.Errorf("opening audit log %s: %w", cfg.Path, err)
	}
	a := &Audit{lifecycle: newLifecycle("audit log", db), cfg: cfg, queue: make(chan *callrec.Record, cfg.QueueSize)}
	if err := a.init(); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening audit log %s: %w", cfg.Path, err)
	}
	go a.run()
	return a, nil
}

func (a *Audit) init() error {
	ctx := context.Background()
	if _, err := a.db.ExecContext(ctx, auditSchema); err != nil {
		return fmt.Errorf("creating schema: %w", err)
	}
	a.key = a.cfg.HashKey
	if len(a.key) == 0 {
		// Another process (a reloaded keel serve) may create it at the same
		// moment: whichever insert lands first is the key both read.
		k := make([]byte, 32)
		rand.Read(k) // never fails (crypto/rand)
		if _, err := a.db.ExecContext(ctx, `INSERT OR IGNORE INTO audit_meta (name, value) VALUES ('hash_key', ?)`, k); err != nil {
			return fmt.Errorf("storing hash key: %w", err)
		}
		if err := a.db.QueryRowContext(ctx, `SELECT value FROM audit_meta WHERE name = 'hash_key'`).Scan(&a.key); err != nil {
			return fmt.Errorf("reading hash key: %w", err)
		}
	}
	return a.prune(ctx)
}

// HashKey is the HMAC key the engine must hash values with
// (pii.Options.HashKey).
func (a *Audit) HashKey() []byte { return a.key }

// Dropped counts Records not queued (queue full or closed).
func (a *Audit) Dropped() uint64 { return a.dropped.Load() }

// RequestDone queues r when detection ran on it and found something or
// failed. It never blocks.
func (a *Audit) RequestDone(r *callrec.Record) {
	if r == nil || r.PII == nil || len(r.PII.Findings) == 0 && !r.PII.Failed {
		return
	}
	if a.closed.Load() {
		a.dropped.Add(1)
		return
	}
	select {
	case a.queue <- r:
	default:
		a.dropped.Add(1)
	}
}

// Flush blocks until every Record queued before it is written, and runs
// retention. It returns the first write error, or ctx's.
func (a *Audit) Flush(ctx context.Context) error { return a.waitFlush(ctx) }

// Close writes what is queued, stops the writer and closes the database.
func (a *Audit) Close() error { return a.shutdown() }

func (a *Audit) run() {
	defer close(a.done)
	tick := time.NewTicker(a.cfg.FlushInterval)
	defer tick.Stop()
	lastPrune := a.cfg.Now()
	for {
		select {
		case <-tick.C:
			a.write()
			if now := a.cfg.Now(); now.Sub(lastPrune) >= pruneEvery {
				lastPrune = now
				if err := a.prune(context.Background()); err != nil {
					a.cfg.Logger.Error("audit log retention failed", "err", err)
				}
			}
		case reply := <-a.flush:
			err := a.write()
			if perr := a.prune(context.Background()); err == nil {
				err = perr
			}
			reply <- err
		case <-a.stop:
			a.write()
			return
		}
	}
}

// write inserts every queued Record in one transaction.
func (a *Audit) write() error {
	var recs []*callrec.Record
	for len(recs) < cap(a.queue) {
		select {
		case r := <-a.queue:
			recs = append(recs, r)
			continue
		default:
		}
		break
	}
	if len(recs) == 0 {
		return nil
	}
	err := a.insert(recs)
	if err != nil {
		a.cfg.Logger.Error("audit log write failed", "records", len(recs), "err", err)
	}
	return err
}

func (a *Audit) insert(recs []*callrec.Record) error {
	ctx := context.Background()
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("writing audit rows: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO pii_audit (ts, request_id, key_id, team, model, action, outcome, kind, location, start_byte, end_byte, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("writing audit rows: %w", err)
	}
	defer st.Close()
	for _, r := range recs {
		p := r.PII
		out := auditOutcome(r)
		ts := r.Start.UTC().UnixNano()
		if len(p.Findings) == 0 {
			if _, err := st.ExecContext(ctx, ts, r.RequestID, r.KeyID, r.Team, r.Model, p.Action, out, "", "", 0, 0, ""); err != nil {
				return fmt.Errorf("writing audit rows: %w", err)
			}
		}
		for _, f := range p.Findings {
			if _, err := st.ExecContext(ctx, ts, r.RequestID, r.KeyID, r.Team, r.Model, p.Action, out, f.Kind, f.Where, f.Start, f.End, f.Hash); err != nil {
				return fmt.Errorf("writing audit rows: %w", err)
			}
		}
	}
	return tx.Commit()
}

// The outcomes of an audited call.
const (
	AuditSent          = "sent"           // went upstream (redacted, masked, or logged only)
	AuditBlocked       = "blocked"        // refused: MESH_PII_BLOCKED
	AuditUnavailable   = "unavailable"    // detection failed: MESH_PII_UNAVAILABLE
	AuditSentUnscanned = "sent_unscanned" // detection failed, fail_open sent it
)

func auditOutcome(r *callrec.Record) string {
	switch {
	case r.PII.Failed && r.PII.RawUpstream:
		return AuditSentUnscanned
	case r.PII.Failed:
		return AuditUnavailable
	case r.Err != nil && r.Err.MeshCode == "MESH_PII_BLOCKED":
		return AuditBlocked
	}
	return AuditSent
}

// prune deletes rows older than the retention.
func (a *Audit) prune(ctx context.Context) error {
	cut := a.cfg.Now().Add(-time.Duration(a.cfg.RetentionDays) * 24 * time.Hour).UTC().UnixNano()
	if _, err := a.db.ExecContext(ctx, `DELETE FROM pii_audit WHERE ts < ?`, cut); err != nil {
		return fmt.Errorf("deleting audit rows past retention: %w", err)
	}
	return nil
}

// AuditRow is one audit row.
type AuditRow struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	KeyID     string    `json:"key_id"`
	Team      string    `json:"team"`
	Model     string    `json:"model"`
	Action    string    `json:"action"`
	Outcome   string    `json:"outcome"`
	Kind      string    `json:"kind"`
	Location  string    `json:"location"`
	Start     int       `json:"start"`
	End       int       `json:"end"`
	Hash      string    `json:"hash"`
}

// AuditFilter selects audit rows; zero fields select everything.
type AuditFilter struct {
	Since, Until                 time.Time
	RequestID, KeyID, Team, Kind string
	Hash                         string
	// Limit caps the rows (0: no cap).
	Limit int
}

// AuditReader reads an audit log, read-only.
type AuditReader struct{ db *sql.DB }

// OpenAuditReader opens the audit log at path read-only (a running keel
// serve may be writing it).
func OpenAuditReader(path string) (*AuditReader, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("opening audit log: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("opening audit log %s: %w", path, err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'pii_audit'`).Scan(&n); err != nil || n == 0 {
		db.Close()
		return nil, fmt.Errorf("opening audit log %s: not a keel audit log", path)
	}
	return &AuditReader{db: db}, nil
}

// Close closes the reader.
func (r *AuditReader) Close() error { return r.db.Close() }

// HashKey is the key stored in the log (nil when pii.audit.hash_key was
// set instead), so a value can be looked up by its hash.
func (r *AuditReader) HashKey(ctx context.Context) ([]byte, error) {
	var k []byte
	err := r.db.QueryRowContext(ctx, `SELECT value FROM audit_meta WHERE name = 'hash_key'`).Scan(&k)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return k, err
}

// Rows returns the rows f selects, oldest first.
func (r *AuditReader) Rows(ctx context.Context, f AuditFilter) ([]AuditRow, error) {
	var where []string
	var args []any
	if !f.Since.IsZero() {
		where, args = append(where, "ts >= ?"), append(args, f.Since.UTC().UnixNano())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "ts < ?"), append(args, f.Until.UTC().UnixNano())
	}
	for _, c := range []struct{ col, v string }{{"request_id", f.RequestID}, {"key_id", f.KeyID}, {"team", f.Team}, {"kind", f.Kind}, {"hash", f.Hash}} {
		if c.v != "" {
			where, args = append(where, c.col+" = ?"), append(args, c.v)
		}
	}
	q := `SELECT ts, request_id, key_id, team, model, action, outcome, kind, location, start_byte, end_byte, hash FROM pii_audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading audit log: %w", err)
	}
	defer rows.Close()
	var out []AuditRow
	for rows.Next() {
		var a AuditRow
		var ts int64
		if err := rows.Scan(&ts, &a.RequestID, &a.KeyID, &a.Team, &a.Model, &a.Action, &a.Outcome, &a.Kind, &a.Location, &a.Start, &a.End, &a.Hash); err != nil {
			return nil, fmt.Errorf("reading audit log: %w", err)
		}
		a.Time = time.Unix(0, ts).UTC()
		out = append(out, a)
	}
	return out, rows.Err()
}

// Requests counts the distinct calls with audit rows since a time.
func (r *AuditReader) Requests(ctx context.Context, since time.Time) (int, error) {
	var n int
	err := r.db.QueryRowContext(ctx, `SELECT count(DISTINCT request_id) FROM pii_audit WHERE ts >= ?`, since.UTC().UnixNano()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting audited requests: %w", err)
	}
	return n, nil
}

// AuditCount is the number of values found of one kind under one action
// and outcome, and in how many calls.
type AuditCount struct {
	Kind     string `json:"kind"`
	Action   string `json:"action"`
	Outcome  string `json:"outcome"`
	Values   int    `json:"values"`
	Requests int    `json:"requests"`
}

// Summary counts the rows since a time by kind, action and outcome, most
// values first (a failed detection's rows have kind "").
func (r *AuditReader) Summary(ctx context.Context, since time.Time) ([]AuditCount, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT kind, action, outcome, count(*), count(DISTINCT request_id) FROM pii_audit WHERE ts >= ?
		GROUP BY kind, action, outcome`, since.UTC().UnixNano())
	if err != nil {
		return nil, fmt.Errorf("summarising audit log: %w", err)
	}
	defer rows.Close()
	var out []AuditCount
	for rows.Next() {
		var c AuditCount
		if err := rows.Scan(&c.Kind, &c.Action, &c.Outcome, &c.Values, &c.Requests); err != nil {
			return nil, fmt.Errorf("summarising audit log: %w", err)
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Values != out[j].Values {
			return out[i].Values > out[j].Values
		}
		return out[i].Kind+out[i].Action+out[i].Outcome < out[j].Kind+out[j].Action+out[j].Outcome
	})
	return out, rows.Err()
}
