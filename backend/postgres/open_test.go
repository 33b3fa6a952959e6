package postgres_test

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// tables counts the tables of the test's schema.
func tables(t *testing.T, url string) int64 {
	t.Helper()
	return pgtest.QueryInt(t, url, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`)
}

// openDB opens the store at url, closed when the test ends.
func openDB(t *testing.T, url string, opts store.Options) *store.DB {
	t.Helper()
	db, err := store.Open(url, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestOpen_EmptySchema(t *testing.T) {
	url := pgtest.URL(t)
	// Without Create, and read-only: refused, and nothing made.
	for _, opts := range []store.Options{{}, {ReadOnly: true}} {
		_, err := store.Open(url, opts)
		if !errors.Is(err, store.ErrNotExist) {
			t.Fatalf("open %+v of an empty schema: %v, want ErrNotExist", opts, err)
		}
		if len(errors.GetAllHints(err)) == 0 {
			t.Errorf("open %+v of an empty schema: %v, with no hint", opts, err)
		}
		if n := tables(t, url); n != 0 {
			t.Fatalf("open %+v of an empty schema made %d tables", opts, n)
		}
	}
	db := openDB(t, url, store.Options{Create: true})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "hello"})
	want := int64(3 + int(backend.Tables) - 1) // version, sessions, events, one per record table
	if n := tables(t, url); n != want {
		t.Fatalf("a created schema holds %d tables, want %d", n, want)
	}
	if n := pgtest.QueryInt(t, url, `SELECT max(version) FROM strata_schema_version`); n != int64(postgres.SchemaVersion) {
		t.Fatalf("schema version %d, want %d", n, postgres.SchemaVersion)
	}
	var v int
	if err := db.View(func(s *store.Snapshot) (err error) { v, err = s.FormatVersion(); return err }); err != nil || v != postgres.SchemaVersion {
		t.Fatalf("Snapshot.FormatVersion: %d, %v; want the schema version %d", v, err, postgres.SchemaVersion)
	}
}

func TestOpen_MissingSchema(t *testing.T) {
	url := pgtest.WithSchema(t, pgtest.Server(t), "strata_test_no_such_schema")
	_, err := store.Open(url, store.Options{Create: true})
	if err == nil || len(errors.GetAllHints(err)) == 0 {
		t.Fatalf("open with a search_path of no schema: %v, want an error with a hint", err)
	}
}

func TestOpen_NewerSchemaRefused(t *testing.T) {
	url := pgtest.URL(t)
	db := openDB(t, url, store.Options{Create: true})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "hello"})
	db.Close()
	pgtest.Exec(t, url, fmt.Sprintf(`INSERT INTO strata_schema_version (version, applied_by) VALUES (%d, 'a newer strata')`, postgres.SchemaVersion+1))
	for _, opts := range []store.Options{{}, {Create: true}, {ReadOnly: true}} {
		_, err := store.Open(url, opts)
		if !errors.Is(err, store.ErrFormatTooNew) {
			t.Fatalf("open %+v of schema version %d: %v, want ErrFormatTooNew", opts, postgres.SchemaVersion+1, err)
		}
	}
}

func TestOpen_NotStrata(t *testing.T) {
	url := pgtest.URL(t)
	pgtest.Exec(t, url, `CREATE TABLE strata_sessions (id text PRIMARY KEY)`)
	for _, opts := range []store.Options{{}, {Create: true}, {ReadOnly: true}} {
		if _, err := store.Open(url, opts); !errors.Is(err, store.ErrNotStrata) {
			t.Fatalf("open %+v of a schema with a strata_sessions table of its own: %v, want ErrNotStrata", opts, err)
		}
	}
}

// Migrations run once: reopening runs none, and many processes opening an
// empty schema at once make one schema, every one of them usable.
func TestOpen_MigrationsOnce(t *testing.T) {
	url := pgtest.URL(t)
	const openers = 6
	var wg sync.WaitGroup
	dbs := make([]*store.DB, openers)
	errs := make([]error, openers)
	for i := range openers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The lock wait is the test's, not the default second: six
			// openers queue behind one migration on a loaded machine.
			dbs[i], errs[i] = store.Open(url, store.Options{Create: true, LockTimeout: time.Minute})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("opener %d: %v", i, err)
		}
		t.Cleanup(func() { _ = dbs[i].Close() })
	}
	for i, db := range dbs {
		mustAppend(t, db, "s", tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprint(i)})
	}
	db := openDB(t, url, store.Options{})
	if info, err := db.Info("s"); err != nil || info.Head != openers {
		t.Fatalf("after %d openers appended once each: %+v, %v", openers, info, err)
	}
	if n := pgtest.QueryInt(t, url, `SELECT count(*) FROM strata_schema_version`); n != int64(postgres.SchemaVersion) {
		t.Fatalf("%d migrations recorded, want %d", n, postgres.SchemaVersion)
	}
}

// A read-only open writes nothing: its writes are refused, and the
// server would refuse them too.
func TestOpen_ReadOnly(t *testing.T) {
	url := pgtest.URL(t)
	db := openDB(t, url, store.Options{Create: true})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "hello"})
	db.Close()
	be, err := postgres.Open(url, postgres.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.Update(func(backend.Tx) error { return nil }); !errors.Is(err, backend.ErrReadOnly) {
		t.Fatalf("Update on a read-only backend: %v, want ErrReadOnly", err)
	}
	err = be.View(func(tx backend.Tx) error {
		s, err := tx.Session("s")
		if err != nil || s == nil {
			return errors.Newf("session: %v, %v", s, err)
		}
		if err := s.PutState([]byte("x")); !errors.Is(err, backend.ErrReadOnly) {
			return errors.Newf("PutState in a read transaction: %v, want ErrReadOnly", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ro := openDB(t, url, store.Options{ReadOnly: true})
	if _, err := ro.Append("s", tier.Event{Kind: tier.KindUser, Text: "more"}); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("append on a read-only DB: %v, want ErrReadOnly", err)
	}
	if n := pgtest.QueryInt(t, url, `SELECT count(*) FROM strata_events`); n != 1 {
		t.Fatalf("%d events after read-only opens, want 1", n)
	}
}

func mustAppend(t *testing.T, db *store.DB, session string, evs ...tier.Event) store.AppendResult {
	t.Helper()
	res, err := db.Append(session, evs...)
	if err != nil {
		t.Fatalf("append to %s: %v", session, err)
	}
	return res
}

// What the server refuses at connection is named in the hint: a database
// it does not have, a role it does not know, a parameter of the URL it
// does not know; a search_path none of whose schemas exists is named.
func TestOpen_RefusedConnection(t *testing.T) {
	base := pgtest.Server(t)
	with := func(f func(u *url.URL)) string {
		u, err := url.Parse(base)
		if err != nil || !postgres.IsURL(base) {
			return "" // pgx's key=value form: not made here
		}
		f(u)
		return u.String()
	}
	for _, tc := range []struct {
		name, url, msg, hint string
	}{
		{"database", with(func(u *url.URL) { u.Path = "/strata_no_such_db" }), "strata_no_such_db", "the server has no such database"},
		{"role", with(func(u *url.URL) { u.User = url.User("strata_no_such_role") }), "strata_no_such_role", "check the user and its password"},
		{"parameter", pgtest.WithParam(t, base, "strata_no_such_param", "1"), "strata_no_such_param", "the URL sets a parameter the server does not know"},
		{"schema", pgtest.WithSchema(t, base, "strata_no_such_schema"), "no schema of the search_path (strata_no_such_schema) exists", "CREATE SCHEMA"},
	} {
		if tc.url == "" {
			continue
		}
		_, err := store.Open(tc.url, store.Options{ReadOnly: true})
		if err == nil {
			t.Fatalf("%s: opened", tc.name)
		}
		if hints := fmt.Sprint(errors.GetAllHints(err)); !strings.Contains(err.Error(), tc.msg) || !strings.Contains(hints, tc.hint) {
			t.Errorf("%s: %v (hints %s); want %q in it and a hint of %q", tc.name, err, hints, tc.msg, tc.hint)
		}
	}
}

// Created is true of the Open that made strata's tables alone; DropEmpty
// drops them while they hold no session, and nothing else of the schema.
func TestDropEmpty(t *testing.T) {
	url := pgtest.URL(t)
	pgtest.Exec(t, url, `CREATE TABLE theirs (x int)`)
	open := func() *postgres.Backend {
		b, err := postgres.Open(url, postgres.Options{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	if !b.Created() {
		t.Fatal("Created is false of the Open that made the tables")
	}
	if err := b.Update(func(tx backend.Tx) error { _, err := tx.CreateSession("s"); return err }); err != nil {
		t.Fatal(err)
	}
	if dropped, err := b.DropEmpty(); err != nil || dropped {
		t.Fatalf("DropEmpty of tables holding a session: %v %v", dropped, err)
	}
	_ = b.Close()
	made := tables(t, url)
	if made < 2 {
		t.Fatalf("%d tables", made)
	}
	pgtest.Exec(t, url, `DELETE FROM strata_sessions`)

	// Another Open of them: not Created, never dropped.
	b = open()
	if b.Created() {
		t.Error("Created is true of an Open of tables that were there")
	}
	if dropped, err := b.DropEmpty(); err != nil || dropped || tables(t, url) != made {
		t.Fatalf("DropEmpty of tables that were there: %v %v, %d tables of %d", dropped, err, tables(t, url), made)
	}
	_ = b.Close()

	pgtest.Exec(t, url, `DROP TABLE `+strings.Join(postgres.TableNames(), ", "))
	b = open()
	defer b.Close()
	if dropped, err := b.DropEmpty(); err != nil || !dropped {
		t.Fatalf("DropEmpty of the empty tables it made: %v %v", dropped, err)
	}
	if n := tables(t, url); n != 1 {
		t.Errorf("%d tables left, want the schema's own", n)
	}
}
