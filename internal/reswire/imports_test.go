package reswire_test

import (
	"testing"

	"github.com/purser-dev/purser/internal/proctest"
)

// Both resident runners are started from early inits, which stay early
// only while what they import does (see proctest.ImportsOnly).
func TestImportsOnlyPackagesInitialisedEarly(t *testing.T) {
	proctest.ImportsOnly(t, []string{"errors", "os", "strconv", "syscall"},
		"GODEBUG=inittrace=1 purser __purser_supervise 3 -- /bin/true 3</dev/null")
}
