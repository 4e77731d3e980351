package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/shadow"
)

// shadowMigrations are the shadow store's schema, versioned in its own
// table (shadow_schema_version), so that it may share a file with the
// request log. Append only.
var shadowMigrations = []string{
	// 1: one row per shadowed call.
	`CREATE TABLE shadow (
		seq                INTEGER PRIMARY KEY,
		time_ns            INTEGER NOT NULL, -- when the shadow was queued, Unix nanoseconds
		request_id         TEXT    NOT NULL, -- the client call's
		alias              TEXT    NOT NULL,
		target             TEXT    NOT NULL, -- model:<m>, alias:<a> or legacy
		primary_model      TEXT    NOT NULL,
		shadow_model       TEXT    NOT NULL,
		outcome            TEXT    NOT NULL, -- compared, error, dropped, shed
		error              TEXT    NOT NULL,
		primary_cost_usd   REAL    NOT NULL,
		shadow_cost_usd    REAL    NOT NULL,
		shadow_duration_ms REAL    NOT NULL,
		rule               TEXT    NOT NULL, -- the decision rule, '' for none
		comparison         TEXT    NOT NULL  -- shadow.Comparison as JSON, '' when not compared
	);
	CREATE INDEX shadow_time ON shadow (time_ns);`,
}

// ShadowConfig configures a ShadowStore. Zero values are the defaults.
type ShadowConfig struct {
	// Path is the database file; required.
	Path string
	// RetentionDays is how long rows are kept (default 30); older rows are
	// deleted at open and every hour.
	RetentionDays int
	// QueueSize bounds the results waiting for the writer (default 4096);
	// beyond it OnShadow drops and counts.
	QueueSize int
	// Now is the clock of retention (default time.Now).
	Now func() time.Time
	// Logger receives write failures; nil discards.
	Logger *slog.Logger
}

// ShadowStore writes shadow comparisons (an shadow.Observer) and
// reads them back for keel shadow report. OnShadow never blocks: results
// are queued for one writer goroutine, which writes them in batches of up
// to 256 per transaction at least every 200ms. Safe for concurrent use.
type ShadowStore struct {
	lifecycle
	cfg   ShadowConfig
	queue chan shadow.Result

	dropped atomic.Uint64
}

var _ shadow.Observer = (*ShadowStore)(nil)

// shadowBatch and shadowTick bound how many results one transaction
// writes and how long a result waits.
const (
	shadowBatch = 256
	shadowTick  = 200 * time.Millisecond
)

