package app

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/advise"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/engine"
	"github.com/purser-dev/purser/pricing"
	"github.com/purser-dev/purser/replay"
	"github.com/purser-dev/purser/report"
)

// forecasters fits each task's spend forecast (engine.ForecastResolver):
// from the corpus its budget names (forecastFrom.corpus), else from this
// project's own database — the finished runs of the task's model, read from
// the stored totals (history). A fitted forecast is shared by the tasks of
// its model, and kept until the history gains or changes a finished run.
type forecasters struct {
	hist   *history
	prices *pricing.Catalogue
	dir    string // the project's directory: a corpus of a task with no file is relative to it

	mu    sync.Mutex
	cache map[[3]string]fitted
}

// fitted is a forecaster and the version of the history it was fitted on
// (0 for a corpus's: a corpus is read once).
type fitted struct {
	fc      purser.SpendForecaster
	version uint64
}

func newForecasters(s Store, prices *pricing.Catalogue, dir string) engine.ForecastResolver {
	return newForecastersOf(newHistory(s, 0), prices, dir).resolve
}

func newForecastersOf(h *history, prices *pricing.Catalogue, dir string) *forecasters {
	if prices == nil {
		prices = pricing.New()
	}
	return &forecasters{hist: h, prices: prices, dir: dir, cache: map[[3]string]fitted{}}
}

func (f *forecasters) resolve(ctx context.Context, t purser.Task) purser.SpendForecaster {
	return f.resolveWithout(ctx, t, "")
}

