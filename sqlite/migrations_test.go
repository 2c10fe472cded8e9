package sqlite_test

import (
	"io/fs"
	"os"
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
