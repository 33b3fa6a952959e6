package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-go/strata"
	"github.com/strata-go/strata/internal/dbtest"
)

// TestDemo_RefusalFallbackAndMarker: under the default policy, the lossy
// summarizer is refused every time, each time over a longer span, and
// resume falls back to a raw checkpoint holding both facts as raw events;
// the extractive one commits several summaries and a fold, and the
// resumed context holds both facts as claims.
func TestDemo_RefusalFallbackAndMarker(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	out := mustCLI(t, "demo", "--db", db)
	lossy, extractive, ok := strings.Cut(out, "2. summarizer extractive")
	if !ok {
		t.Fatalf("no extractive part:\n%s", out)
	}
	if !strings.Contains(out, fmt.Sprintf("under a policy sized for its 63 events (a summary every %d tokens, folds of %d)", demoPolicy.EveryTokens, demoPolicy.Fold)) {
		t.Errorf("the header does not name the demo's policy:\n%s", out)
	}
	refused := regexp.MustCompile(`(?m)^refused session=incident-lossy depth=1 seq=1\.\.(\d+) checkpoint=1 reasons=`).FindAllStringSubmatch(lossy, -1)
	if len(refused) < 3 {
		t.Errorf("lossy part: %d refusals, want several:\n%s", len(refused), lossy)
	}
	for i := 1; i < len(refused); i++ {
		if a, b := atoi(t, refused[i-1][1]), atoi(t, refused[i][1]); b <= a {
			t.Errorf("refusal %d ends at %d, the one before at %d: the next attempt must cover a longer span", i+1, b, a)
		}
	}
	for _, want := range []string{
		"reasons=retention:c2@6\n",
		"retention:approach/add-column-then-backfill,",
		"artifact:migrations/003_down.sql",
		"resume: source=checkpoint checkpoint=1 reason=\"compaction of seq 1..",
		"rejected approach/add-column-then-backfill: held as raw event [27 t4]",
		"artifact migrations/003_down.sql: held as raw event [19 t2]",
	} {
		if !strings.Contains(lossy, want) {
			t.Errorf("lossy part lacks %q:\n%s", want, lossy)
		}
	}
	if strings.Contains(lossy, "compacted ") {
		t.Errorf("lossy summarizer committed a marker:\n%s", lossy)
	}
	if n := strings.Count(extractive, "compacted session=incident-extractive depth=1 "); n < 4 {
		t.Errorf("extractive part: %d summaries, want 4 or more:\n%s", n, extractive)
	}
	for _, want := range []string{
		"compacted session=incident-extractive depth=1 seq=1..12 node=1 marker=1\n",
		"compacted session=incident-extractive depth=2 seq=1..",
		"resume: source=marker marker=",
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

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
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

	// A server's schema may hold anyone's sessions: demo takes only a file.
	for _, url := range []string{"postgres://agent:secret@127.0.0.1:1/fleet", "http://127.0.0.1:6060/debug/strata"} {
		r = cli(t, "", "demo", url)
		wantCode(t, r, exitUsage, "demo", url)
		if !strings.Contains(r.stderr, "Error: demo writes a database file, not ") || strings.Contains(r.stderr, "secret") {
			t.Errorf("demo %s:\n%s", url, r.stderr)
		}
	}
}

func TestDemo_EmbedsTheFixtures(t *testing.T) {
	if !bytes.Equal(readBytes(t, incident(t)), strata.IncidentJSONL) {
		t.Error("the embedded incident differs from testdata/incident/migration.jsonl")
	}
	if !bytes.Equal(readBytes(t, filepath.Join("..", "..", "testdata", "demo", "session.jsonl")), strata.DemoJSONL) {
		t.Error("the embedded demo session differs from testdata/demo/session.jsonl")
	}
}
