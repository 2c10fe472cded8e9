package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/sqlite"
)

// Issue 15 #5: characters that mean something in a URI — '#', '?', '%',
// and spaces — in the database path must not send the ledger to another
// file: the database is the file at the path given, 0600 in a 0700
// folder, and nothing else appears beside it.
func TestDatabasePathWithURICharacters(t *testing.T) {
	for _, name := range []string{"C#/app", "what?/x", "100%/y", "a%20b/z", "sp ace/w", "q?_pragma=journal_mode(DELETE)#f/v", "é/ü"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			base := t.TempDir()
			dir := filepath.Join(base, name)
			path := filepath.Join(dir, "purser.db")
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SaveTask(ctx, purser.TaskRecord{ID: "t1", RunID: "r", Goal: "g", State: purser.StateRunning}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != want {
					t.Errorf("%s mode %v, want %v", p, fi.Mode().Perm(), want)
				}
			}
			if fi, _ := os.Stat(path); fi.Size() == 0 {
				t.Errorf("%s is empty: the ledger went to another file", path)
			}
			var files []string
			filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(base, p)
					files = append(files, rel)
				}
				return nil
			})
			sort.Strings(files)
			if want := filepath.Join(name, "purser.db"); strings.Join(files, ",") != want {
				t.Errorf("files under the folder: %q, want only %q", files, want)
			}
			s2, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if got, err := s2.Task(ctx, "t1"); err != nil || got.Goal != "g" {
				t.Fatalf("reopened: %+v, %v", got, err)
			}
		})
	}
}
