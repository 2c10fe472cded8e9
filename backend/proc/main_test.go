package proc_test

import (
	"os"
	"testing"

	"github.com/purser-dev/purser/internal/procgroup"
	"github.com/purser-dev/purser/sandbox"
)

// The tests run children the way purser does: under the supervisor, and
// this binary is their boxes' init.
func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		sandbox.InitMain()
	}
	procgroup.Supervise()
	os.Exit(m.Run())
}
