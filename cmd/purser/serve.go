package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/app"
	"github.com/purser-dev/purser/dashboard"
)

// defaultServeAddr is loopback: the dashboard shows agents' output and spend.
const defaultServeAddr = "127.0.0.1:8417"

func newServeCmd() *cobra.Command {
	var db, budgetsDB, addr, token string
	cmd := &cobra.Command{
		Use:   "serve [--addr HOST:PORT] [--token TOKEN] [--db PATH]",
		Short: "Serve a live web dashboard of runs and budgets, and /metrics for Prometheus",
		Long: "Serve a live web dashboard of the runs, tasks, budgets, degrade actions and calls in the database,\n" +
			"and Prometheus metrics at /metrics. It listens on " + defaultServeAddr + " by default; listening on any\n" +
			"other than a loopback address needs a token (--token or PURSER_SERVE_TOKEN), which every request\n" +
			"must then carry as \"Authorization: Bearer TOKEN\" or, from a browser, by opening /?token=TOKEN once\n" +
			"(the page keeps it in a cookie).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "" {
				token = os.Getenv("PURSER_SERVE_TOKEN")
			}
			if err := dashboard.CheckBind(addr, token); err != nil {
				return badInput(err)
			}
			a, err := openHereWith(cmd, db, budgetsDB)
			if err != nil {
				return err
			}
			defer a.Close()
			store := a.Store
			where := a.DB
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return badInput(fmt.Errorf("listen on %s: %w", addr, err))
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			// Each task's spend forecast, its history read again each minute.
			opts := dashboard.Options{Token: token, Logger: logger, Addr: ln.Addr().String(), Forecast: a.StoredForecasts(time.Minute).Forecast}
			if _, err := a.NamedBudgets(cmd.Context()); err != nil {
				logger.Error("open the named budgets' database; the dashboard shows none until it can", "err", err)
			}
			opts.Budgets = appBudgets{a}
			srv := &http.Server{
				Handler:           dashboard.NewHandler(store, opts),
				ReadHeaderTimeout: 10 * time.Second,
				// Live streams end when the command is stopped, rather
				// than holding Shutdown until its deadline.
				BaseContext: func(net.Listener) context.Context { return cmd.Context() },
			}
			fmt.Fprintf(cmd.OutOrStdout(), "database: %s\ndashboard: http://%s/  metrics: http://%s/metrics\n", where, ln.Addr(), ln.Addr())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err := <-done:
				return fmt.Errorf("serve: %w", err)
			case <-cmd.Context().Done():
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			// Live streams never end by themselves: close what Shutdown
			// could not drain in time.
			if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("shut down: %w", err)
			}
			_ = srv.Close()
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", app.DBFlagHelp)
	cmd.Flags().StringVar(&budgetsDB, "budgets-db", "", app.BudgetsDBFlagHelp)
	cmd.Flags().StringVar(&addr, "addr", defaultServeAddr, "address to listen on; other than loopback needs --token")
	cmd.Flags().StringVar(&token, "token", "", "token every request must carry (default $PURSER_SERVE_TOKEN)")
	return cmd
}

// appBudgets reads the named budgets where the app finds them, looked for
// again at each read until they are found: a dashboard started before the
// user-level budgets database was made shows the tree once it is.
type appBudgets struct{ a *app.App }

func (b appBudgets) NamedBudgetList(ctx context.Context) ([]purser.NamedBudget, error) {
	nb, err := b.a.NamedBudgets(ctx)
	if err != nil {
		return nil, err
	}
	return nb.Named.NamedBudgetList(ctx)
}

func (b appBudgets) NamedBudgetStatus(ctx context.Context, name string, now time.Time) (purser.NamedBudgetStatus, error) {
	nb, err := b.a.NamedBudgets(ctx)
	if err != nil {
		return purser.NamedBudgetStatus{}, err
	}
	return nb.Named.NamedBudgetStatus(ctx, name, now)
}
