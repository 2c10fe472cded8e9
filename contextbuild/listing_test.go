package contextbuild_test

import (
	"strings"
	"testing"

	"github.com/purser-dev/purser/contextbuild"
	"github.com/purser-dev/purser/workspace/workspacetest"
)

func TestListingLeavesOutPursersOwnFiles(t *testing.T) {
	ws, guard := workspacetest.PursersFiles(t)
	l := "\n" + contextbuild.Listing(ws, guard) + "\n"
	for _, want := range []string{"src/main.go", "docs/STATUS.md"} {
		if !strings.Contains(l, "\n"+want+"\n") {
			t.Errorf("listing lacks %s:\n%s", want, l)
		}
	}
	for _, hidden := range []string{".purser", "\nSTATUS.md", "BUDGET.md", "calls.jsonl", "ledger.sqlite"} {
		if strings.Contains(l, hidden) {
			t.Errorf("listing shows Purser's %s:\n%s", hidden, l)
		}
	}
}
