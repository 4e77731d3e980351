package sqlite

import (
	"fmt"
	"math/bits"
	"strings"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// rawConn is the request log writer's own connection, opened through
// SQLite's C API (modernc.org/sqlite/lib) rather than database/sql.
//
// The writer binds ≈ 50 values per Record, and through the driver each
// bound value cost a parameter-name lookup, a lock and unlock of the
// connection's mutex (the driver opens every connection
// SQLITE_OPEN_FULLMUTEX), a C copy of every string and an unbind after the
// statement: more than half of the writer's CPU (BENCHMARKS.md, session 7,
// issue 26). Here the connection is opened SQLITE_OPEN_NOMUTEX, which is
// safe because only the writer goroutine uses it; the strings of one
// statement are copied into one C buffer and bound without a copy
// (SQLITE_STATIC); and every parameter is bound before each step, so no
// unbind is needed.
//
// Everything else (schema, retention, readers) still goes through
// database/sql; the file is the same, and WAL lets the two coexist.
type rawConn struct {
	tls *libc.TLS
	db  uintptr
	// arena holds the strings bound by the statement being run; size is
	// its capacity.
	arena, size uintptr
}

// ptrSize is the size of a C pointer (Go's uintptr, as big as its uint).
const ptrSize = bits.UintSize / 8

// openRaw opens path read-write (its schema already migrated by Open) with
// the writer's settings, those dsn gives the pool's connections.
func openRaw(path string) (_ *rawConn, err error) {
	if strings.HasPrefix(path, "file:") {
		// A name starting "file:" may be read as a URI: this one is a path.
		path = "./" + path
	}
	c := &rawConn{tls: libc.NewTLS()}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	name, err := libc.CString(path)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, name)
	// SQLite sets *pdb whatever the outcome.
	pdb := c.tls.Alloc(ptrSize)
	defer c.tls.Free(ptrSize)
	rc := sqlite3.Xsqlite3_open_v2(c.tls, name, pdb, sqlite3.SQLITE_OPEN_READWRITE|sqlite3.SQLITE_OPEN_NOMUTEX, 0)
	c.db = libc.AtomicLoadPUintptr(pdb)
	if rc != sqlite3.SQLITE_OK {
		return nil, c.err(rc)
	}
	sqlite3.Xsqlite3_extended_result_codes(c.tls, c.db, 1)
	if rc := sqlite3.Xsqlite3_busy_timeout(c.tls, c.db, busyTimeoutMS); rc != sqlite3.SQLITE_OK {
		return nil, c.err(rc)
	}
	// As dsn: WAL, synchronous NORMAL and a small page cache.
	if err := c.exec(`PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-256`); err != nil {
		return nil, err
	}
	return c, nil
}

// close closes the connection (its statements finalized first by the
// caller) and frees the arena; it is safe on a partly opened one.
func (c *rawConn) close() {
	if c.db != 0 {
		sqlite3.Xsqlite3_close_v2(c.tls, c.db)
		c.db = 0
	}
	if c.arena != 0 {
		libc.Xfree(c.tls, c.arena)
		c.arena, c.size = 0, 0
	}
	c.tls.Close()
}

// err is the connection's error for result code rc.
func (c *rawConn) err(rc int32) error {
	msg := libc.GoString(sqlite3.Xsqlite3_errstr(c.tls, rc))
	if c.db != 0 {
		if m := libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db)); m != "" && m != msg {
			msg += ": " + m
		}
	}
	return fmt.Errorf("sqlite: %s (%d)", msg, rc)
}

// exec runs sql, which may hold several statements.
func (c *rawConn) exec(sql string) error {
	s, err := libc.CString(sql)
	if err != nil {
		return err
	}
	defer libc.Xfree(c.tls, s)
	if rc := sqlite3.Xsqlite3_exec(c.tls, c.db, s, 0, 0, 0); rc != sqlite3.SQLITE_OK {
		return c.err(rc)
	}
	return nil
}

