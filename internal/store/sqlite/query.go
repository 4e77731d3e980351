package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"iter"
	"math"
	"os"
	"strings"
	"time"
)

// Row is one logged client call with its upstream attempts.
type Row struct {
	// Seq is the row's key in the log, increasing in write order.
	Seq       int64
	RequestID string
	// Start is in UTC, with the nanoseconds the engine recorded.
	Start    time.Time
	Duration time.Duration
	TTFT     time.Duration
	// Format is the client's wire format ("anthropic", "openai", "unknown").
	Format string
	// Model is the model the client asked for.
	Model          string
	ServedEndpoint string
	ServedModel    string
	ServedRegion   string
	ServedProvider string
	Status         int
	// MeshErrorCode is the error's mesh_error_code ("" when none).
	MeshErrorCode string
	// Fallback is why the first choice did not serve ("" when it did).
	Fallback            string
	Retries             int
	Hedges              int
	HedgeWon            bool
	Recovered           int
	Fragments           int
	FragmentsOK         int
	Fusions             int
	FusionConflicts     int
	NormalizationOffset float64
	Repairs             []string
	TokensIn            int
	TokensOut           int
	TokensCacheRead     int
	TokensCacheWrite    int
	// TokensCacheWrite5m and TokensCacheWrite1h split TokensCacheWrite by
	// the TTL written. Rows of logs written before the split was recorded
	// read every write as 5-minute (the cheaper price, as reports priced
	// them before).
	TokensCacheWrite5m int
	TokensCacheWrite1h int
	// CostUSD is the engine's cost estimate of the call (see engine.Record.Cost).
	CostUSD   float64
	QueueWait time.Duration
	Stream    bool
	Domain    string
	// Legacy is set when the call took the plain path to the primary
	// model: the rollout's monitor stage or an open safety valve.
	Legacy bool
	// Stage is the rollout stage the call ran in ("monitor", "hedging",
	// "full"; "" in logs written before it was recorded).
	Stage string
	// KeyID and Team are the virtual key the call was made with and its
	// team ("" without one, and in logs written before they were recorded).
	KeyID, Team string
	// Cache is X-Mesh-Cache (hit, miss, bypass; "" without a cache),
	// SemanticCache the semantic cache's part (hit, miss, error; "" when
	// not looked up) and CacheSimilarity a semantic hit's similarity; ""
	// and 0 in logs written before they were recorded.
	Cache, SemanticCache string
	CacheSimilarity      float64
	Attempts             []Attempt
}

// Attempt is one upstream attempt of a Row.
type Attempt struct {
	Endpoint string
	Model    string
	Region   string
	// Kind is "primary", "retry", "hedge", "fallback" or "continuation".
	Kind    string
	Outcome string
	Status  int
	// Start is the attempt's start as an offset from the request's start.
	Start    time.Duration
	Duration time.Duration
	Wait     time.Duration
	Bytes    int64
	Winner   bool
	// InputTokens, OutputTokens and CostUSD are the attempt's own usage and
	// its cost (engine.Attempt); UsageRecorded is false in logs written
	// before they were recorded.
	InputTokens   int
	OutputTokens  int
	CostUSD       float64
	UsageRecorded bool
}

// Reader reads a request log without writing to it (keel report). It is
// safe for concurrent use; it does not block a Log writing the same file.
// It reads logs of every schema version up to the current one.
type Reader struct {
	db *sql.DB
	// version is the log's schema version: the columns it has.
	version int
}

// OpenReader opens the request log at path read-only. It fails when the file
// does not exist, cannot be read, or is not a Keel request log.
func OpenReader(path string) (*Reader, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("opening request log: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("opening request log: %s is a directory", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening request log: %w", err)
	}
	f.Close()
	db, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("opening request log %s: %w", path, err)
	}
	v, err := schemaVersion(context.Background(), db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening request log %s: not a keel request log (%w)", path, err)
	}
	if v < 1 || v > len(migrations) {
		db.Close()
		return nil, fmt.Errorf("opening request log %s: unsupported schema version %d", path, v)
	}
	return &Reader{db: db, version: v}, nil
}

// Close closes the database.
func (r *Reader) Close() error { return r.db.Close() }

// Query yields the calls that started at or after since, in start order. It
// reads lazily: stop iterating to stop the query. A failure is yielded once
// as the error, with a nil Row, and ends the sequence.
func (r *Reader) Query(ctx context.Context, since time.Time) iter.Seq2[*Row, error] {
	return query(ctx, r.db, r.version, since)
}

// Query is Reader.Query over the log's own database. It sees only what the
// writer has committed; call Flush first to include queued Records.
func (l *Log) Query(ctx context.Context, since time.Time) iter.Seq2[*Row, error] {
	return query(ctx, l.db, len(migrations), since)
}

