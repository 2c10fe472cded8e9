package app

import (
	"context"
	"fmt"
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
// project's own database — the finished runs of the task's model. A model's
// forecast is fitted once per engine and shared by its tasks.
type forecasters struct {
	store  Store
	prices *pricing.Catalogue
	dir    string // the project's directory: a corpus of a task with no file is relative to it

	mu    sync.Mutex
	cache map[[3]string]purser.SpendForecaster
	runs  []replay.Run // the database's history, read once
	read  bool
	err   error
}

func newForecasters(s Store, prices *pricing.Catalogue, dir string) engine.ForecastResolver {
	if prices == nil {
		prices = pricing.New()
	}
	f := &forecasters{store: s, prices: prices, dir: dir, cache: map[[3]string]purser.SpendForecaster{}}
	return f.resolve
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
	f.mu.Lock()
	defer f.mu.Unlock()
	if fc, ok := f.cache[key]; ok {
		return fc
	}
	var fc purser.SpendForecaster
	if corpus != "" {
		runs, err := replay.ParseFile(corpus)
		if err != nil {
			fc = advise.NoForecaster(fmt.Sprintf("the forecast's corpus could not be read: %v", err))
		} else {
			fc = advise.LiveForecaster(f.prices, runs, model, "corpus "+filepath.Base(corpus), true)
		}
	} else {
		if !f.read {
			f.runs, f.err, f.read = nil, nil, true
			f.runs, f.err = replay.FromStore(ctx, f.store)
		}
		runs, err := f.runs, f.err
		if exclude != "" {
			runs = slices.DeleteFunc(slices.Clone(runs), func(r replay.Run) bool { return r.InstanceID == exclude })
		}
		if err != nil {
			fc = advise.NoForecaster(fmt.Sprintf("the project's history could not be read: %v", err))
		} else {
			fc = advise.LiveForecaster(f.prices, runs, model, "this project's database", false)
		}
	}
	f.cache[key] = fc
	return fc
}

// TaskForecasts sets the spend forecast of each task not DONE in tasks (as
// `purser status` shows them, recs their records in the same order), read
// the way the engine reads it: the task's model is that of its first call.
func (a *App) TaskForecasts(ctx context.Context, recs []purser.TaskRecord, tasks []report.TaskStatus) {
	sf := a.StoredForecasts(0)
	for i, rec := range recs {
		if i < len(tasks) {
			tasks[i].Forecast = sf.forecast(ctx, rec, tasks[i].Budget.UsedUSD)
		}
	}
}

// StoredForecasts forecasts the tasks of the database as they stand, for
// readers that are not the engine (status, the dashboard): the history is
// read again when it is older than refresh (0: never).
func (a *App) StoredForecasts(refresh time.Duration) *StoredForecasts {
	return &StoredForecasts{a: a, refresh: refresh}
}

// StoredForecasts is what StoredForecasts returns. It is safe for
// concurrent use.
type StoredForecasts struct {
	a       *App
	refresh time.Duration

	mu     sync.Mutex
	f      *forecasters
	models map[string]string // task → the model of its first call
	at     time.Time
}

// Forecast is the spend forecast of the task id, nil when it is DONE or
// unknown: the dashboard's dashboard.Forecaster.
func (s *StoredForecasts) Forecast(ctx context.Context, id string) *purser.SpendForecast {
	rec, err := s.a.Store.Task(ctx, id)
	if err != nil {
		return nil
	}
	totals, err := s.a.Store.UsageTotals(ctx, id)
	if err != nil {
		return nil
	}
	return s.forecast(ctx, rec, totals.USD)
}

func (s *StoredForecasts) forecast(ctx context.Context, rec purser.TaskRecord, spent budget.USD) *purser.SpendForecast {
	if rec.State == purser.StateDone {
		return nil
	}
	s.mu.Lock()
	if s.f == nil || (s.refresh > 0 && time.Since(s.at) > s.refresh) {
		proj := s.a.Project
		f := &forecasters{store: s.a.Store, prices: proj.Prices, dir: proj.Dir, cache: map[[3]string]purser.SpendForecaster{}}
		if f.prices == nil {
			f.prices = pricing.New()
		}
		f.runs, f.err = replay.FromStore(ctx, s.a.Store)
		f.read = true
		s.models = map[string]string{}
		for _, r := range f.runs {
			s.models[r.InstanceID] = r.Model
		}
		s.f, s.at = f, time.Now()
	}
	f, model := s.f, s.models[rec.ID]
	s.mu.Unlock()
	t := purser.Task{ID: rec.ID, File: rec.File, Budget: rec.Budget, Backend: purser.BackendSpec{Models: map[string]string{"": model}}}
	fc := f.resolveWithout(ctx, t, rec.ID).ForecastSpend(spent)
	return &fc
}
