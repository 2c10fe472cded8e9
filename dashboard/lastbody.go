package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/purser-dev/purser"
)

// lastBody is the snapshot last served, under the store's change mark
// read before it was loaded: while the mark stands nothing was committed,
// so the page is the same bytes and is served again without reading every
// task and call (issue 24: a poll costs about a static file's serving).
// It is kept at most budgetsEvery, since a named budget's window turns
// over with the clock, not with a commit (the tree is read that often
// anyway).
type lastBody struct {
	mu   sync.Mutex
	mark string
	body []byte
	at   time.Time
}

// get returns the body last served when the store's mark is still the one
// it was read under and it is fresh enough, else nil.
func (l *lastBody) get(mark string, marked bool, now time.Time) []byte {
	if !marked {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.body == nil || l.mark != mark || now.Sub(l.at) >= budgetsEvery || now.Before(l.at) {
		return nil
	}
	return l.body
}

// put keeps body as read under mark at now.
func (l *lastBody) put(mark string, body []byte, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mark, l.body, l.at = mark, body, now
}

// changeMark reads the store's change mark, when it has one; a store that
// cannot say (or fails to) is read in full every time.
func changeMark(ctx context.Context, store purser.StoreReader) (string, bool) {
	cm, ok := store.(purser.ChangeMarker)
	if !ok {
		return "", false
	}
	mark, err := cm.ChangeMark(ctx)
	return mark, err == nil
}

// markedGatherer gathers the metrics again only when the store's change
// mark moved: a scrape of a store nothing was committed to since the last
// is the last families, encoded, with neither the Collector's read of the
// store nor the registry's collect, convert and check.
type markedGatherer struct {
	g     prometheus.Gatherer
	store purser.StoreReader

	mu     sync.Mutex
	mark   string
	marked bool // fams were gathered under mark, without error
	fams   []*dto.MetricFamily
}

// Gather returns the last families while the store's mark stands, else
// gathers them anew. The families are only read by the encoder, so
// scrapes at once may share them.
func (m *markedGatherer) Gather() ([]*dto.MetricFamily, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mark, marked := changeMark(context.Background(), m.store)
	if marked && m.marked && mark == m.mark {
		return m.fams, nil
	}
	fams, err := m.g.Gather()
	m.mark, m.fams, m.marked = mark, fams, marked && err == nil && !scrapeFailed(fams)
	return fams, err
}

// scrapeFailed reports whether the Collector said it could not read the
// store: such a scrape is not kept.
func scrapeFailed(fams []*dto.MetricFamily) bool {
	for _, f := range fams {
		if f.GetName() == "purser_store_read_errors" {
			for _, m := range f.GetMetric() {
				if m.GetGauge().GetValue() != 0 {
					return true
				}
			}
		}
	}
	return false
}
