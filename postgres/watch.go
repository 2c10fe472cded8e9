package postgres

import (
	"context"
	"fmt"
)

// runUsageChannel is the LISTEN/NOTIFY channel a ledger append notifies,
// with the payload "SCHEMA RUN": channels are per database, and a database
// may hold several schemas of Purser tables.
const runUsageChannel = "purser_run_usage"

// WatchRunUsage tells, through the returned channel, each time a process
// commits usage to the run's ledger, by LISTEN on a connection of its own
// (taken out of the pool, closed when ctx ends). When that connection is
// lost the channel is closed; the engine's polling goes on regardless.
func (s *Store) WatchRunUsage(ctx context.Context, runID string) (<-chan struct{}, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch run %s: %w", runID, err)
	}
	conn := pc.Hijack() // held for as long as the watch: not the pool's to lend
	fail := func(err error) (<-chan struct{}, error) {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("watch run %s: %w", runID, err)
	}
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return fail(err)
	}
	if _, err := conn.Exec(ctx, `LISTEN `+runUsageChannel); err != nil {
		return fail(err)
	}
	want := schema + " " + runID
	changes := make(chan struct{}, 1)
	go func() {
		defer close(changes)
		defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // the watch is over either way
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			if n.Payload != want {
				continue
			}
			select {
			case changes <- struct{}{}:
			default: // one is already waiting: it covers this one
			}
		}
	}()
	return changes, nil
}