// OpenShadow opens (creating if needed) the shadow store at cfg.Path,
// brings its schema up to date, applies the retention and starts the
// writer. Close it to write what is queued and stop the writer.
func OpenShadow(cfg ShadowConfig) (*ShadowStore, error) {
	if cfg.Path == "" {
		return nil, errors.New("opening shadow store: no path")
	}
	if cfg.RetentionDays == 0 {
		cfg.RetentionDays = DefaultRetentionDays
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 4096
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetentionDays < 0 {
		return nil, fmt.Errorf("opening shadow store: retention_days: want a positive number of days, got %d", cfg.RetentionDays)
	}
	db, err := sql.Open("sqlite", dsn(cfg.Path, false))
	if err != nil {
		return nil, fmt.Errorf("opening shadow store %s: %w", cfg.Path, err)
	}
	if err := migrateVersioned(db, "shadow_schema_version", shadowMigrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening shadow store %s: %w", cfg.Path, err)
	}
	s := &ShadowStore{lifecycle: newLifecycle("shadow store", db), cfg: cfg, queue: make(chan shadow.Result, cfg.QueueSize)}
	if err := s.prune(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening shadow store %s: %w", cfg.Path, err)
	}
	go s.run()
	return s, nil
}

// OnShadow queues r for the writer; when the queue is full, or the store
// is closed, r is dropped and counted (Dropped).
func (s *ShadowStore) OnShadow(r shadow.Result) {
	if s.closed.Load() {
		s.dropped.Add(1)
		return
	}
	select {
	case s.queue <- r:
	default:
		s.dropped.Add(1)
	}
}

// RequestDone does nothing: the store reads only shadow results. It
// makes the store an callrec.Observer, so telemetry.Multi can carry it.
func (s *ShadowStore) RequestDone(*callrec.Record) {}

// Dropped counts results not written because the queue was full or the
// store closed.
func (s *ShadowStore) Dropped() uint64 { return s.dropped.Load() }

// Flush waits until every result queued before it is written, or ctx ends.
func (s *ShadowStore) Flush(ctx context.Context) error { return s.waitFlush(ctx) }

// Close writes what is queued, stops the writer and closes the database.
func (s *ShadowStore) Close() error { return s.shutdown() }

func (s *ShadowStore) run() {
	defer close(s.done)
	tick := time.NewTicker(shadowTick)
	defer tick.Stop()
	lastPrune := s.cfg.Now()
	batch := make([]shadow.Result, 0, shadowBatch)
	drain := func() error {
		var err error
		for {
			for len(batch) < shadowBatch {
				select {
				case r := <-s.queue:
					batch = append(batch, r)
					continue
				default:
				}
				break
			}
			if len(batch) == 0 {
				return err
			}
			if werr := s.write(context.Background(), batch); werr != nil {
				s.cfg.Logger.Warn("keel: writing shadow results", "err", werr, "results", len(batch))
				err = werr
			}
			batch = batch[:0]
		}
	}
	for {
		select {
		case <-s.stop:
			drain()
			return
		case ch := <-s.flush:
			ch <- drain()
		case <-tick.C:
			drain()
			if now := s.cfg.Now(); now.Sub(lastPrune) >= time.Hour {
				lastPrune = now
				if err := s.prune(context.Background()); err != nil {
					s.cfg.Logger.Warn("keel: pruning shadow results", "err", err)
				}
			}
		}
	}
}

func (s *ShadowStore) write(ctx context.Context, batch []shadow.Result) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO shadow (time_ns, request_id, alias, target, primary_model, shadow_model, outcome, error,
		primary_cost_usd, shadow_cost_usd, shadow_duration_ms, rule, comparison) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	for i := range batch {
		r := &batch[i]
		cmp := ""
		if r.Comparison != nil {
			b, err := json.Marshal(r.Comparison)
			if err != nil {
				return err
			}
			cmp = string(b)
		}
		if _, err := st.ExecContext(ctx, r.Time.UnixNano(), r.RequestID, r.Alias, r.Target, r.PrimaryModel, r.ShadowModel, r.Outcome, r.Error,
			r.PrimaryCost, r.ShadowCost, ms(r.ShadowTime), r.Rule, cmp); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (s *ShadowStore) prune(ctx context.Context) error {
	cut := s.cfg.Now().Add(-time.Duration(s.cfg.RetentionDays) * 24 * time.Hour).UnixNano()
	_, err := s.db.ExecContext(ctx, `DELETE FROM shadow WHERE time_ns < ?`, cut)
	return err
}

// ShadowQuery selects stored results; zero fields select everything.
type ShadowQuery struct {
	// Since keeps results queued at or after it.
	Since time.Time
	// Alias keeps one alias's results.
	Alias string
}

// ReadShadow reads the results q selects from the shadow store at path
// (read-only; the file must exist), oldest first.
func ReadShadow(ctx context.Context, path string, q ShadowQuery) ([]shadow.Result, error) {
	if fi, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("opening shadow store: %w", err)
	} else if fi.IsDir() {
		return nil, fmt.Errorf("opening shadow store: %s is a directory", path)
	}
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("opening shadow store %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT time_ns, request_id, alias, target, primary_model, shadow_model, outcome, error,
		primary_cost_usd, shadow_cost_usd, shadow_duration_ms, rule, comparison FROM shadow
		WHERE time_ns >= ? AND (? = '' OR alias = ?) ORDER BY seq`, q.Since.UnixNano(), q.Alias, q.Alias)
	if err != nil {
		return nil, fmt.Errorf("reading shadow store %s: %w", path, err)
	}
	defer rows.Close()
	var out []shadow.Result
	for rows.Next() {
		var r shadow.Result
		var tns int64
		var durMS float64
		var cmp string
		if err := rows.Scan(&tns, &r.RequestID, &r.Alias, &r.Target, &r.PrimaryModel, &r.ShadowModel, &r.Outcome, &r.Error,
			&r.PrimaryCost, &r.ShadowCost, &durMS, &r.Rule, &cmp); err != nil {
			return nil, fmt.Errorf("reading shadow store %s: %w", path, err)
		}
		r.Time = time.Unix(0, tns)
		r.ShadowTime = time.Duration(durMS * float64(time.Millisecond))
		if cmp != "" {
			r.Comparison = &shadow.Comparison{}
			if err := json.Unmarshal([]byte(cmp), r.Comparison); err != nil {
				return nil, fmt.Errorf("reading shadow store %s: row %s: %w", path, r.RequestID, err)
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading shadow store %s: %w", path, err)
	}
	return out, nil
}
