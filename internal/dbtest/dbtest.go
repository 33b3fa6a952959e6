// Package dbtest opens temporary strata databases for tests and checks every
// invariant of the store after each test (bbolt's habit: every test is also
// a test of the invariants).
package dbtest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
)

// Open creates a database in t.TempDir() (opts.Create is set), or in
// PostgreSQL (BackendEnv), and, in t.Cleanup, closes it, reopens it
// read-only and fails the test on any problem store.Verify reports.
func Open(t testing.TB, opts store.Options) *store.DB {
	t.Helper()
	db, path := create(t, opts)
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("dbtest: close: %v", err)
		}
		MustVerify(t, path)
	})
	return db
}

// BackendEnv is the environment variable that picks the backend of the
// databases Open makes: unset or "bbolt", a file in t.TempDir();
// "postgres", a schema of the test's own on the server pgtest.Env names.
const BackendEnv = "STRATA_TEST_BACKEND"

// Postgres reports whether Open makes its databases in PostgreSQL
// (BackendEnv).
func Postgres() bool { return os.Getenv(BackendEnv) == "postgres" }

// FileOnly skips t when Open makes its databases in PostgreSQL: t reads or
// writes the bbolt file itself — damages it, copies it, backs it up,
// reopens it at its path. It runs on every bbolt run.
func FileOnly(t testing.TB) {
	t.Helper()
	if Postgres() {
		t.Skipf("%s=postgres: the test works on the bbolt file itself", BackendEnv)
	}
}

// create makes a database in t.TempDir(), or in PostgreSQL (BackendEnv).
func create(t testing.TB, opts store.Options) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "strata.db")
	switch b := os.Getenv(BackendEnv); b {
	case "", "bbolt":
	case "postgres":
		if os.Getenv(pgtest.Env) == "" {
			t.Fatalf("dbtest: %s=postgres needs %s, the test server's URL", BackendEnv, pgtest.Env)
		}
		path = pgtest.URL(t)
	default:
		t.Fatalf("dbtest: %s=%q: want bbolt or postgres", BackendEnv, b)
	}
	opts.Create = true
	db, err := store.Open(path, opts)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", path, err)
	}
	places.Store(db, path)
	return db, path
}

// places holds where each database Open, OpenUnverified and Reopen made
// lives — its file or URL — by *store.DB: what Reopen opens again.
var places sync.Map

// Reopen closes db, made by Open, OpenUnverified or Reopen, and opens the
// same database again with opts — the file, or the PostgreSQL schema, where
// db.Path() is "" — closing it in t.Cleanup.
func Reopen(t testing.TB, db *store.DB, opts store.Options) *store.DB {
	t.Helper()
	path, ok := places.Load(db)
	if !ok {
		t.Fatal("dbtest: Reopen of a database dbtest did not open")
	}
	if err := db.Close(); err != nil {
		t.Fatalf("dbtest: close: %v", err)
	}
	re, err := store.Open(path.(string), opts)
	if err != nil {
		t.Fatalf("dbtest: reopen %s: %v", path, err)
	}
	places.Store(re, path)
	t.Cleanup(func() { _ = re.Close() })
	return re
}

// OpenUnverified is Open for a test that damages the database on purpose:
// t.Cleanup closes it without verifying it.
func OpenUnverified(t testing.TB, opts store.Options) *store.DB {
	t.Helper()
	db, _ := create(t, opts)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// MustVerify opens path read-only and fails t on any problem Verify reports.
func MustVerify(t testing.TB, path string) {
	t.Helper()
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Errorf("dbtest: reopen %s for verify: %v", path, err)
		return
	}
	defer db.Close()
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Errorf("dbtest: verify %s: %v", path, err)
		return
	}
	for _, p := range rep.Problems {
		t.Errorf("dbtest: verify %s: %s", path, p)
	}
}

// Verify fails t on each problem db.Verify reports, and stops t when Verify
// fails; it reports whether db has no problem.
func Verify(t testing.TB, db *store.DB) bool {
	t.Helper()
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	for _, p := range rep.Problems {
		t.Errorf("verify: %s", p)
	}
	return rep.OK()
}

// RealSessions returns the JSONL files of ../shared/data/real (found from the
// test's package directory upwards), skipping the test when they are absent.
func RealSessions(t testing.TB) []string {
	t.Helper()
	files := RealSessionFiles()
	if len(files) == 0 {
		t.Skip("../shared/data/real is absent: real-session tests skipped")
	}
	return files
}

// RealSessionFiles returns the JSONL files of ../shared/data/real, as
// RealSessions does, or none when they are absent: for a test that runs
// on other sessions too.
func RealSessionFiles() []string {
	for _, up := range []string{"..", "../..", "../../.."} {
		files, _ := filepath.Glob(filepath.Join(up, "..", "shared", "data", "real", "*.jsonl"))
		if len(files) > 0 {
			return files
		}
	}
	return nil
}
