package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/purser-dev/purser"
)

var _ purser.RunUsageWatcher = (*Store)(nil)

// The pace of a watch: a check every watchPollMin after a change, doubling
// while nothing changes up to watchPollMax.
const (
	watchPollMin = 2 * time.Millisecond
	watchPollMax = 25 * time.Millisecond
)

// WatchRunUsage tells, through the returned channel, each time any process
// commits usage to the run's ledger, within watchPollMax (2 ms while the
// database is busy). SQLite tells no one of another process's commit, so
// the watch asks, on a connection of its own (the store's one connection
// stays free for its work), for PRAGMA data_version: a counter SQLite keeps
// in the WAL index, in shared memory, that moves whenever another
// connection commits — read without touching the file or taking a lock a
// writer waits for, so asking every few milliseconds costs next to nothing
// while the engine's poll of the ledger's totals (engine.DefaultRunRefresh,
// 500 ms) stays the fallback. Only when it has moved is the run's row of
// usage_totals read, and the channel told when that row changed. (A file
// stamp of the -wal file would need the same polling at a coarser grain,
// and fsnotify a dependency and a watcher per directory; neither says which
// run changed.) When the watch cannot go on (its connection fails) the
// channel is closed; the engine's polling goes on regardless.
func (s *Store) WatchRunUsage(ctx context.Context, runID string) (<-chan struct{}, error) {
	db, conn, err := s.readerConn(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch run %s: %w", runID, err)
	}
	version := func() (int64, error) {
		var v int64
		err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
		return v, err
	}
	row := func() (string, error) {
		var r string
		err := conn.QueryRowContext(ctx, `SELECT usd_nanos || ' ' || tokens || ' ' || iterations || ' ' || reported || ' ' || estimated || ' ' || unknown
			FROM usage_totals WHERE scope = 'run' AND id = ?`, runID).Scan(&r)
		if err == sql.ErrNoRows {
			return "", nil
		}
		return r, err
	}
	lastVersion, err := version()
	var lastRow string
	if err == nil {
		lastRow, err = row()
	}
	if err != nil {
		conn.Close()
		db.Close()
		return nil, fmt.Errorf("watch run %s: %w", runID, err)
	}
	changes := make(chan struct{}, 1)
	go func() {
		defer close(changes)
		defer db.Close()
		defer conn.Close()
		pause := watchPollMin
		timer := time.NewTimer(pause)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			v, err := version()
			if err != nil {
				return
			}
			if v == lastVersion {
				pause = min(2*pause, watchPollMax)
				timer.Reset(pause)
				continue
			}
			lastVersion, pause = v, watchPollMin
			r, err := row()
			if err != nil {
				return
			}
			if r != lastRow {
				lastRow = r
				select {
				case changes <- struct{}{}:
				default: // one is already waiting: it covers this one
				}
			}
			timer.Reset(pause)
		}
	}()
	return changes, nil
}

// readerConn opens a read-only connection of its own to the store's file,
// apart from the store's one connection: PRAGMA data_version moves only
// for commits made by other connections (WatchRunUsage, ChangeMark). The
// caller closes both.
func (s *Store) readerConn(ctx context.Context) (*sql.DB, *sql.Conn, error) {
	dsn, err := fileURI(s.path)
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("sqlite", dsn+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, conn, nil
}