// resolveWithout is resolve with the task named exclude left out of the
// database's history: a stopped task's forecast is not read from itself.
func (f *forecasters) resolveWithout(ctx context.Context, t purser.Task, exclude string) purser.SpendForecaster {
	model, _ := t.Backend.Model(t.ModelTier)
	corpus := ""
	if src := t.Budget.Forecast; src != nil {
		corpus = src.Corpus
		if !filepath.IsAbs(corpus) {
			base := f.dir
			if t.File != "" {
				base = filepath.Dir(t.File)
			}
			corpus = filepath.Join(base, corpus)
		}
	}
	key := [3]string{corpus, model, exclude}
	if corpus != "" {
		f.mu.Lock()
		defer f.mu.Unlock()
		if c, ok := f.cache[key]; ok {
			return c.fc
		}
		var fc purser.SpendForecaster
		if runs, err := replay.ParseFile(corpus); err != nil {
			fc = advise.NoForecaster(fmt.Sprintf("the forecast's corpus could not be read: %v", err))
		} else {
			fc = advise.LiveForecaster(f.prices, runs, model, "corpus "+filepath.Base(corpus), true)
		}
		f.cache[key] = fitted{fc: fc}
		return fc
	}
	runs, version, err := f.hist.runs(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.cache[key]; ok && c.version == version && err == nil {
		return c.fc
	}
	// Forecasts fitted on an older history are of no more use (a
	// long-lived reader would otherwise keep one per task it ever showed).
	maps.DeleteFunc(f.cache, func(k [3]string, c fitted) bool { return k[0] == "" && c.version != version })
	var fc purser.SpendForecaster
	if err != nil {
		fc = advise.NoForecaster(fmt.Sprintf("the project's history could not be read: %v", err))
	} else {
		if exclude != "" {
			runs = slices.DeleteFunc(runs, func(r replay.Run) bool { return r.InstanceID == exclude })
		}
		// A run whose money is known only in part would be re-priced from
		// its tokens (all read as input) by the money forecast: it reads
		// the runs whose money is known, the tokens forecast all of them.
		fc = advise.LiveForecasterOf(f.prices, slices.DeleteFunc(slices.Clone(runs), func(r replay.Run) bool { return !moneyKnown(r) }), runs,
			model, "this project's database", false)
		f.cache[key] = fitted{fc: fc, version: version}
	}
	return fc
}

// TaskForecasts sets the spend forecast of each task not DONE in tasks (as
// `purser status` shows them, recs their records in the same order), read
// the way the engine reads it: the task's model is that of its first call.
func (a *App) TaskForecasts(ctx context.Context, recs []purser.TaskRecord, tasks []report.TaskStatus) {
	sf := a.StoredForecasts(0)
	for i, rec := range recs {
		if i >= len(tasks) || rec.State == purser.StateDone {
			continue
		}
		// The stored totals, not the status's figures: the forecast asks
		// whether the task's money is known (their events' sources).
		totals, err := a.Store.UsageTotals(ctx, rec.ID)
		if err != nil {
			continue
		}
		tasks[i].Forecast = sf.forecast(ctx, rec, totals)
	}
}

// StoredForecasts forecasts the tasks of the database as they stand, for
// readers that are not the engine (status, the dashboard). The history is
// read from the stored totals, never the ledger; its task list is read
// again when older than refresh (0: never), and only tasks new or changed
// since are read, so a long-lived reader (serve) pays for what changed.
func (a *App) StoredForecasts(refresh time.Duration) *StoredForecasts {
	h := newHistory(a.Store, refresh)
	if refresh == 0 {
		h.minAge = time.Duration(math.MaxInt64) // read once
	}
	return &StoredForecasts{a: a, f: newForecastersOf(h, a.Project.Prices, a.Project.Dir)}
}

// StoredForecasts is what StoredForecasts returns. It is safe for
// concurrent use.
type StoredForecasts struct {
	a *App
	f *forecasters
}

// Forecast is the spend forecast of the task id, nil when it is DONE or
// unknown: the dashboard's dashboard.Forecaster.
func (s *StoredForecasts) Forecast(ctx context.Context, id string) *purser.SpendForecast {
	rec, err := s.a.Store.Task(ctx, id)
	if err != nil {
		return nil
	}
	if rec.State == purser.StateDone {
		return nil
	}
	totals, err := s.a.Store.UsageTotals(ctx, id)
	if err != nil {
		return nil
	}
	return s.forecast(ctx, rec, totals)
}

// forecast is the forecast of the task rec at totals, as the engine makes
// it (purser.ForecastAt); nil when it is DONE.
func (s *StoredForecasts) forecast(ctx context.Context, rec purser.TaskRecord, totals budget.Totals) *purser.SpendForecast {
	if rec.State == purser.StateDone {
		return nil
	}
	var f purser.SpendForecaster
	if _, _, err := s.f.hist.runs(ctx); err != nil {
		f = advise.NoForecaster(fmt.Sprintf("the project's history could not be read: %v", err))
	} else {
		model := s.f.hist.model(rec.ID)
		t := purser.Task{ID: rec.ID, File: rec.File, Budget: rec.Budget, Backend: purser.BackendSpec{Models: map[string]string{"": model}}}
		f = s.f.resolveWithout(ctx, t, rec.ID)
	}
	fc := purser.ForecastAt(f, rec.Budget, totals)
	return &fc
}

// alertBaseline is where a task stood before this process runs it, as its
// alerts start from (alert.Notifier.Baseline): its recorded status, and at
// least WARNING when the forecast trigger put it there and its hard caps
// are unchanged since. The engine then holds it in WARNING again before
// any other event (purser.ForecastWarningArtifact), and the WARNING alert,
// sent when the trigger fired, is not sent a second time.
func alertBaseline(ctx context.Context, s Store, id string) (budget.Status, purser.TaskState, error) {
	rec, err := s.Task(ctx, id)
	if err != nil {
		return budget.Status{}, "", err
	}
	st, err := report.RecordStatus(ctx, s, rec)
	if err != nil {
		return budget.Status{}, "", err
	}
	if st.Tier < budget.Warning && rec.Budget.Warning.Forecast == budget.ForecastHard {
		var w purser.ForecastWarning
		if b, err := s.Artifact(ctx, id, purser.ForecastWarningArtifact); err == nil && json.Unmarshal(b, &w) == nil && w.Why != "" && w.Holds(rec.Budget.Hard) {
			st.Tier = budget.Warning
		}
	}
	return st, rec.State, nil
}
