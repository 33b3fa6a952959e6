package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// damaged makes a store with one compacted session, closes it, damages it
// with SQL, and returns it reopened.
func damaged(t *testing.T, sql ...string) (*store.DB, string) {
	t.Helper()
	url := pgtest.URL(t)
	db := openDB(t, url, store.Options{Create: true})
	for i := range 3 {
		mustAppend(t, db, "s",
			tier.Event{Kind: tier.KindUser, Text: fmt.Sprintf("step %d", i)},
			tier.Event{Kind: tier.KindToolCall, ID: fmt.Sprintf("c%d", i), Name: "run"},
			tier.Event{Kind: tier.KindToolResult, ID: fmt.Sprintf("c%d", i), Text: "ok"})
	}
	p, err := db.PlanSpan("s", 6, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, store.Summary{Narrative: "two steps", Claims: p.Required.Claims(), Summarizer: "test"}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, "other", tier.Event{Kind: tier.KindUser, Text: "untouched"})
	dbtest.Verify(t, db)
	db.Close()
	pgtest.Exec(t, url, sql...)
	return openDB(t, url, store.Options{}), url
}

// problems returns what Verify reports, one line each.
func problems(t *testing.T, db *store.DB) []string {
	t.Helper()
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	var out []string
	for _, p := range rep.Problems {
		out = append(out, p.String())
	}
	return out
}

// wantProblem fails t unless a problem holds every one of parts.
func wantProblem(t *testing.T, ps []string, parts ...string) {
	t.Helper()
	for _, p := range ps {
		all := true
		for _, part := range parts {
			all = all && strings.Contains(p, part)
		}
		if all {
			return
		}
	}
	t.Fatalf("no problem names %q; verify found:\n%s", parts, strings.Join(ps, "\n"))
}

// A row whose bytes an SQL UPDATE changed is damage at its place: verify
// names it, and no read serves it.
func TestDamage_UpdatedRows(t *testing.T) {
	cases := []struct {
		name  string
		sql   string
		parts []string
		read  func(db *store.DB) error
	}{
		{"event", `UPDATE strata_events SET value = overlay(value placing '\x00'::bytea from 3) WHERE session = 's' AND seq = 8`,
			[]string{`session "s" l0 key 8`, "strata_events", "checksum mismatch"},
			func(db *store.DB) error { _, err := db.Resume("s", store.Latest); return err }},
		{"event moved", `UPDATE strata_events SET seq = 100 WHERE session = 's' AND seq = 9`,
			[]string{`session "s" l0 key 100`, "checksum mismatch"},
			func(db *store.DB) error {
				return db.View(func(s *store.Snapshot) error {
					return s.Events("s", 1, ^uint64(0), func(tier.Event) error { return nil })
				})
			}},
		{"event of another session", `UPDATE strata_events SET session = 'other' WHERE session = 's' AND seq = 9`,
			[]string{`session "other" l0 key 9`, "checksum mismatch"},
			func(db *store.DB) error {
				return db.View(func(s *store.Snapshot) error {
					// Never read as other's (past its head); missing from s.
					return s.Events("s", 1, ^uint64(0), func(tier.Event) error { return nil })
				})
			}},
		{"state", `UPDATE strata_sessions SET state = state || '\x00'::bytea WHERE id = 's'`,
			[]string{`session "s" state`, "strata_sessions", "checksum mismatch"},
			func(db *store.DB) error { _, err := db.Info("s"); return err }},
		{"node", `UPDATE strata_nodes SET value = overlay(value placing '\xff'::bytea from 2) WHERE session = 's'`,
			[]string{`session "s" nodes key 1`, "strata_nodes", "checksum mismatch"},
			func(db *store.DB) error { _, err := db.Resume("s", store.Latest); return err }},
		{"marker", `UPDATE strata_markers SET value = value || '\x00'::bytea WHERE session = 's'`,
			[]string{`session "s" markers key 1`, "checksum mismatch"},
			func(db *store.DB) error { _, err := db.Resume("s", store.Latest); return err }},
		{"open call", `UPDATE strata_open SET key = 'c9' WHERE session = 's'`,
			[]string{`session "s" open key "c9"`, "checksum mismatch"},
			func(db *store.DB) error {
				return db.View(func(s *store.Snapshot) error { _, err := s.Ledger("s"); return err })
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sql := tc.sql
			if tc.name == "open call" {
				// An open call to move: append a call without its result.
				sql = ""
			}
			var db *store.DB
			if sql == "" {
				url := pgtest.URL(t)
				d := openDB(t, url, store.Options{Create: true})
				mustAppend(t, d, "s", tier.Event{Kind: tier.KindUser, Text: "go"}, tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "run"})
				d.Close()
				pgtest.Exec(t, url, tc.sql)
				db = openDB(t, url, store.Options{})
			} else {
				db, _ = damaged(t, sql)
			}
			wantProblem(t, problems(t, db), tc.parts...)
			err := tc.read(db)
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("reading the damaged place: %v, want ErrCorrupt", err)
			}
			var ce *store.CorruptError
			if !errors.As(err, &ce) || ce.Session == "" {
				t.Fatalf("reading the damaged place: %v, want a *CorruptError naming the session", err)
			}
		})
	}
}

// An event row past the head (put there by SQL) makes the next append
// fail whole: nothing of it is stored, and verify names the stray row.
func TestDamage_StrayEventFailsAppend(t *testing.T) {
	db, url := damaged(t, `INSERT INTO strata_events (session, seq, value, crc)
		SELECT session, 10, value, crc FROM strata_events WHERE session = 's' AND seq = 1`)
	before := pgtest.QueryInt(t, url, `SELECT count(*) FROM strata_events`)
	_, err := db.Append("s", tier.Event{Kind: tier.KindUser, Text: "next"}, tier.Event{Kind: tier.KindToolCall, ID: "c9", Name: "run"})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "l0 key 10") {
		t.Fatalf("append onto a stray event at seq 10: %v, want ErrCorrupt naming it", err)
	}
	if after := pgtest.QueryInt(t, url, `SELECT count(*) FROM strata_events`); after != before {
		t.Fatalf("%d event rows after the failed append, %d before", after, before)
	}
	if info, err := db.Info("s"); err != nil || info.Head != 9 {
		t.Fatalf("after the failed append: %+v, %v; want head 9", info, err)
	}
	if n := pgtest.QueryInt(t, url, `SELECT count(*) FROM strata_open WHERE session = 's'`); n != 0 {
		t.Fatalf("the failed append left %d open calls", n)
	}
	wantProblem(t, problems(t, db), `session "s" l0 key 10`)
}

// Rows of a session that has no session row are invisible to every read:
// verify names them.
func TestDamage_OrphanRows(t *testing.T) {
	db, _ := damaged(t,
		`INSERT INTO strata_nodes (session, key, value, crc) SELECT 'ghost', key, value, crc FROM strata_nodes WHERE session = 's'`,
		`DELETE FROM strata_sessions WHERE id = 'other'`)
	ps := problems(t, db)
	wantProblem(t, ps, "ghost", "strata_nodes", "has no row in strata_sessions")
	wantProblem(t, ps, "other", "strata_events", "has no row in strata_sessions")
}
