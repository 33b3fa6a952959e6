package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/strata-go/strata/backend/boltfile"
	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/internal/pgtest"
)

var regenFixture = flag.Bool("regen", false, "rewrite the database fixtures of testdata/fixture (a new file format or schema version)")

// fixtureDB is a database file of the current format, committed: every
// reader must keep reading it. It holds the incident replayed with
// refusals, folds and digests (TestFormat_Fixture -regen makes it).
var fixtureDB = filepath.Join("testdata", "fixture", "format"+strconv.Itoa(boltfile.FormatVersion)+".db")

// TestFormat_Fixture runs the readers and verify on a copy of the committed
// database file fixtureDB and compares their exit codes and outputs with
// testdata/fixture/readers: a change of the records or the layout that
// breaks existing files fails here. With a new format, regenerate the file
// and the outputs (docs/testing.md):
//
//	go test ./cmd/strata -run TestFormat_Fixture -args -regen
//	go test ./cmd/strata -run TestFormat_Fixture -rewrite
func TestFormat_Fixture(t *testing.T) {
	if *regenFixture {
		db := replayed(t, []string{"--every", "0", "--every-events", "5", "--fold", "2", "--summarizer", "lossy", "--drop", "open"}, incident(t))
		b, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fixtureDB, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", fixtureDB, len(b))
	}
	orig, err := os.ReadFile(fixtureDB)
	if err != nil {
		t.Fatalf("the fixture of format %d: %v (make it with -args -regen)", boltfile.FormatVersion, err)
	}
	db := filepath.Join(t.TempDir(), "fixture.db")
	if err := os.WriteFile(db, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	runReaders(t, filepath.Join("testdata", "fixture", "readers"), db, nil)
}

// runReaders runs the strata commands of the datadriven file path with DB
// standing for db, and compares their exit codes and outputs (after norm,
// when it is not nil).
func runReaders(t *testing.T, path, db string, norm func(string) string) {
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "strata" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		args := make([]string, len(d.CmdArgs))
		for i, a := range d.CmdArgs {
			args[i] = strings.ReplaceAll(a.String(), "DB", db)
		}
		r := cli(t, "", args...)
		out := "exit " + strconv.Itoa(r.code) + "\n" + strings.ReplaceAll(r.stdout, db, "DB")
		if r.code != exitOK {
			out += "stderr:\n" + strings.ReplaceAll(r.stderr, db, "DB")
		}
		if norm != nil {
			out = norm(out)
		}
		return out
	})
}

// fixtureDump is a plain-SQL dump (pg_dump) of a PostgreSQL database of
// the current schema, committed: every reader must keep reading it once
// psql restored it. It holds the incident replayed as fixtureDB holds it,
// a fork of that session, and the demo session (TestFormat_PostgresFixture
// -regen makes it).
var fixtureDump = filepath.Join("testdata", "fixture", "postgres"+strconv.Itoa(postgres.SchemaVersion)+".sql")

// TestFormat_PostgresFixture restores the committed dump fixtureDump with
// psql into a new database on the test server and runs the readers and
// verify on it, comparing their exit codes and outputs with
// testdata/fixture/readers-postgres: a change of the schema, of the
// records or of their checksums that breaks existing databases fails here.
// It needs a server (pgtest.Env) and PostgreSQL's programs (pgtest.BinEnv:
// psql, pg_dump). With a new schema version, regenerate the dump and the
// outputs (docs/testing.md):
//
//	go test ./cmd/strata -run TestFormat_PostgresFixture -args -regen
//	go test ./cmd/strata -run TestFormat_PostgresFixture -rewrite
func TestFormat_PostgresFixture(t *testing.T) {
	bin := os.Getenv(pgtest.BinEnv)
	if bin == "" {
		t.Skipf("%s is unset: the PostgreSQL fixture needs psql (docs/postgres.md)", pgtest.BinEnv)
	}
	if *regenFixture {
		url := newDatabase(t)
		mustCLI(t, "replay", "--db", url, "--every", "0", "--every-events", "5", "--fold", "2", "--summarizer", "lossy", "--drop", "open", incident(t))
		mustCLI(t, "fork", url, "--session", "mig", "--to", "mig-fork")
		mustCLI(t, "replay", "--db", url, "--every", "2", filepath.Join("..", "..", "testdata", "demo", "session.jsonl"))
		pgProgram(t, bin, "pg_dump", "--no-owner", "--no-privileges", "--file", fixtureDump, url)
		b, err := os.ReadFile(fixtureDump)
		if err != nil {
			t.Fatal(err)
		}
		// pg_dump's \restrict and \unrestrict guard a restore of a dump
		// one did not make; older psqls do not know them.
		b = regexp.MustCompile(`(?m)^\\(un)?restrict .*\n`).ReplaceAll(b, nil)
		if err := os.WriteFile(fixtureDump, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", fixtureDump, len(b))
	}
	if _, err := os.Stat(fixtureDump); err != nil {
		t.Fatalf("the dump of schema version %d: %v (make it with -args -regen)", postgres.SchemaVersion, err)
	}
	url := newDatabase(t)
	pgProgram(t, bin, "psql", "--no-psqlrc", "--quiet", "--set", "ON_ERROR_STOP=1", "--file", fixtureDump, url)
	// The tables' size is the server's: its version and autovacuum's
	// visibility and free space maps change it.
	tableBytes := regexp.MustCompile(`(?m)^tables bytes=\d+ per_event=[\d.]+$`)
	runReaders(t, filepath.Join("testdata", "fixture", "readers-postgres"), url, func(s string) string {
		return tableBytes.ReplaceAllString(s, "tables bytes=SIZE per_event=SIZE")
	})
}

// newDatabase creates a database of its own for t on the test server and
// returns its URL; it is dropped when t ends.
func newDatabase(t *testing.T) string {
	t.Helper()
	base := pgtest.Server(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "strata_fixture_" + hex.EncodeToString(b[:])
	pgtest.Exec(t, base, "CREATE DATABASE "+name)
	t.Cleanup(func() { pgtest.Exec(t, base, "DROP DATABASE "+name+" WITH (FORCE)") })
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", pgtest.Env, err)
	}
	u.Path = "/" + name
	return u.String()
}

// pgProgram runs one of PostgreSQL's programs from dir, failing t unless
// it exits 0.
func pgProgram(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, name), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
