package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/internal/storerow"
)

var _ purser.AlertOutbox = (*Store)(nil)

// AddAlerts records alerts, pending and held by owner, in one transaction.
func (s *Store) AddAlerts(ctx context.Context, owner string, lease time.Duration, alerts ...purser.OutboxAlert) error {
	if len(alerts) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, a := range alerts {
			if _, err := tx.Exec(ctx, `INSERT INTO alert_outbox (id, webhook, kind, task_id, body, created_at, owner, lease_until)
				VALUES ($1, $2, $3, $4, $5, $6, $7, `+serverNanos+` + $8) ON CONFLICT (id, webhook) DO NOTHING`,
				a.ID, a.Webhook, a.Kind, a.TaskID, a.Body, a.CreatedAt.UnixNano(), owner, lease.Nanoseconds()); err != nil {
				return fmt.Errorf("for webhook %s: %w", a.Webhook, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record alert %s: %w", alerts[0].ID, err)
	}
	return nil
}

// ClaimAlerts takes the claimable alerts. The rows are read FOR UPDATE
// SKIP LOCKED: a claimer at the same time skips what another is taking
// rather than wait for it, and finds it held by a live owner afterwards.
func (s *Store) ClaimAlerts(ctx context.Context, owner string, webhooks []string, lease time.Duration, ownerGone func(string) bool) ([]purser.OutboxAlert, error) {
	if len(webhooks) == 0 {
		return nil, nil
	}
	var out []purser.OutboxAlert
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, `SELECT `+storerow.AlertClaimColumns+`, lease_until > `+serverNanos+`
			FROM alert_outbox WHERE state = 'pending' AND webhook = ANY($1) ORDER BY created_at, seq FOR UPDATE SKIP LOCKED`, webhooks)
		if err != nil {
			return err
		}
		var seqs []int64
		for rows.Next() {
			seq, a, ok, err := storerow.ScanAlertClaim(rows, owner, ownerGone)
			if err != nil {
				rows.Close()
				return err
			}
			if ok {
				out = append(out, a)
				seqs = append(seqs, seq)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(seqs) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE alert_outbox SET owner = $1, lease_until = `+serverNanos+` + $2 WHERE seq = ANY($3)`, owner, lease.Nanoseconds(), seqs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim alerts: %w", err)
	}
	return out, nil
}

// AlertAttempted counts one more attempt.
func (s *Store) AlertAttempted(ctx context.Context, id, webhook string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE alert_outbox SET attempts = attempts + 1 WHERE id = $1 AND webhook = $2`, id, webhook); err != nil {
		return fmt.Errorf("count an attempt of alert %s for webhook %s: %w", id, webhook, err)
	}
	return nil
}

// SettleAlert records an alert's state and releases it.
func (s *Store) SettleAlert(ctx context.Context, id, webhook string, state purser.OutboxState) error {
	if _, err := s.pool.Exec(ctx, `UPDATE alert_outbox SET state = $3, owner = '', lease_until = 0
		WHERE id = $1 AND webhook = $2 AND (state = 'pending' OR $3 = 'delivered')`, id, webhook, string(state)); err != nil {
		return fmt.Errorf("mark alert %s for webhook %s %s: %w", id, webhook, state, err)
	}
	return nil
}

// ExpireAlerts marks the too old and the out of attempts expired.
func (s *Store) ExpireAlerts(ctx context.Context, before time.Time, maxAttempts int) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE alert_outbox SET state = 'expired', owner = '', lease_until = 0
		WHERE state = 'pending' AND (created_at < $1 OR attempts >= $2)`, before.UnixNano(), maxAttempts)
	if err != nil {
		return 0, fmt.Errorf("expire alerts: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// DeleteSettledAlerts deletes the settled alerts recorded before before.
func (s *Store) DeleteSettledAlerts(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM alert_outbox WHERE state <> 'pending' AND created_at < $1`, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("delete settled alerts: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// OutboxAlerts lists every recorded alert, oldest first.
func (s *Store) OutboxAlerts(ctx context.Context) ([]purser.OutboxAlert, error) {
	return collect(ctx, s, "list alerts", storerow.ScanOutbox, `SELECT `+storerow.OutboxColumns+` FROM alert_outbox ORDER BY created_at, seq`)
}