// selectRows reads the rows of a log of schema version v: columns a
// version lacks read as their "not recorded" value.
func selectRows(v int) string {
	stage, usage, key := "r.stage", "a.tokens_in, a.tokens_out, a.cost_usd", "r.key_id, r.team"
	cached := "r.cache, r.semantic_cache, r.cache_similarity"
	if v < 7 {
		cached = "'', '', 0"
	}
	split := "r.tokens_cache_write_5m, r.tokens_cache_write_1h"
	if v < 8 {
		split = "NULL, NULL"
	}
	if v < 4 {
		stage, usage = "''", "NULL, NULL, NULL"
	}
	if v < 6 {
		key = "'', ''"
	}
	return `SELECT r.seq, r.id, r.time_ns, r.duration_ms, r.ttft_ms, r.format, r.model,
	r.served_endpoint, r.served_model, r.served_region, r.served_provider, r.status,
	r.mesh_error_code, r.fallback, r.retries, r.hedges, r.hedge_won, r.recovered,
	r.fragments, r.fragments_ok, r.fusions, r.fusion_conflicts, r.normalization_offset,
	r.repairs, r.tokens_in, r.tokens_out, r.tokens_cache_read, r.tokens_cache_write,
	r.cost_usd, r.queue_wait_ms, r.stream, r.domain, r.legacy, ` + stage + `, ` + key + `, ` + cached + `, ` + split + `,
	a.idx, a.endpoint, a.model, a.region, a.kind, a.outcome, a.status, a.start_ms,
	a.duration_ms, a.wait_ms, a.bytes, a.winner, ` + usage + `
	FROM requests r LEFT JOIN attempts a ON a.request_seq = r.seq
	WHERE r.time_ns >= ?
	ORDER BY r.time_ns, r.seq, a.idx`
}

func query(ctx context.Context, db *sql.DB, version int, since time.Time) iter.Seq2[*Row, error] {
	return func(yield func(*Row, error) bool) {
		rows, err := db.QueryContext(ctx, selectRows(version), since.UnixNano())
		if err != nil {
			yield(nil, fmt.Errorf("querying request log: %w", err))
			return
		}
		defer rows.Close()
		var cur *Row
		for rows.Next() {
			var (
				row                                   Row
				startNS                               int64
				dur, ttft, wait                       float64
				repairs                               string
				idx, aStatus, aBytes                  sql.NullInt64
				aEndpoint, aModel, aRegion, aKind, aO sql.NullString
				aStart, aDur, aWait                   sql.NullFloat64
				aWinner                               sql.NullBool
				aIn, aOut                             sql.NullInt64
				aCost                                 sql.NullFloat64
				w5m, w1h                              sql.NullInt64
			)
			if err := rows.Scan(&row.Seq, &row.RequestID, &startNS, &dur, &ttft, &row.Format, &row.Model,
				&row.ServedEndpoint, &row.ServedModel, &row.ServedRegion, &row.ServedProvider, &row.Status,
				&row.MeshErrorCode, &row.Fallback, &row.Retries, &row.Hedges, &row.HedgeWon, &row.Recovered,
				&row.Fragments, &row.FragmentsOK, &row.Fusions, &row.FusionConflicts, &row.NormalizationOffset,
				&repairs, &row.TokensIn, &row.TokensOut, &row.TokensCacheRead, &row.TokensCacheWrite,
				&row.CostUSD, &wait, &row.Stream, &row.Domain, &row.Legacy, &row.Stage, &row.KeyID, &row.Team,
				&row.Cache, &row.SemanticCache, &row.CacheSimilarity, &w5m, &w1h,
				&idx, &aEndpoint, &aModel, &aRegion, &aKind, &aO, &aStatus, &aStart,
				&aDur, &aWait, &aBytes, &aWinner, &aIn, &aOut, &aCost); err != nil {
				yield(nil, fmt.Errorf("reading request log: %w", err))
				return
			}
			if cur == nil || cur.Seq != row.Seq {
				if cur != nil && !yield(cur, nil) {
					return
				}
				row.Start = time.Unix(0, startNS).UTC()
				row.Duration, row.TTFT, row.QueueWait = dur2(dur), dur2(ttft), dur2(wait)
				row.TokensCacheWrite5m = row.TokensCacheWrite
				if w5m.Valid && w1h.Valid {
					row.TokensCacheWrite5m, row.TokensCacheWrite1h = int(w5m.Int64), int(w1h.Int64)
				}
				if repairs != "" {
					row.Repairs = strings.Split(repairs, "\n")
				}
				cur = &row
			}
			if idx.Valid {
				cur.Attempts = append(cur.Attempts, Attempt{
					Endpoint: aEndpoint.String, Model: aModel.String, Region: aRegion.String,
					Kind: aKind.String, Outcome: aO.String, Status: int(aStatus.Int64),
					Start: dur2(aStart.Float64), Duration: dur2(aDur.Float64), Wait: dur2(aWait.Float64),
					Bytes: aBytes.Int64, Winner: aWinner.Bool,
					InputTokens: int(aIn.Int64), OutputTokens: int(aOut.Int64), CostUSD: aCost.Float64, UsageRecorded: aIn.Valid,
				})
			}
		}
		if err := rows.Err(); err != nil {
			yield(nil, fmt.Errorf("reading request log: %w", err))
			return
		}
		if cur != nil {
			yield(cur, nil)
		}
	}
}

// dur2 converts milliseconds back to a Duration, exactly for any duration
// written by ms (rounding removes the float's representation error).
func dur2(msec float64) time.Duration {
	return time.Duration(math.Round(msec * float64(time.Millisecond)))
}
