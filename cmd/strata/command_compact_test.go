package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/strata-go/strata/internal/dbtest"
)

// A replay whose model failed stores its events and names compact; compact
// then makes the compactions the replay could not, where a replay that
// compacted as it went puts them, and a second run adds nothing.
func TestCompact_AfterTheSummarizerFailed(t *testing.T) {
	t.Parallel()
	m := newFakeModel(t, http.StatusInternalServerError, false)
	db := tempDB(t)
	r := cli(t, "", "replay", db, "--every-tokens", "200", "--summarizer", "openai", "--model", "test-model",
		"--base-url", m.URL+"/v1", "--llm-retries", "0", incident(t))
	wantCode(t, r, exitError, "replay with the model failing")
	if !strings.Contains(r.stderr, "500 Internal Server Error") ||
		!strings.Contains(r.stderr, "Hint: the events read are stored; to compact them once the cause is mended, run: strata compact "+db+" ") ||
		!strings.Contains(r.stderr, " --every-tokens=200 ") || !strings.Contains(r.stderr, " --summarizer=openai") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if compactions(t, db) != "" {
		t.Fatalf("the failed replay compacted:\n%s", compactions(t, db))
	}
	r = cli(t, "", "compact", db, "--every-tokens", "200")
	wantCode(t, r, exitOK, "compact")
	if !strings.HasPrefix(r.stdout, "compacted session=mig depth=1 seq=1..") || !strings.HasSuffix(r.stdout, " refused=0\n") ||
		!strings.Contains(r.stdout, "\ncompact sessions=1 compacted=") {
		t.Errorf("compact: %q", r.stdout)
	}
	// The rest of the file, then all of it compacted as one replay does.
	mustCLI(t, "replay", db, "--every-tokens", "200", incident(t))
	if got, want := compactions(t, db), compactions(t, replayed(t, []string{"--every-tokens", "200"}, incident(t))); got != want {
		t.Errorf("compactions:\n%s\nwant, as one replay makes them:\n%s", got, want)
	}
	before := mustCLI(t, "dump", "--json", db)
	r = cli(t, "", "compact", db, "--every-tokens", "200", "--json")
	wantCode(t, r, exitOK, "compact again")
	if r.stdout != `{"type":"compact","sessions":0,"compacted":0,"refused":0}`+"\n" {
		t.Errorf("compact again: %q", r.stdout)
	}
	if after := mustCLI(t, "dump", "--json", db); after != before {
		t.Errorf("compact again changed the database")
	}
	dbtest.MustVerify(t, db)
}

// A refused span is not asked for again: a second compact with the same
// lossy summarizer adds nothing; --session picks sessions, and one the
// database does not hold is an error before anything is compacted.
func TestCompact_RefusedOnceAndSessions(t *testing.T) {
	t.Parallel()
	db := replayed(t, []string{"--every-tokens", "0", "--fold", "0"}, incident(t))
	other := writeFile(t, "other.jsonl", strings.Replace(string(readBytes(t, incident(t))), `"session":"mig"`, `"session":"other"`, 1))
	mustCLI(t, "replay", db, "--every-tokens", "0", "--fold", "0", other)

	r := cli(t, "", "compact", db, "--session", "mig", "--session", "nope", "--every-tokens", "200")
	wantCode(t, r, exitError, "compact an unknown session")
	if !strings.Contains(r.stderr, `session "nope"`) || !strings.Contains(r.stderr, "Hint: to list the sessions, run: strata sessions") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if compactions(t, db) != "" {
		t.Errorf("compacted before the unknown session was found")
	}
	r = cli(t, "", "compact", db, "--session", "mig", "--every-tokens", "200", "--summarizer", "lossy")
	wantCode(t, r, exitOK, "compact lossy")
	if !strings.HasPrefix(r.stdout, "refused session=mig depth=1 seq=1..") || !strings.HasSuffix(r.stdout, "compact sessions=1 compacted=0 refused=3\n") {
		t.Errorf("compact lossy: %q", r.stdout)
	}
	r = cli(t, "", "compact", db, "--session", "mig", "--every-tokens", "200", "--summarizer", "lossy")
	if wantCode(t, r, exitOK, "compact lossy again"); r.stdout != "compact sessions=0 compacted=0 refused=0\n" {
		t.Errorf("compact lossy again: %q", r.stdout)
	}
	r = cli(t, "", "compact", db, "--every-tokens", "200")
	if wantCode(t, r, exitOK, "compact every session"); strings.Contains(r.stdout, "session=mig ") || !strings.Contains(r.stdout, "compacted session=other ") {
		t.Errorf("compact every session: %q", r.stdout)
	}
	dbtest.MustVerify(t, db)
}

// compact's bad usage: exit 2, nothing opened.
func TestCompact_Usage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"compact"},
		{"compact", "a.db", "b.db"},
		{"compact", "a.db", "--fold", "1"},
		{"compact", "a.db", "--summarizer", "nope"},
		{"compact", "a.db", "--session", ""},
		{"compact", "a.db", "--drop", "negatives"},
	} {
		r := cli(t, "", args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "Error: ") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
