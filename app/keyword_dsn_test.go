package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A keyword/value connection string is never a file name: OpenStore refuses
// it before creating anything, and it is shown with its password masked,
// quoted or not (issue 23 #14).
func TestKeywordConnectionStringIsRefusedAndMasked(t *testing.T) {
	for _, dsn := range []string{
		"host=h password=pw-secret dbname=d",
		"password = 'pw secret \\' more' host=h",
		"PASSWORD=pw-secret",
		"dbname=d user=u password=pw-secret",
	} {
		if shown := ShownDatabase(dsn); strings.Contains(shown, "secret") || !strings.Contains(shown, "xxxxx") {
			t.Errorf("%q shown as %q", dsn, shown)
		}
		dir := t.TempDir()
		t.Chdir(dir)
		_, err := OpenStore(t.Context(), Database{Path: dsn, From: "--db"}, true)
		if !errors.Is(err, ErrKeywordDSN) || !IsBadInput(err) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: %v, want ErrKeywordDSN as bad input, password masked", dsn, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%q: created %s", dsn, entries[0].Name())
		}
	}
	for _, path := range []string{"purser.db", "/var/lib/purser/host.db", filepath.Join("a=b", "x.db")} {
		if isKeywordDSN(path) || ShownDatabase(path) != path {
			t.Errorf("file name %q taken for a connection string", path)
		}
	}
}
