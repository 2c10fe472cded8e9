package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
)

// A run's holds are rows of run_reservations (who holds what, until when)
// and, summed, the held_* columns of the run's usage_totals row, beside what
// the run spent (migration 020). held_* is always the sum of the run's rows,
// expired or not: every statement that inserts or deletes a hold changes
// the sum in the same statement. An expired hold still counts until it is
// swept, which only makes a hold more likely to be refused, so a refusal
// sweeps and looks again before it is final.

// runAdmit places a hold in one statement, when it fits: the upsert on the
// run's totals row takes the row's lock and checks the guard against the
// row's latest spend and holds (ON CONFLICT DO UPDATE reads the latest
// version, whatever the statement's snapshot), and the hold is inserted only
// when the guard passed. A cap that is NULL is not capped; a want of 0 on a
// metric always fits, as budget.Fit has it. No row comes back when the hold
// does not fit.
const runAdmit = `WITH adm AS (
		INSERT INTO usage_totals AS t (scope, id, held_usd_nanos, held_tokens)
		SELECT 'run', $1::text, $2::bigint, $3::bigint WHERE ($2 = 0 OR $4::bigint IS NULL OR $4 >= $2) AND ($3 = 0 OR $5::bigint IS NULL OR $5 >= $3)
		ON CONFLICT (scope, id) DO UPDATE SET held_usd_nanos = t.held_usd_nanos + excluded.held_usd_nanos, held_tokens = t.held_tokens + excluded.held_tokens
		WHERE ($2 = 0 OR $4::bigint IS NULL OR $4::numeric - t.usd_nanos - t.held_usd_nanos >= $2)
			AND ($3 = 0 OR $5::bigint IS NULL OR $5::numeric - t.tokens - t.held_tokens >= $3)
		RETURNING 1)
	INSERT INTO run_reservations (run_id, usd_nanos, tokens, expires_at, owner, task_id)
	SELECT $1, $2, $3, ` + serverNanos + ` + $6::bigint, $7::text, $8::text FROM adm RETURNING id`

// runSweep deletes the run's expired holds, takes them off its held sum, and
// returns the row as it is now: what a refusal reports.
const runSweep = `WITH swept AS (
		DELETE FROM run_reservations WHERE run_id = $1 AND expires_at <= ` + serverNanos + ` RETURNING usd_nanos, tokens)
	UPDATE usage_totals SET held_usd_nanos = held_usd_nanos - (SELECT COALESCE(SUM(usd_nanos), 0) FROM swept)::bigint,
		held_tokens = held_tokens - (SELECT COALESCE(SUM(tokens), 0) FROM swept)::bigint
	WHERE scope = 'run' AND id = $1 RETURNING usd_nanos, tokens, held_usd_nanos, held_tokens`

// runRelease deletes one hold and takes it off its run's held sum.
const runRelease = `WITH d AS (DELETE FROM run_reservations WHERE id = $1 RETURNING run_id, usd_nanos, tokens)
	UPDATE usage_totals t SET held_usd_nanos = t.held_usd_nanos - d.usd_nanos, held_tokens = t.held_tokens - d.tokens
	FROM d WHERE t.scope = 'run' AND t.id = d.run_id`

// runDroppedSums is a CTE, after one named dropped that deleted run holds
// (RETURNING k, the run, usd_nanos and tokens), that takes them off their
// runs' held sums.
const runDroppedSums = `, unheld AS (
		UPDATE usage_totals t SET held_usd_nanos = t.held_usd_nanos - d.usd, held_tokens = t.held_tokens - d.tokens
		FROM (SELECT k, SUM(usd_nanos)::bigint AS usd, SUM(tokens)::bigint AS tokens FROM dropped GROUP BY k) d
		WHERE t.scope = 'run' AND t.id = d.k)`

// maxAdmitTries bounds how often a hold that a fresh look says fits is
// tried again after the guard refused it (the run's holds moved between
// the two statements).
const maxAdmitTries = 50

