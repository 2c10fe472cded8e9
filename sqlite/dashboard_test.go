package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/storetest"
)

func TestMetricsConformance(t *testing.T) {
	storetest.RunMetrics(t, func(t *testing.T) storetest.Opener {
		path := filepath.Join(t.TempDir(), "p.db")
		return func(t *testing.T) storetest.Store {
			t.Helper()
			return open(t, path)
		}
	})
}
