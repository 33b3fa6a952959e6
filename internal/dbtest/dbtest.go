// Package dbtest opens temporary strata databases for tests and checks every
// invariant of the store after each test (bbolt's habit: every test is also
// a test of the invariants).
package dbtest

import (
	"path/filepath"
	"testing"

	"github.com/strata-go/strata/store"
)

// Open creates a database in t.TempDir() (opts.Create is set) and, in
// t.Cleanup, closes it, reopens it read-only and fails the test on any
// problem store.Verify reports.
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

// create makes a database in t.TempDir().
func create(t testing.TB, opts store.Options) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "strata.db")
	opts.Create = true
	db, err := store.Open(path, opts)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", path, err)
	}
	return db, path
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

// RealSessions returns the JSONL files of ../shared/data/real (found from the
// test's package directory upwards), skipping the test when they are absent.
func RealSessions(t testing.TB) []string {
	t.Helper()
	for _, up := range []string{"..", "../..", "../../.."} {
		files, _ := filepath.Glob(filepath.Join(up, "..", "shared", "data", "real", "*.jsonl"))
		if len(files) > 0 {
			return files
		}
	}
	t.Skip("../shared/data/real is absent: real-session tests skipped")
	return nil
}
