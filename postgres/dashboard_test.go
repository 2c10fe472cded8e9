package postgres_test

import (
	"testing"

	"github.com/purser-dev/purser/storetest"
)

func TestMetricsConformance(t *testing.T) {
	serverURL(t)
	storetest.RunMetrics(t, func(t *testing.T) storetest.Opener {
		dbURL := newSchema(t)
		return func(t *testing.T) storetest.Store { return open(t, dbURL) }
	})
}
