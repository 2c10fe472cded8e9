package supervisor_test

import (
	"testing"

	"github.com/purser-dev/purser/internal/proctest"
)

// The supervisor costs about a spawn only while its package is initialised
// before the rest of purser (see proctest.ImportsOnly).
func TestImportsOnlyPackagesInitialisedEarly(t *testing.T) {
	proctest.ImportsOnly(t, []string{"bytes", "fmt", "os", "os/signal", "strconv", "sync", "syscall", "time",
		"github.com/purser-dev/purser/internal/reswire"},
		"GODEBUG=inittrace=1 purser __purser_supervise 3 -- /bin/true 3</dev/null")
}
