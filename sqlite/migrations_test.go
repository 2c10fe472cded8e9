package sqlite_test

import (
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Two migration files with one version number would see the second never
// applied (its version is already recorded): every version is used once.
func TestMigrationVersionsAreUnique(t *testing.T) {
	for _, dir := range []string{"migrations", "../postgres/migrations"} {
		names, err := fs.Glob(os.DirFS(dir), "*.sql")
		if err != nil || len(names) == 0 {
			t.Fatalf("%s: %v (%d files)", dir, err, len(names))
		}
		seen := map[int]string{}
		for _, n := range names {
			v, err := strconv.Atoi(strings.SplitN(n, "_", 2)[0])
			if err != nil {
				t.Errorf("%s/%s: the name must start with its version number", dir, n)
				continue
			}
			if other, ok := seen[v]; ok {
				t.Errorf("%s: %s and %s share version %d", dir, other, n, v)
			}
			seen[v] = n
		}
	}
}

// One version line: the same number is the same change in both stores, and
// the numbers run without gaps (a change one store needs no statements for
// is a file without statements there).
func TestStoresShareOneVersionLine(t *testing.T) {
	sqlite, err := fs.Glob(os.DirFS("migrations"), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	postgres, err := fs.Glob(os.DirFS("../postgres/migrations"), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sqlite, postgres) {
		t.Errorf("migrations differ:\nsqlite   %v\npostgres %v", sqlite, postgres)
	}
	for i, n := range sqlite {
		if v, err := strconv.Atoi(strings.SplitN(n, "_", 2)[0]); err != nil || v != i+1 {
			t.Errorf("migration %s: want version %d (no gaps)", n, i+1)
		}
	}
}