// runHeadroom is what a hold on the run could get now: its caps less its
// spend and its unexpired holds, by the server's clock.
func runHeadroom(ctx context.Context, q queryRower, runID string, caps budget.Amount) (budget.Amount, error) {
	var spentUSD, spentTokens, heldUSD, heldTokens int64
	if err := q.QueryRow(ctx, `SELECT
			COALESCE((SELECT usd_nanos FROM usage_totals WHERE scope = 'run' AND id = $1), 0),
			COALESCE((SELECT tokens FROM usage_totals WHERE scope = 'run' AND id = $1), 0),
			COALESCE((SELECT SUM(usd_nanos) FROM run_reservations WHERE run_id = $1 AND expires_at > `+serverNanos+`), 0)::bigint,
			COALESCE((SELECT SUM(tokens) FROM run_reservations WHERE run_id = $1 AND expires_at > `+serverNanos+`), 0)::bigint`,
		runID).Scan(&spentUSD, &spentTokens, &heldUSD, &heldTokens); err != nil {
		return budget.Amount{}, fmt.Errorf("run %s headroom: %w", runID, err)
	}
	return budget.Headroom(caps, budget.Amount{USD: budget.USD(spentUSD), Tokens: spentTokens},
		budget.Amount{USD: budget.USD(heldUSD), Tokens: heldTokens}), nil
}

// RunAvailable is what a hold on the run could get now.
func (s *Store) RunAvailable(ctx context.Context, runID string, caps budget.Amount) (budget.Amount, error) {
	return runHeadroom(ctx, s.pool, runID, caps)
}

// capArg is a cap as the admission statement takes it: NULL when the metric
// is not capped.
func capArg(c, unlimited int64) *int64 {
	if c == unlimited {
		return nil
	}
	return &c
}

// ReserveRun holds want against a shared run budget, atomically across
// every process and host, in one statement when it fits (runAdmit): holds
// on one run are ordered by the lock of the run's totals row, not by an
// advisory lock and a transaction of several statements. Nothing is
// optimistic: a hold that does not fit is refused, never granted and taken
// back. The hold is recorded as h's.
func (s *Store) ReserveRun(ctx context.Context, runID string, h purser.Holder, caps, want budget.Amount, ttl time.Duration) (func(), error) {
	id, err := s.admitRun(ctx, runID, h, caps, want, ttl)
	var ibe *budget.InsufficientBudgetError
	if errors.As(err, &ibe) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("reserve on run %s: %w", runID, err)
	}
	return func() {
		// Released even when the call's context is done; bounded, so a
		// lost server does not hang the caller (the hold then expires).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = s.pool.Exec(ctx, runRelease, id)
	}, nil
}

// admitRun places the hold and returns its id, or the refusal: when the
// guard refuses, the run's expired holds are swept and the run looked at
// again; the hold is tried again only if it fits now.
func (s *Store) admitRun(ctx context.Context, runID string, h purser.Holder, caps, want budget.Amount, ttl time.Duration) (int64, error) {
	capUSD, capTokens := capArg(int64(caps.USD), int64(budget.UnlimitedUSD)), capArg(caps.Tokens, budget.Unlimited.Tokens)
	for range maxAdmitTries {
		var id int64
		err := s.pool.QueryRow(ctx, runAdmit, runID, int64(want.USD), want.Tokens, capUSD, capTokens,
			ttl.Nanoseconds(), h.Owner, h.TaskID).Scan(&id)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, err
		}
		var spentUSD, spentTokens, heldUSD, heldTokens int64
		err = s.pool.QueryRow(ctx, runSweep, runID).Scan(&spentUSD, &spentTokens, &heldUSD, &heldTokens)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("sweep expired holds: %w", err)
		}
		avail := budget.Headroom(caps, budget.Amount{USD: budget.USD(spentUSD), Tokens: spentTokens},
			budget.Amount{USD: budget.USD(heldUSD), Tokens: heldTokens})
		if err := budget.Fit(budget.ScopeRun, want, avail); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("the hold fit but was refused %d times: the run's holds kept moving", maxAdmitTries)
}
