package sqlite

// migrations are applied in order; migrations[i] brings the schema from
// version i to version i+1. Append only: a shipped migration never changes.
var migrations = []string{
	// 1: requests and their upstream attempts.
	`CREATE TABLE requests (
		seq                  INTEGER PRIMARY KEY,
		id                   TEXT    NOT NULL,
		time_ns              INTEGER NOT NULL, -- start, Unix nanoseconds
		duration_ms          REAL    NOT NULL,
		ttft_ms              REAL    NOT NULL,
		format               TEXT    NOT NULL,
		model                TEXT    NOT NULL, -- the model the client asked for
		served_endpoint      TEXT    NOT NULL,
		served_model         TEXT    NOT NULL,
		served_region        TEXT    NOT NULL,
		served_provider      TEXT    NOT NULL,
		status               INTEGER NOT NULL,
		mesh_error_code      TEXT    NOT NULL,
		fallback             TEXT    NOT NULL, -- why the first choice did not serve
		attempts             INTEGER NOT NULL,
		retries              INTEGER NOT NULL,
		hedges               INTEGER NOT NULL,
		hedge_won            INTEGER NOT NULL,
		recovered            INTEGER NOT NULL,
		fragments            INTEGER NOT NULL,
		fragments_ok         INTEGER NOT NULL,
		fusions              INTEGER NOT NULL,
		fusion_conflicts     INTEGER NOT NULL,
		normalization_offset REAL    NOT NULL,
		repairs              TEXT    NOT NULL, -- newline-separated repair steps
		tokens_in            INTEGER NOT NULL,
		tokens_out           INTEGER NOT NULL,
		tokens_cache_read    INTEGER NOT NULL,
		tokens_cache_write   INTEGER NOT NULL,
		cost_usd             REAL    NOT NULL,
		queue_wait_ms        REAL    NOT NULL,
		stream               INTEGER NOT NULL,
		domain               TEXT    NOT NULL
	);
	CREATE INDEX requests_time ON requests (time_ns);
	CREATE INDEX requests_id ON requests (id);
	CREATE TABLE attempts (
		request_seq  INTEGER NOT NULL,
		idx          INTEGER NOT NULL,
		endpoint     TEXT    NOT NULL,
		model        TEXT    NOT NULL,
		region       TEXT    NOT NULL,
		kind         TEXT    NOT NULL, -- primary, retry, hedge, fallback, continuation
		outcome      TEXT    NOT NULL,
		status       INTEGER NOT NULL,
		start_ms     REAL    NOT NULL, -- offset from the request's start
		duration_ms  REAL    NOT NULL,
		wait_ms      REAL    NOT NULL,
		bytes        INTEGER NOT NULL,
		winner       INTEGER NOT NULL,
		PRIMARY KEY (request_seq, idx)
	) WITHOUT ROWID;`,
	// 2: prompt and answer bodies, written only with LogBodies.
	`CREATE TABLE bodies (
		request_seq INTEGER PRIMARY KEY,
		prompt      TEXT NOT NULL,
		answer      TEXT NOT NULL
	);`,
	// 3: calls the safety valve sent straight to the primary endpoint.
	`ALTER TABLE requests ADD COLUMN legacy INTEGER NOT NULL DEFAULT 0;`,
	// 4: the rollout stage (legacy alone cannot tell the monitor stage from
	// an open safety valve) and each attempt's own usage and cost. Rows of
	// older logs read stage "" and NULL usage: not recorded.
	`ALTER TABLE requests ADD COLUMN stage TEXT NOT NULL DEFAULT '';
	ALTER TABLE attempts ADD COLUMN tokens_in INTEGER;
	ALTER TABLE attempts ADD COLUMN tokens_out INTEGER;
	ALTER TABLE attempts ADD COLUMN cost_usd REAL;`,
	// 5: no index on the request id. Ids are random (a trace id must not be
	// guessable), so each insert landed at a random place of that B-tree:
	// it doubled the writer's CPU per Record. A lookup by id scans (the
	// report never does one).
	`DROP INDEX IF EXISTS requests_id;`,
	// 6: the virtual key a call was made with, and its team (issue 17);
	// '' for calls without one and in older rows.
	`ALTER TABLE requests ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE requests ADD COLUMN team TEXT NOT NULL DEFAULT '';`,
	// 7: the response cache's part (X-Mesh-Cache), the semantic cache's
	// (hit, miss, error) and a semantic hit's similarity (issue 17); '',
	// '' and 0 in older rows.
	`ALTER TABLE requests ADD COLUMN cache TEXT NOT NULL DEFAULT '';
	ALTER TABLE requests ADD COLUMN semantic_cache TEXT NOT NULL DEFAULT '';
	ALTER TABLE requests ADD COLUMN cache_similarity REAL NOT NULL DEFAULT 0;`,
	// 8: the cache writes split by TTL, 5-minute and 1-hour (Anthropic's
	// cache_creation; issue 28): they are priced apart (2× the input price
	// for an hour against 1.25×). NULL in older rows: not recorded, the
	// report prices those writes at the 5-minute price as before.
	`ALTER TABLE requests ADD COLUMN tokens_cache_write_5m INTEGER;
	ALTER TABLE requests ADD COLUMN tokens_cache_write_1h INTEGER;`,
}
