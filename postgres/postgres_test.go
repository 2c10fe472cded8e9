package postgres_test

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/purser-dev/purser/postgres"
	"github.com/purser-dev/purser/postgres/pgtest"
	"github.com/purser-dev/purser/storetest"
)

func serverURL(t *testing.T) string { return pgtest.ServerURL(t) }

func newSchema(t *testing.T) string { return pgtest.NewSchema(t) }

func open(t *testing.T, dbURL string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Every test of the suite gets a schema of its own; each handle is a
// separate pool, as a separate process (or host) would have.
func TestConformance(t *testing.T) {
	serverURL(t)
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dbURL := newSchema(t)
		return func(t *testing.T) storetest.Store { return open(t, dbURL) }
	})
}

// Several workers starting at once on a new database migrate it once,
// without errors, and each then sees the tables.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	dbURL := newSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(context.Background(), dbURL)
			if err == nil {
				_, err = s.Tasks(context.Background())
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Each migration is recorded once, however many opened at once.
	files, err := fs.Glob(os.DirFS("migrations"), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(files) {
		t.Fatalf("%d migrations recorded (%v), want %d", n, err, len(files))
	}
}

// Reading commands never create Purser's tables: a database without them
// is os.ErrNotExist, and once set up it opens.
func TestOpenExistingNeedsPursersTables(t *testing.T) {
	dbURL := newSchema(t)
	if _, err := postgres.OpenExisting(context.Background(), dbURL); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenExisting on an empty database: %v, want os.ErrNotExist", err)
	}
	open(t, dbURL)
	s, err := postgres.OpenExisting(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("OpenExisting after Open: %v", err)
	}
	s.Close()
}

// A wrong password, a server that is not there, a URL that does not parse:
// the error says which database failed, and never its password.
func TestErrorsNeverShowThePassword(t *testing.T) {
	const secret = "hunter2-very-secret"
	u, err := url.Parse(serverURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret)
	wrongPassword := u.String()
	u.Host = "127.0.0.1:1" // nothing listens on port 1
	noServer := u.String()
	for name, dbURL := range map[string]string{
		"wrong password":           wrongPassword,
		"no server":                noServer,
		"password in the query":    "postgres://purser@127.0.0.1:1/db?password=" + secret,
		"port that does not parse": "postgres://purser:" + secret + "@127.0.0.1:notaport/db",
		"unknown option":           "postgres://purser:" + secret + "@127.0.0.1:1/db?sslmode=sometimes",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := postgres.Open(context.Background(), dbURL)
			if err == nil {
				t.Fatal("opened")
			}
			for e := error(err); e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), secret) {
					t.Fatalf("the error shows the password: %v", e)
				}
			}
			if !strings.Contains(err.Error(), "127.0.0.1") {
				t.Errorf("the error does not say which database: %v", err)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://ann:s3cret@db.example:5432/purser", "postgres://ann:xxxxx@db.example:5432/purser"},
		{"postgresql://ann@db.example/purser?password=s3cret&sslmode=require", "postgresql://ann@db.example/purser?password=xxxxx&sslmode=require"},
		{"postgres://db.example/purser", "postgres://db.example/purser"},
		{"postgres://ann:s3cret@db.example:port/%zz", "(a PostgreSQL URL that does not parse)"},
	} {
		if got := postgres.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestIsURL(t *testing.T) {
	for in, want := range map[string]bool{
		"postgres://h/db": true, "postgresql://h/db": true, "/var/lib/purser.db": false, "purser.db": false, "postgres.db": false,
	} {
		if got := postgres.IsURL(in); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", in, got, want)
		}
	}
}
