package sqlite

import "path/filepath"

// OwnFiles returns the database file and its -wal, -shm and -journal
// companions (a workspace.FileOwner): no agent's edit protocol may write or
// delete the ledger, wherever it is, so the wiring protects them.
func (s *Store) OwnFiles() []string {
	path := s.path
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return []string{path, path + "-wal", path + "-shm", path + "-journal"}
}
