package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-go/strata"
	"github.com/strata-go/strata/internal/dbtest"
)

func TestDemo_RefusalFallbackAndMarker(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	out := mustCLI(t, "demo", "--db", db)
	lossy, extractive, ok := strings.Cut(out, "2. summarizer extractive")
	if !ok {
		t.Fatalf("no extractive part:\n%s", out)
	}
	for _, want := range []string{
		"refused session=incident-lossy depth=1 seq=1..23 checkpoint=1 reasons=retention:approach/add-column-then-backfill,retention:c5@17,artifact:migrations/003_down.sql",
		"resume: source=checkpoint checkpoint=1",
		"rejected approach/add-column-then-backfill: held as raw event [20 t4]",
		"artifact migrations/003_down.sql: held as raw event [12 t2]",
	} {
		if !strings.Contains(lossy, want) {
			t.Errorf("lossy part lacks %q:\n%s", want, lossy)
		}
	}
	if strings.Contains(lossy, "compacted ") {
		t.Errorf("lossy summarizer committed a marker:\n%s", lossy)
	}
	for _, want := range []string{
		"compacted session=incident-extractive depth=1 seq=1..12 node=1 marker=1",
		"resume: source=marker marker=3",
		"rejected approach/add-column-then-backfill: held as a claim of a summary node",
		"artifact migrations/003_down.sql: held as a claim of a summary node",
	} {
		if !strings.Contains(extractive, want) {
			t.Errorf("extractive part lacks %q:\n%s", want, extractive)
		}
	}
	if strings.Contains(out, "MISSING") {
		t.Errorf("a fact is missing from a resumed context:\n%s", out)
	}
	dbtest.MustVerify(t, db)

	// A second run replaces the demo's own database and says the same.
	if again := mustCLI(t, "demo", "--db", db); again != out {
		t.Errorf("second run differs:\n%s\n---\n%s", again, out)
	}
}

func TestDemo_RefusesAnotherDatabase(t *testing.T) {
	file := writeFile(t, "other.jsonl", `{"session":"mine","kind":"user","text":"hi"}`+"\n")
	db := replayed(t, nil, file)
	before := readBytes(t, db)
	r := cli(t, "", "demo", "--db", db)
	wantCode(t, r, exitError, "demo")
	if !strings.Contains(r.stderr, `session "mine"`) {
		t.Errorf("stderr does not name the foreign session:\n%s", r.stderr)
	}
	if !bytes.Equal(before, readBytes(t, db)) {
		t.Error("demo changed a database that is not its own")
	}

	notDB := writeFile(t, "notes.txt", "not a database\n")
	r = cli(t, "", "demo", "--db", notDB)
	wantCode(t, r, exitError, "demo")
	if b, _ := os.ReadFile(notDB); string(b) != "not a database\n" {
		t.Error("demo changed a file that is not a database")
	}
}

func TestDemo_EmbedsTheFixture(t *testing.T) {
	fixture := readBytes(t, incident(t))
	if !bytes.Equal(fixture, strata.IncidentJSONL) {
		t.Error("the embedded incident differs from testdata/incident/migration.jsonl")
	}
}
