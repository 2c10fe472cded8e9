package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/purser-dev/purser/sqlite"
	"github.com/purser-dev/purser/storetest"
)

// Every test of the suite gets a database file of its own; each handle is a
// separate sqlite.Store on it, as a separate process would open.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		path := filepath.Join(t.TempDir(), "p.db")
		return func(t *testing.T) storetest.Store {
			t.Helper()
			return open(t, path)
		}
	})
}

// Reopening a database runs no migration twice and keeps what it held.
func TestReopenKeepsTheData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "p.db")
	s := open(t, path)
	if err := s.SaveArtifact(t.Context(), "t1", "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if b, err := s2.Artifact(t.Context(), "t1", "a"); err != nil || string(b) != "x" {
		t.Fatalf("after reopening: %q, %v", b, err)
	}
}
