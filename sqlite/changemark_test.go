package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/sqlite"
)

// With nothing committed the mark stands: the dashboard serves what it
// last read only when it does.
func TestChangeMarkStandsWithoutACommit(t *testing.T) {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, err := s.ChangeMark(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tasks(t.Context()); err != nil { // a read commits nothing
		t.Fatal(err)
	}
	if again, err := s.ChangeMark(t.Context()); err != nil || again != first {
		t.Fatalf("mark %q, then %q (%v) with nothing committed", first, again, err)
	}
}
