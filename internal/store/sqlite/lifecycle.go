package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
)

// lifecycle is what the stores written by one goroutine share (the
// request log, the audit log, the shadow store): the database, the
// channels that ask the goroutine to flush and to stop and that say it
// ended, and a Close that stops it once and closes the database. The
// goroutine must close done when it returns, and answer each flush
// request once it has written everything queued before it.
type lifecycle struct {
	name   string // "request log": for errors
	db     *sql.DB
	flush  chan chan error
	stop   chan struct{}
	done   chan struct{}
	closed atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

func newLifecycle(name string, db *sql.DB) lifecycle {
	return lifecycle{name: name, db: db, flush: make(chan chan error), stop: make(chan struct{}), done: make(chan struct{})}
}

// waitFlush asks the goroutine to flush and waits for its answer, or for
// ctx.
func (l *lifecycle) waitFlush(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case l.flush <- reply:
	case <-l.done:
		return errors.New("flushing " + l.name + ": closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shutdown marks the store closed, stops the goroutine, waits for it and
// closes the database, once; later calls return the first result.
func (l *lifecycle) shutdown() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		close(l.stop)
		<-l.done
		l.closeErr = l.db.Close()
	})
	return l.closeErr
}
