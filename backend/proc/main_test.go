package proc_test

import (
	"os"
	"testing"

	"github.com/purser-dev/purser/internal/procgroup"
)

// The tests run children the way purser does: under the supervisor.
func TestMain(m *testing.M) {
	procgroup.Supervise()
	os.Exit(m.Run())
}
