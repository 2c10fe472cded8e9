package quickversion_test

import (
	"testing"

	"github.com/purser-dev/purser/internal/proctest"
)

// `purser --version` is quick only while this package is initialised
// before the rest of purser (see proctest.ImportsOnly).
func TestImportsOnlyPackagesInitialisedEarly(t *testing.T) {
	proctest.ImportsOnly(t, []string{"bytes", "os", "runtime", "unsafe"}, "GODEBUG=inittrace=1 purser --version")
}
