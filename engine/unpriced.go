package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/budget"
	"github.com/purser-dev/purser/pricing"
)

// ErrUnpricedModel is the cause of a call refused because its model has no
// price and nothing but a money cap would bound it. Match it with errors.Is.
var ErrUnpricedModel = errors.New("unpriced model under a money cap only")

// UnpricedModelError is a call refused before anything was sent: Purser has
// no price for its model, so its dollars are known only when the backend
// reports them (Claude Code prices a model it does not know at Opus list
// rates, and says so only at the end); the backend sets no fence of its own;
// and neither the task's budget nor its run's caps tokens or time, so the
// money cap could be passed unseen during the call.
type UnpricedModelError struct {
	TaskID  string
	Backend string // the backend's name
	Model   string // "" for the backend's own default model
}

func (e *UnpricedModelError) Error() string {
	return fmt.Sprintf("task %s: %s of backend %s has no price in Purser's catalogue, and only a money cap bounds the call: "+
		"its dollars would be known only after the call (if the backend reports them at all), so the cap could be passed unseen. "+
		"Refused before spending; to run it, give the model a price (prices: or pricing: in purser.yaml), "+
		"cap tokens or timeMinutes in the budget (the task's or the run's), "+
		"or accept tokens and time as the only bound with `unpricedModel: allow` on backend %s",
		e.TaskID, modelName(e.Model), e.Backend, e.Backend)
}

// Unwrap makes the error match ErrUnpricedModel.
func (e *UnpricedModelError) Unwrap() error { return ErrUnpricedModel }

func modelName(model string) string {
	if model == "" {
		return "the backend's default model (none is configured)"
	}
	return fmt.Sprintf("model %q", model)
}

// Unpriced is what a call on a model Purser has no price for would do about
// money: the warning to give before spending and, when nothing but a money
// cap would bound the call, the refusal.
type Unpriced struct {
	Model   string
	Backend string
	// Bound says what bounds the call's spending instead of a priced money
	// cap, for the warning.
	Bound string
	// Refused is set when only a money cap would bound the call and neither
	// the backend's fence nor the user's `unpricedModel: allow` stands in.
	Refused *UnpricedModelError
}

// Warning is the one-line warning to give before the call.
func (u *Unpriced) Warning() string {
	if u.Refused != nil {
		return "warning: " + u.Refused.Error()
	}
	return fmt.Sprintf("warning: %s of backend %s has no price in Purser's catalogue: its dollars are unknown until the backend reports them; %s",
		modelName(u.Model), u.Backend, u.Bound)
}

// CheckUnpriced says, before a call of task on model, whether Purser knows
// the model's price. It returns nil when the model is priced, or when the
// backend bills by subscription (its dollars are list prices, never checked
// against a money cap). Otherwise the call's money is bounded only by what
// Bound says; Refused is set when that is nothing but a money cap the call
// could pass unseen. run is the run's budget, or nil; fence says whether the
// backend bounds the call's money itself (purser.SpendFence).
func CheckUnpriced(prices *pricing.Catalogue, task purser.Task, run *budget.Config, model string, fence bool) *Unpriced {
	if task.Backend.Subscription() {
		return nil
	}
	if model != "" {
		if _, _, ok := prices.Resolve(model); ok {
			return nil
		}
	}
	u := &Unpriced{Model: model, Backend: task.Backend.Name}
	budgets := []struct {
		scope string
		cfg   *budget.Config
	}{{"task", &task.Budget}, {"run", run}}
	var bounds []string
	moneyCapped := false
	for _, b := range budgets {
		if b.cfg == nil {
			continue
		}
		moneyCapped = moneyCapped || b.cfg.Hard.USD != nil
		if b.cfg.Hard.Tokens != nil {
			bounds = append(bounds, fmt.Sprintf("the %s's token cap", b.scope))
		}
		if b.cfg.Hard.TimeMinutes != nil {
			bounds = append(bounds, fmt.Sprintf("the %s's time cap", b.scope))
		}
	}
	switch {
	case !moneyCapped:
		u.Bound = "money is not capped, so its tokens, time and iterations steer the task"
	case len(bounds) > 0:
		u.Bound = "the money cap may be passed during the call; " + strings.Join(bounds, " and ") + " bounds it meanwhile"
	case fence:
		u.Bound = "the backend stops the agent at what is left under the money cap (its own fence)"
	case task.Backend.AllowUnpriced:
		u.Bound = "the money cap may be passed during the call, and nothing but iterations bounds it (unpricedModel: allow)"
	default:
		u.Refused = &UnpricedModelError{TaskID: task.ID, Backend: task.Backend.Name, Model: model}
		u.Bound = "refused"
	}
	return u
}

// checkPriced is asked before each call: a call on a model Purser has no
// price for is warned about once per task and model (in the log and the
// live view), and refused when nothing but a money cap would bound it.
func (t *taskRun) checkPriced(ctx context.Context, pc *preparedCall) error {
	var run *budget.Config
	if p := t.budget.Parent(); p != nil {
		cfg := p.Config()
		run = &cfg
	}
	fence := false
	if f, ok := t.backend.(purser.SpendFence); ok {
		fence = f.FencesUSD(pc.model)
	}
	u := CheckUnpriced(t.e.cfg.Prices, t.task, run, pc.model, fence)
	if u == nil {
		return nil
	}
	if _, seen := t.e.warned.LoadOrStore(t.task.ID+"\x00"+pc.model, true); !seen {
		t.log.Warn(u.Warning(), "model", pc.model, "backend", t.task.Backend.Name)
		t.e.emit(t, purser.Event{Type: purser.EventWarning, Call: pc.kind, Message: u.Warning()})
	}
	if u.Refused != nil {
		return u.Refused
	}
	return nil
}
