package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purser-dev/purser"
	"github.com/purser-dev/purser/config"
	"github.com/purser-dev/purser/postgres"
	"github.com/purser-dev/purser/postgres/pgtest"
	"github.com/purser-dev/purser/sqlite"
)

func TestOpenStoreTakesAFilePathAsSQLite(t *testing.T) {
	ctx := context.Background()
	db := Database{Path: filepath.Join(t.TempDir(), "p.db"), From: "--db"}
	if _, err := OpenStore(ctx, db, false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reading a database that is not there: %v, want os.ErrNotExist", err)
	}
	s, err := OpenStore(ctx, db, true)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, ok := s.(*sqlite.Store); !ok {
		t.Fatalf("a file path opened a %T", s)
	}
	if s, err = OpenStore(ctx, db, false); err != nil {
		t.Fatalf("reading the database once made: %v", err)
	}
	s.Close()
}

func TestOpenStoreTakesAPostgresURL(t *testing.T) {
	ctx := context.Background()
	db := Database{Path: pgtest.NewSchema(t), From: "PURSER_DB"}
	if _, err := OpenStore(ctx, db, false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reading a database Purser never set up: %v, want os.ErrNotExist", err)
	}
	s, err := OpenStore(ctx, db, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*postgres.Store); !ok {
		t.Fatalf("a postgres:// URL opened a %T", s)
	}
	if r, err := OpenStore(ctx, db, false); err != nil {
		t.Fatalf("reading the database once set up: %v", err)
	} else {
		r.Close()
	}
}

// A URL in purser.yaml, PURSER_DB or --db is used as given (not taken for
// a path under the project), is never shown with its password, and is not a
// file any workspace could hold.
func TestDatabaseMayBeAPostgresURL(t *testing.T) {
	const url = "postgresql://ann:s3cret-pw@db.example:5432/purser?sslmode=require"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "purser.yaml"), []byte("database: "+url+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	proj, err := config.FindProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PURSER_DB", "")
	for _, db := range []Database{LocateDatabase("", proj), LocateDatabase(url, proj)} {
		if db.Path != url {
			t.Errorf("database from %s is %q, want the URL as given", db.From, db.Path)
		}
		if shown := db.String(); strings.Contains(shown, "s3cret-pw") || !strings.Contains(shown, "db.example") {
			t.Errorf("database shown as %q: want the host, not the password", shown)
		}
		ws := purser.Task{ID: "t", Workspace: dir}
		if err := RefuseDatabaseInWorkspace(db, []purser.Task{ws}); err != nil {
			t.Errorf("a server's database was refused as inside a workspace: %v", err)
		}
	}
	t.Setenv("PURSER_DB", url)
	if db := LocateDatabase("", proj); db.Path != url || db.From != "PURSER_DB" {
		t.Errorf("PURSER_DB gave %+v", db)
	}
}

// A server that cannot be reached: the error names it, without the
// password, and nothing is opened.
func TestOpenStoreErrorHidesThePassword(t *testing.T) {
	db := Database{Path: "postgres://ann:s3cret-pw@127.0.0.1:1/purser?connect_timeout=5", From: "--db"}
	_, err := OpenStore(context.Background(), db, true)
	if err == nil {
		t.Fatal("opened a database on a port where nothing listens")
	}
	if strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("error %q: want the server named and the password hidden", err)
	}
}
