package postgres

import (
	"context"
	"fmt"

	"github.com/purser-dev/purser"
)

var _ purser.ChangeMarker = (*Store)(nil)

// ChangeMark returns the server's transaction snapshot (xmin:xmax:running
// transactions): a transaction that commits was either running at the
// last mark, and has left the list since, or began after it and moved
// xmax. Every commit on the server moves it, other databases' too, so it
// moves more often than this store changes, never less.
func (s *Store) ChangeMark(ctx context.Context) (string, error) {
	var mark string
	if err := s.pool.QueryRow(ctx, `SELECT txid_current_snapshot()::text`).Scan(&mark); err != nil {
		return "", fmt.Errorf("change mark of %s: %w", s.where, err)
	}
	return mark, nil
}
