package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-go/strata/internal/pgtest"
)

// The commands on a postgres:// URL do what they do on a file: the same
// replay, and resume gives the same bytes; dump, stats and verify read it.
func TestPostgres_SameAsFile(t *testing.T) {
	for _, flags := range [][]string{
		{"--every", "2", "--fold", "2"},
		{"--every", "2", "--summarizer", "lossy"},
		{"--every", "1", "--fold", "2", "--max-roots", "2"},
	} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			url := pgtest.URL(t)
			file := tempDB(t)
			for _, db := range []string{file, url} {
				if out := mustCLI(t, append(append([]string{"replay", "--db", db}, flags...), incident(t))...); !strings.Contains(out, "compacted") && !strings.Contains(out, "refused") {
					t.Fatalf("replay compacted nothing:\n%s", out)
				}
			}
			sessions := sessionsOf(t, url)
			if !reflect.DeepEqual(sessions, sessionsOf(t, file)) || len(sessions) != 1 {
				t.Fatalf("sessions %v in PostgreSQL, %v in the file", sessions, sessionsOf(t, file))
			}
			for _, s := range sessions {
				p, f := resume(t, url, s), resume(t, file, s)
				if !reflect.DeepEqual(p, f) {
					t.Errorf("session %s resumes differently:\npostgres: %+v\nfile: %+v", s, p, f)
				}
			}
			// dump --json: the same but for the format's version, the
			// schema's.
			dump := func(db string) map[string]any {
				var m map[string]any
				if err := json.Unmarshal([]byte(mustCLI(t, "dump", "--json", db)), &m); err != nil {
					t.Fatal(err)
				}
				delete(m, "format_version")
				return m
			}
			if p, f := dump(url), dump(file); !reflect.DeepEqual(p, f) {
				t.Errorf("dump --json differs between PostgreSQL and the file")
			}
			if out := mustCLI(t, "stats", url); !strings.Contains(out, "sessions") {
				t.Errorf("stats:\n%s", out)
			}
			if out := mustCLI(t, "verify", url); out != "ok\n" {
				t.Errorf("verify: %q", out)
			}
		})
	}
}

// verify of a PostgreSQL store names a row an SQL UPDATE changed, and
// exits 3; resume refuses to read it.
func TestPostgres_VerifyFindsUpdatedRow(t *testing.T) {
	url := pgtest.URL(t)
	mustCLI(t, "replay", "--db", url, "--every", "2", incident(t))
	pgtest.Exec(t, url, `UPDATE strata_events SET value = value || '\x00'::bytea WHERE seq = 3`)
	r := cli(t, "", "verify", url)
	wantCode(t, r, exitProblems, "verify", url)
	if !strings.Contains(r.stdout, `session "mig" l0 key 3`) || !strings.Contains(r.stdout, "checksum mismatch") {
		t.Errorf("verify does not name the damaged event:\n%s", r.stdout)
	}
	r = cli(t, "", "dump", "--raw", url)
	wantCode(t, r, exitError, "dump", "--raw", url)
	if !strings.Contains(r.stderr, "damaged") || !strings.Contains(r.stderr, "strata verify") {
		t.Errorf("dump --raw of a damaged store:\n%s", r.stderr)
	}
}