// prepare compiles the one statement sql.
func (c *rawConn) prepare(sql string) (uintptr, error) {
	s, err := libc.CString(sql)
	if err != nil {
		return 0, err
	}
	defer libc.Xfree(c.tls, s)
	// SQLite sets *pp whatever the outcome.
	pp := c.tls.Alloc(ptrSize)
	defer c.tls.Free(ptrSize)
	if rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, s, -1, pp, 0); rc != sqlite3.SQLITE_OK {
		return 0, c.err(rc)
	}
	return libc.AtomicLoadPUintptr(pp), nil
}

// finalize releases statement s.
func (c *rawConn) finalize(s uintptr) { sqlite3.Xsqlite3_finalize(c.tls, s) }

// value is one bound value: an integer, a real or a text. A typed value,
// not an interface: boxing an int64 or float64 into an any allocates, and a
// Record has ≈ 50 of them.
type value struct {
	kind valueKind
	n    int64
	f    float64
	s    string
}

type valueKind uint8

const (
	kindInt valueKind = iota
	kindReal
	kindText
)

func vInt(n int64) value    { return value{kind: kindInt, n: n} }
func vReal(f float64) value { return value{kind: kindReal, f: f} }
func vText(s string) value  { return value{kind: kindText, s: s} }
func vBool(b bool) value {
	if b {
		return vInt(1)
	}
	return vInt(0)
}

// run binds vals to statement s's parameters, in order, steps it to
// completion and resets it.
func (c *rawConn) run(s uintptr, vals []value) error {
	// The strings are copied into the arena first: bound SQLITE_STATIC,
	// SQLite reads them during the step, from memory Go does not manage.
	var n uintptr
	for i := range vals {
		n += uintptr(len(vals[i].s))
	}
	// The arena is never empty: a NULL pointer would bind NULL, not ''.
	if c.arena == 0 || n > c.size {
		if c.arena != 0 {
			libc.Xfree(c.tls, c.arena)
		}
		size := max(n, 2*c.size, 4096)
		c.arena, c.size = libc.Xmalloc(c.tls, libc.Tsize_t(size)), 0
		if c.arena == 0 {
			return fmt.Errorf("sqlite: out of memory for %d bytes of strings", size)
		}
		c.size = size
	}
	arena := libc.GoBytes(c.arena, int(c.size)) // the arena, not a copy
	var off uintptr
	for i := range vals {
		v := &vals[i]
		var rc int32
		switch v.kind {
		case kindInt:
			rc = sqlite3.Xsqlite3_bind_int64(c.tls, s, int32(i+1), v.n)
		case kindReal:
			rc = sqlite3.Xsqlite3_bind_double(c.tls, s, int32(i+1), v.f)
		case kindText:
			copy(arena[off:], v.s)
			rc = sqlite3.Xsqlite3_bind_text(c.tls, s, int32(i+1), c.arena+off, int32(len(v.s)), 0)
			off += uintptr(len(v.s))
		default:
			return fmt.Errorf("sqlite: cannot bind a value of kind %d", v.kind)
		}
		if rc != sqlite3.SQLITE_OK {
			return c.err(rc)
		}
	}
	if rc := sqlite3.Xsqlite3_step(c.tls, s); rc != sqlite3.SQLITE_DONE {
		err := c.err(rc)
		sqlite3.Xsqlite3_reset(c.tls, s)
		return err
	}
	sqlite3.Xsqlite3_reset(c.tls, s)
	return nil
}

// queryInt64 steps statement s, which returns one integer, and resets it.
func (c *rawConn) queryInt64(s uintptr) (int64, error) {
	if rc := sqlite3.Xsqlite3_step(c.tls, s); rc != sqlite3.SQLITE_ROW {
		err := c.err(rc)
		sqlite3.Xsqlite3_reset(c.tls, s)
		return 0, err
	}
	v := sqlite3.Xsqlite3_column_int64(c.tls, s, 0)
	sqlite3.Xsqlite3_reset(c.tls, s)
	return v, nil
}
