package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/purser-dev/purser/budget"
)

// An iteration cut before its validators ran is stored without validator
// results: not a copy of the previous iteration's, which explain and
// STATUS.md would then each attribute to a different iteration.
func TestStoppedIterationStoresNoValidatorResults(t *testing.T) {
	t.Parallel()
	f := newFixture(t, runaway)
	f.task.Budget = budget.Config{Hard: budget.HardLimits{USD: usd("1.0"), MaxIterations: ptr(10)}}
	_ = f.run()
	its, err := f.store.Iterations(context.Background(), f.task.ID)
	if err != nil || len(its) != 3 {
		t.Fatalf("iterations = %d, %v; want 3 (the third cut mid-call)", len(its), err)
	}
	for _, it := range its[:2] {
		if it.Outcome != "failed" || len(it.Validators) == 0 {
			t.Fatalf("iteration %d: %s with %d validator results, want failed with its results", it.N, it.Outcome, len(it.Validators))
		}
	}
	if last := its[2]; last.Outcome != "stopped" || len(last.Validators) != 0 {
		t.Fatalf("iteration 3: %s with validators %+v, want stopped with none (they never ran)", last.Outcome, last.Validators)
	}
	status := readFile(t, f.workspace+"/STATUS.md")
	for _, want := range []string{"As of iteration 2:", "Iteration 3 was stopped before its validators ran."} {
		if !strings.Contains(status, want) {
			t.Errorf("STATUS.md lacks %q:\n%s", want, status)
		}
	}
}
