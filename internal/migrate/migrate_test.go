package migrate

import (
	"strings"
	"testing"
	"testing/fstest"
)

// Load orders by version, and refuses a name without one or two files with
// one version (the second would never be applied).
func TestLoad(t *testing.T) {
	ms, err := Load(fstest.MapFS{
		"m/002_b.sql":  {Data: []byte("-- only a comment\n\n")},
		"m/001_a.sql":  {Data: []byte("CREATE TABLE a (x INTEGER);")},
		"m/README.txt": {Data: []byte("not a migration")},
	}, "m")
	if err != nil || len(ms) != 2 || ms[0].Name != "001_a.sql" || ms[1].Version != 2 {
		t.Fatalf("Load = %+v, %v", ms, err)
	}
	if ms[0].NoOp() || !ms[1].NoOp() {
		t.Errorf("NoOp = %v, %v; want false for a statement, true for only comments", ms[0].NoOp(), ms[1].NoOp())
	}
	for name, fsys := range map[string]fstest.MapFS{
		"share version":  {"m/001_a.sql": {}, "m/001_b.sql": {}},
		"version number": {"m/a.sql": {}},
	} {
		if _, err := Load(fsys, "m"); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Load of %v: %v, want an error saying %q", fsys, err, name)
		}
	}
}
