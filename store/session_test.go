package store_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// hidePrefetch is a backend whose transactions are those of the one it
// wraps without backend.Prefetcher: every read is made when it is asked.
type hidePrefetch struct{ backend.Backend }

type plainTx struct{ backend.Tx }

func (h hidePrefetch) View(fn func(backend.Tx) error) error {
	return h.Backend.View(func(tx backend.Tx) error { return fn(plainTx{tx}) })
}

func (h hidePrefetch) Update(fn func(backend.Tx) error) error {
	return h.Backend.Update(func(tx backend.Tx) error { return fn(plainTx{tx}) })
}

// prefetchSession makes session id: three L1 roots, two of them folded,
// then two more L1 roots (four roots) and a raw tail.
func prefetchSession(t *testing.T, db *store.DB, id string) {
	t.Helper()
	commit := func(p *store.Plan, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(p, store.Summary{Narrative: "so far", Claims: p.Required.Claims(), Summarizer: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 5; i++ {
		mustAppend(t, db, id,
			tier.Event{Kind: tier.KindUser, Text: "step " + strconv.Itoa(i)},
			tier.Event{Kind: tier.KindToolCall, ID: "c" + strconv.Itoa(i), Name: "bash", Text: "make"},
			tier.Event{Kind: tier.KindToolResult, ID: "c" + strconv.Itoa(i), Key: "build", Failed: i%2 == 0, Text: "out"},
			tier.Event{Kind: tier.KindAssistant, Text: "done " + strconv.Itoa(i)})
		commit(db.PlanSpan(id, uint64(4*i), 4000))
		if i == 3 {
			var first uint64
			if err := db.View(func(s *store.Snapshot) error {
				roots, err := s.RootSpans(id)
				if err == nil {
					first = roots[0].Node
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			commit(db.PlanFold(id, first, 2, 4000))
		}
	}
	mustAppend(t, db, id, tier.Event{Kind: tier.KindUser, Text: "more"}, tier.Event{Kind: tier.KindAssistant, Text: "tail"})
}

// prefetchReads is what Resume and the plans return for session id on db,
// as text, errors included: every marker, the latest, one that does not
// exist, and every plan the frame allows.
func prefetchReads(db *store.DB, id string, nodes []uint64) string {
	out := ""
	show := func(what string, v any, err error) {
		out += fmt.Sprintf("%s: %+v, %v\n", what, v, err)
	}
	for _, m := range append([]uint64{store.Latest, store.LatestUnchecked, 9999}, nodes...) {
		ctx, err := db.Resume(id, m)
		show("resume "+strconv.FormatUint(m, 10), ctx, err)
	}
	plan := func(what string, p *store.Plan, err error) {
		if p != nil {
			var previous tier.Node
			if p.Previous != nil {
				previous = *p.Previous
			}
			show(what, []any{p.Kind, p.Depth, p.From, p.To, p.FrameVersion, p.Replaces, p.Children, previous, p.Events, p.Required, p.SpanHash}, err)
			return
		}
		show(what, nil, err)
	}
	for _, to := range []uint64{21, 22} {
		p, err := db.PlanSpan(id, to, 4000)
		plan("span to "+strconv.FormatUint(to, 10), p, err)
	}
	for _, n := range nodes {
		p, err := db.PlanFold(id, n, 2, 4000)
		plan("fold from "+strconv.FormatUint(n, 10), p, err)
		p, err = db.PlanRecompact(id, n, 4000)
		plan("recompact "+strconv.FormatUint(n, 10), p, err)
	}
	p, err := db.PlanDigest(id, 4000)
	plan("digest", p, err)
	return out
}

// TestPrefetch_ReadsNothingElse: on PostgreSQL, what Resume and the plans
// return — a context, a plan, an error — is what they return when every
// read is made as it is asked (a backend without backend.Prefetcher), in
// a session as made and in one damaged in each of the ways below: the
// read-ahead changes when the reads are made, never what they read.
func TestPrefetch_ReadsNothingElse(t *testing.T) {
	pgtest.Server(t)
	var db *store.DB // the case's, with the read-ahead (the damage's writer)
	var url string   // the case's schema
	cases := []struct {
		name   string
		damage func(t *testing.T, id string, roots []store.RootSpan, raw map[string]string) error
	}{
		{"none", nil},
		{"the last root's marker gone", func(_ *testing.T, id string, roots []store.RootSpan, _ map[string]string) error {
			return store.PutRecord(db, id, "markers", seqKey(roots[len(roots)-1].Node), nil)
		}},
		{"the last root's node gone", func(_ *testing.T, id string, roots []store.RootSpan, _ map[string]string) error {
			return store.PutRecord(db, id, "nodes", seqKey(roots[len(roots)-1].Node), nil)
		}},
		{"a root's node gone", func(_ *testing.T, id string, roots []store.RootSpan, _ map[string]string) error {
			return store.PutRecord(db, id, "nodes", seqKey(roots[1].Node), nil)
		}},
		{"the last root's node another's", func(_ *testing.T, id string, roots []store.RootSpan, raw map[string]string) error {
			return store.PutRecord(db, id, "nodes", seqKey(roots[len(roots)-1].Node), []byte(raw[fmt.Sprintf("nodes %q", seqKey(roots[1].Node))]))
		}},
		{"the last root's marker another's", func(_ *testing.T, id string, roots []store.RootSpan, raw map[string]string) error {
			return store.PutRecord(db, id, "markers", seqKey(roots[len(roots)-1].Node), []byte(raw[fmt.Sprintf("markers %q", seqKey(roots[1].Node))]))
		}},
		{"a root another's", func(_ *testing.T, id string, roots []store.RootSpan, raw map[string]string) error {
			return store.PutRecord(db, id, "roots", seqKey(roots[1].From), []byte(raw[fmt.Sprintf("roots %q", seqKey(roots[2].From))]))
		}},
		{"a root undecodable", func(_ *testing.T, id string, roots []store.RootSpan, _ map[string]string) error {
			return store.PutRecord(db, id, "roots", seqKey(roots[2].From), []byte("x"))
		}},
		{"the last marker undecodable", func(_ *testing.T, id string, roots []store.RootSpan, _ map[string]string) error {
			return store.PutRecord(db, id, "markers", seqKey(roots[len(roots)-1].Node), []byte("x"))
		}},
		{"a tail event's checksum wrong", func(t *testing.T, id string, _ []store.RootSpan, _ map[string]string) error {
			pgtest.Exec(t, url, `UPDATE strata_events SET value = 'x' WHERE session = '`+id+`' AND seq = 21`)
			return nil
		}},
		{"an event of a span's checksum wrong", func(t *testing.T, id string, _ []store.RootSpan, _ map[string]string) error {
			pgtest.Exec(t, url, `UPDATE strata_events SET value = 'x' WHERE session = '`+id+`' AND seq = 18`)
			return nil
		}},
		{"a root's checksum wrong", func(t *testing.T, id string, roots []store.RootSpan, _ map[string]string) error {
			pgtest.Exec(t, url, fmt.Sprintf(`UPDATE strata_roots SET value = 'x' WHERE session = '%s' AND key = '\\x%016x'`, id, roots[2].From))
			return nil
		}},
		{"the last marker's checksum wrong", func(t *testing.T, id string, roots []store.RootSpan, _ map[string]string) error {
			pgtest.Exec(t, url, fmt.Sprintf(`UPDATE strata_markers SET value = 'x' WHERE session = '%s' AND key = '\\x%016x'`, id, roots[3].Node))
			return nil
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url = pgtest.URL(t)
			var err error
			if db, err = store.Open(url, store.Options{Create: true, NoSync: true, Clock: testClock()}); err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			be, err := postgres.Open(url, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := store.New(hidePrefetch{be}, store.Options{ReadOnly: true})
			if err != nil {
				be.Close()
				t.Fatal(err)
			}
			defer plain.Close()
			id := "s" + strconv.Itoa(i)
			prefetchSession(t, db, id)
			var roots []store.RootSpan
			var nodes []uint64
			if err := db.View(func(s *store.Snapshot) error {
				var err error
				if roots, err = s.RootSpans(id); err != nil {
					return err
				}
				return s.Nodes(id, func(n tier.Node) error { nodes = append(nodes, n.ID); return nil })
			}); err != nil {
				t.Fatal(err)
			}
			if len(roots) != 4 {
				t.Fatalf("%d roots, want 4", len(roots))
			}
			if tc.damage != nil {
				raw, err := store.RawSessions(db)
				if err != nil {
					t.Fatal(err)
				}
				if err := tc.damage(t, id, roots, raw[id]); err != nil {
					t.Fatal(err)
				}
			}
			got := strings.Split(prefetchReads(db, id, nodes), "\n")
			want := strings.Split(prefetchReads(plain, id, nodes), "\n")
			if len(got) != len(want) {
				t.Fatalf("%d reads with the read-ahead, %d without", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("with the read-ahead:\n%s\nwithout:\n%s", got[i], want[i])
				}
			}
		})
	}
}
