package main

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/strata-go/strata/backend/boltfile"
)

var regenFixture = flag.Bool("regen", false, "rewrite the database fixture of testdata/fixture (a new file format)")

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
	datadriven.RunTest(t, filepath.Join("testdata", "fixture", "readers"), func(t *testing.T, d *datadriven.TestData) string {
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
		return out
	})
}
