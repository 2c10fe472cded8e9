package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/storerow"
)

var _ purser.AlertOutbox = (*Store)(nil)

// AddAlerts records alerts, pending and held by owner, in one transaction.
func (s *Store) AddAlerts(ctx context.Context, owner string, lease time.Duration, alerts ...purser.OutboxAlert) error {
	if len(alerts) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record alert %s: %w", alerts[0].ID, err)
	}
	defer tx.Rollback()
	until := time.Now().Add(lease).UnixNano()
	for _, a := range alerts {
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_outbox (id, webhook, kind, task_id, body, created_at, owner, lease_until)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id, webhook) DO NOTHING`,
			a.ID, a.Webhook, a.Kind, a.TaskID, a.Body, a.CreatedAt.UnixNano(), owner, until); err != nil {
			return fmt.Errorf("record alert %s for webhook %s: %w", a.ID, a.Webhook, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record alert %s: %w", alerts[0].ID, err)
	}
	return nil
}

// ClaimAlerts takes the claimable alerts in one IMMEDIATE transaction: the
// write lock is held from the first read, so a second claimer reads only
// once the first has committed its holds.
func (s *Store) ClaimAlerts(ctx context.Context, owner string, webhooks []string, lease time.Duration, ownerGone func(string) bool) ([]purser.OutboxAlert, error) {
	if len(webhooks) == 0 {
		return nil, nil
	}
	tx, err := s.db.BeginTx(ctx, nil) // _txlock=immediate
	if err != nil {
		return nil, fmt.Errorf("claim alerts: %w", err)
	}
	defer tx.Rollback()
	now := time.Now()
	args := []any{now.UnixNano()}
	for _, w := range webhooks {
		args = append(args, w)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+storerow.AlertClaimColumns+`, lease_until > ?
		FROM alert_outbox WHERE state = 'pending' AND webhook IN (?`+strings.Repeat(", ?", len(webhooks)-1)+`) ORDER BY created_at, seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("claim alerts: %w", err)
	}
	var out []purser.OutboxAlert
	var seqs []int64
	for rows.Next() {
		seq, a, ok, err := storerow.ScanAlertClaim(rows, owner, ownerGone)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim alerts: %w", err)
		}
		if ok {
			out = append(out, a)
			seqs = append(seqs, seq)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim alerts: %w", err)
	}
	until := now.Add(lease).UnixNano()
	for _, seq := range seqs {
		if _, err := tx.ExecContext(ctx, `UPDATE alert_outbox SET owner = ?, lease_until = ? WHERE seq = ?`, owner, until, seq); err != nil {
			return nil, fmt.Errorf("claim alerts: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("claim alerts: %w", err)
	}
	return out, nil
}

// AlertAttempted counts one more attempt.
func (s *Store) AlertAttempted(ctx context.Context, id, webhook string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE alert_outbox SET attempts = attempts + 1 WHERE id = ? AND webhook = ?`, id, webhook); err != nil {
		return fmt.Errorf("count an attempt of alert %s for webhook %s: %w", id, webhook, err)
	}
	return nil
}

// SettleAlert records an alert's state and releases it.
func (s *Store) SettleAlert(ctx context.Context, id, webhook string, state purser.OutboxState) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE alert_outbox SET state = ?, owner = '', lease_until = 0
		WHERE id = ? AND webhook = ? AND (state = 'pending' OR ? = 'delivered')`, string(state), id, webhook, string(state)); err != nil {
		return fmt.Errorf("mark alert %s for webhook %s %s: %w", id, webhook, state, err)
	}
	return nil
}

// ExpireAlerts marks the too old and the out of attempts expired.
func (s *Store) ExpireAlerts(ctx context.Context, before time.Time, maxAttempts int) (int, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE alert_outbox SET state = 'expired', owner = '', lease_until = 0
		WHERE state = 'pending' AND (created_at < ? OR attempts >= ?)`, before.UnixNano(), maxAttempts)
	return affected("expire alerts", res, err)
}

// DeleteSettledAlerts deletes the settled alerts recorded before before.
func (s *Store) DeleteSettledAlerts(ctx context.Context, before time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM alert_outbox WHERE state <> 'pending' AND created_at < ?`, before.UnixNano())
	return affected("delete settled alerts", res, err)
}

// affected is how many rows an Exec (its res and err) changed, saying
// what it did when it failed.
func affected(what string, res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return int(n), nil
}

// OutboxAlerts lists every recorded alert, oldest first.
func (s *Store) OutboxAlerts(ctx context.Context) ([]purser.OutboxAlert, error) {
	return query(ctx, s.db, "list alerts", storerow.ScanOutbox, `SELECT `+storerow.OutboxColumns+` FROM alert_outbox ORDER BY created_at, seq`)
}
