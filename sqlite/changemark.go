package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/purser-dev/purser"
)

var _ purser.ChangeMarker = (*Store)(nil)

// changeMark is the connection ChangeMark asks on: one of its own, since
// PRAGMA data_version moves only for commits made by other connections —
// the store's own and every other process's.
type changeMark struct {
	mu   sync.Mutex
	db   *sql.DB
	conn *sql.Conn
	// gen counts the connections opened: data_version starts afresh on a
	// new one, so the mark carries it, and a mark read on an earlier
	// connection never equals one read on a later.
	gen int64
}

// ChangeMark returns PRAGMA data_version as read on a connection of its
// own: a counter SQLite keeps in the WAL index, in shared memory, that
// moves whenever another connection commits, read without touching the file
// or taking a lock a writer waits for (as WatchRunUsage reads it).
func (s *Store) ChangeMark(ctx context.Context) (string, error) {
	m := &s.mark
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil {
		db, conn, err := s.readerConn(ctx)
		if err != nil {
			return "", fmt.Errorf("change mark of %s: %w", s.path, err)
		}
		m.db, m.conn = db, conn
		m.gen++
	}
	var v int64
	if err := m.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		m.close()
		return "", fmt.Errorf("change mark of %s: %w", s.path, err)
	}
	return fmt.Sprintf("%d.%d", m.gen, v), nil
}

// close ends the mark's connection (m.mu held, or the store closing).
func (m *changeMark) close() {
	if m.conn != nil {
		m.conn.Close()
		m.db.Close()
		m.conn, m.db = nil, nil
	}
}
