package postgres_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/store/storetest"
	"github.com/strata-go/strata/tier"
)

// Two DBs over one schema — two pools, as two processes have — append to
// one session at once: the seqs stay gapless, each append lands whole and
// in one piece where its result says, and each writer's appends are in its
// order: one history, never a fork.
func TestConcurrent_TwoWritersOneSession(t *testing.T) {
	url := pgtest.URL(t)
	const writers, each, per = 2, 40, 3
	dbs := make([]*store.DB, writers)
	for i := range dbs {
		dbs[i] = openDB(t, url, store.Options{Create: true})
	}
	var wg sync.WaitGroup
	results := make([][]store.AppendResult, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				evs := make([]tier.Event, per)
				for j := range evs {
					evs[j] = tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprintf("w%d a%d e%d", w, i, j)}
				}
				res, err := dbs[w].Append("s", evs...)
				if err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
				results[w] = append(results[w], res)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got := storetest.Events(t, dbs[0], "s")
	if len(got) != writers*each*per {
		t.Fatalf("%d events stored, want %d", len(got), writers*each*per)
	}
	for i, e := range got {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	var firsts []uint64
	for w, rs := range results {
		for i, r := range rs {
			if r.Last-r.First+1 != per {
				t.Fatalf("writer %d append %d landed at %d..%d", w, i, r.First, r.Last)
			}
			for j := range per {
				if want := fmt.Sprintf("w%d a%d e%d", w, i, j); got[r.First-1+uint64(j)].Text != want {
					t.Fatalf("seq %d holds %q, want %q (writer %d's append %d)", r.First+uint64(j), got[r.First-1+uint64(j)].Text, want, w, i)
				}
			}
			if i > 0 && r.First <= rs[i-1].Last {
				t.Fatalf("writer %d's append %d at %d, before its append %d at %d", w, i, r.First, i-1, rs[i-1].First)
			}
			firsts = append(firsts, r.First)
		}
	}
	slices.Sort(firsts)
	for i, f := range firsts {
		if f != uint64(i*per+1) {
			t.Fatalf("the appends start at %v: not one after another", firsts)
		}
	}
	for _, db := range dbs {
		if info, err := db.Info("s"); err != nil || info.Head != writers*each*per {
			t.Fatalf("info: %+v, %v", info, err)
		}
	}
	dbtest.Verify(t, dbs[1])
}

// Many sessions, several DBs over one schema, every writer appending to
// every session in its own order — the group commits cross — and none
// waits for the others forever: the locks are taken in order.
func TestConcurrent_CrossingSessions(t *testing.T) {
	url := pgtest.URL(t)
	const writers, sessions, rounds = 3, 6, 5
	var wg sync.WaitGroup
	for w := range writers {
		db := openDB(t, url, store.Options{Create: true})
		for s := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Writer w visits the sessions in an order of its own.
				id := fmt.Sprintf("s%d", (s*(w+1)+w)%sessions)
				for r := range rounds {
					if _, err := db.Append(id, tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprintf("w%d r%d", w, r)}); err != nil {
						t.Errorf("writer %d %s: %v", w, id, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	db := openDB(t, url, store.Options{})
	total := uint64(0)
	ids, err := db.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		info, err := db.Info(id)
		if err != nil {
			t.Fatal(err)
		}
		total += info.Head
	}
	if total != writers*sessions*rounds {
		t.Fatalf("%d events in all, want %d", total, writers*sessions*rounds)
	}
	dbtest.Verify(t, db)
}

// Two compactors, in two DBs over one schema, plan the same span and
// commit at once: exactly one commits, the other gets ErrConflict (plan
// again), and there is one node and one marker for the span.
func TestConcurrent_CompactorsRace(t *testing.T) {
	url := pgtest.URL(t)
	a := openDB(t, url, store.Options{Create: true})
	b := openDB(t, url, store.Options{})
	for round := range 4 {
		for i := range 3 {
			mustAppend(t, a, "s",
				tier.Event{Kind: tier.KindUser, Text: fmt.Sprintf("round %d step %d", round, i)},
				tier.Event{Kind: tier.KindToolCall, ID: fmt.Sprintf("c%d-%d", round, i), Name: "run"},
				tier.Event{Kind: tier.KindToolResult, ID: fmt.Sprintf("c%d-%d", round, i), Text: "ok"})
		}
		info, err := a.Info("s")
		if err != nil {
			t.Fatal(err)
		}
		plans := make([]*store.Plan, 2)
		for i, db := range []*store.DB{a, b} {
			if plans[i], err = db.PlanSpan("s", info.Head, 4096); err != nil {
				t.Fatal(err)
			}
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, db := range []*store.DB{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := plans[i]
				_, errs[i] = db.Commit(p, store.Summary{Narrative: "both", Claims: p.Required.Claims(), Summarizer: fmt.Sprint("compactor ", i)})
			}()
		}
		wg.Wait()
		ok, conflicts := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, store.ErrConflict):
				conflicts++
			default:
				t.Fatalf("round %d: commit: %v", round, err)
			}
		}
		if ok != 1 || conflicts != 1 {
			t.Fatalf("round %d: %d commits and %d conflicts (%v), want one of each", round, ok, conflicts, errs)
		}
		var markers, nodes int
		err = a.View(func(s *store.Snapshot) error {
			err := s.Markers("s", func(m marker.Marker) error {
				if m.Boundary == info.Head {
					markers++
				}
				return nil
			})
			if err != nil {
				return err
			}
			return s.Nodes("s", func(n tier.Node) error {
				if n.To == info.Head {
					nodes++
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if markers != 1 || nodes != 1 {
			t.Fatalf("round %d: %d markers and %d nodes end at seq %d, want one", round, markers, nodes, info.Head)
		}
	}
	dbtest.Verify(t, b)
}

// The server ends every connection of the store's pool: the next append
// and read reconnect by themselves, and nothing acknowledged is lost.
func TestConcurrent_Reconnects(t *testing.T) {
	// Its own application_name: the other tests' connections stay.
	const name = "strata-reconnects"
	url := pgtest.WithParam(t, pgtest.URL(t), "application_name", name)
	db := openDB(t, url, store.Options{Create: true})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "before"})
	if _, err := db.Info("s"); err != nil {
		t.Fatal(err)
	}
	n := pgtest.QueryInt(t, pgtest.Server(t), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, name)
	if n == 0 {
		t.Fatal("no connection of the store's pool to end")
	}
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindAssistant, Text: "after"})
	if got := storetest.Events(t, db, "s"); len(got) != 2 || got[0].Text != "before" || got[1].Text != "after" {
		t.Fatalf("after the server ended the connections: %v", got)
	}
}

// The server ends every connection of a pool that holds several idle ones:
// the next read reconnects by itself — its first round trip goes to
// another connection, and another, until one is alive — and so does the
// next append.
func TestConcurrent_ReadsReconnect(t *testing.T) {
	const name = "strata-reads-reconnect"
	url := pgtest.WithParam(t, pgtest.URL(t), "application_name", name)
	db := openDB(t, url, store.Options{Create: true})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "before"})
	// Four reads at once: the pool holds four connections after them.
	const readers = 4
	var started, wg sync.WaitGroup
	started.Add(readers)
	for range readers {
		wg.Go(func() {
			err := db.View(func(s *store.Snapshot) error {
				started.Done()
				started.Wait()
				_, err := s.Info("s")
				return err
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	n := pgtest.QueryInt(t, pgtest.Server(t), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, name)
	if n < readers {
		t.Fatalf("%d connections of the pool ended, want %d", n, readers)
	}
	if info, err := db.Info("s"); err != nil || info.Head != 1 {
		t.Fatalf("a read after the server ended the connections: %+v, %v", info, err)
	}
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindAssistant, Text: "after"})
	if got := storetest.Events(t, db, "s"); len(got) != 2 {
		t.Fatalf("after the server ended the connections: %v", got)
	}
}
