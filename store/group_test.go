package store_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-go/strata/tier"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
)

// groupFixture is a database with session "s" of three events and a plan
// of all three, ready to commit.
func groupFixture(t *testing.T) (*store.DB, *store.Plan, store.Summary) {
	t.Helper()
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "go"},
		tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
		tier.Event{Kind: tier.KindUser, Text: "again"},
	)
	p, err := compaction.Policy{EveryEvents: 3, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	return db, p, store.Summary{Narrative: "x rejected", Claims: p.Required.Claims(), Summarizer: "test"}
}

// countCommits counts the write transactions that reach bbolt's commit.
func countCommits(t *testing.T) *int {
	n := new(int)
	t.Cleanup(store.SetTestHook(func(step string) error {
		if step == "commit" {
			*n++
		}
		return nil
	}))
	return n
}

// TestGroupCommit_CommitSharesTheAppendsTransaction: a compaction's commit
// waiting with appends is written in their transaction, in order, and each
// write gets its own result.
func TestGroupCommit_CommitSharesTheAppendsTransaction(t *testing.T) {
	db, p, sum := groupFixture(t)
	commits := countCommits(t)
	rs := store.WriteGroup(db,
		store.GroupWrite{Session: "a", Events: []tier.Event{ev("a1")}},
		store.GroupWrite{Plan: p, Summary: sum},
		store.GroupWrite{Session: "s", Events: []tier.Event{ev("s4")}},
	)
	for i, r := range rs {
		if r.Err != nil {
			t.Fatalf("write %d: %v", i, r.Err)
		}
	}
	if *commits != 1 {
		t.Errorf("%d transactions committed, want 1", *commits)
	}
	if rs[1].Commit.Node == nil || rs[1].Commit.Marker == 0 {
		t.Errorf("commit result %+v, want a node and a marker", rs[1].Commit)
	}
	if rs[2].Append.First != 4 {
		t.Errorf("append after the commit got seq %d, want 4", rs[2].Append.First)
	}
	if got := state(t, db, "a"); len(got.Events) != 1 {
		t.Errorf("session a holds %d events, want 1", len(got.Events))
	}
	roots := mustRoots(t, db, "s")
	if len(roots) != 1 || roots[0].From != 1 || roots[0].To != 3 {
		t.Errorf("roots %v, want one node over 1..3", roots)
	}
	mustVerify(t, db)
}

// TestGroupCommit_RefusedWritesFailAlone: a commit whose plan is stale and
// an append the ledger refuses fail alone; the writes around them commit.
// A batch in which every write was refused commits nothing at all.
func TestGroupCommit_RefusedWritesFailAlone(t *testing.T) {
	db, p, sum := groupFixture(t)
	if _, err := db.Commit(p, sum); err != nil {
		t.Fatal(err)
	}
	stale := p // its span is now covered: a conflict
	bad := tier.Event{Kind: tier.KindToolResult, ID: "nope", Text: "?", Time: t0.UnixNano()}
	commits := countCommits(t)
	rs := store.WriteGroup(db,
		store.GroupWrite{Plan: stale, Summary: sum},
		store.GroupWrite{Session: "a", Events: []tier.Event{ev("a1")}},
		store.GroupWrite{Session: "b", Events: []tier.Event{bad}},
	)
	if !errors.Is(rs[0].Err, store.ErrConflict) {
		t.Errorf("stale commit: %v, want ErrConflict", rs[0].Err)
	}
	if rs[1].Err != nil {
		t.Errorf("append beside refused writes: %v", rs[1].Err)
	}
	var ee *tier.EventError
	if !errors.As(rs[2].Err, &ee) {
		t.Errorf("bad append: %v, want *tier.EventError", rs[2].Err)
	}
	if *commits != 1 {
		t.Errorf("%d transactions committed, want 1", *commits)
	}
	if st := state(t, db, "b"); st.Exists {
		t.Error("session b exists: its refused append was stored")
	}

	*commits = 0
	rs = store.WriteGroup(db,
		store.GroupWrite{Plan: stale, Summary: sum},
		store.GroupWrite{Session: "b", Events: []tier.Event{bad}},
	)
	if rs[0].Err == nil || rs[1].Err == nil {
		t.Fatalf("writes that must be refused: %v, %v", rs[0].Err, rs[1].Err)
	}
	if *commits != 0 {
		t.Errorf("a batch of refused writes committed %d transactions, want 0", *commits)
	}
	mustVerify(t, db)
}

// TestGroupCommit_FailedWriteFailsAlone: a commit that fails while writing
// (here encoding its node) rolls its transaction back and fails alone: the
// appends beside it in the batch are committed without it, and its
// session's frame is as it was. So does an append that fails while
// writing its events.
func TestGroupCommit_FailedWriteFailsAlone(t *testing.T) {
	db, p, sum := groupFixture(t)
	boom := fmt.Errorf("injected")
	events := -1 // counting from the second batch
	defer store.SetTestHook(func(step string) error {
		switch step {
		case "encode:node":
			return boom
		case "encode:event":
			if events >= 0 {
				events++
			}
			if events == 3 { // the third append's, once
				return boom
			}
		}
		return nil
	})()
	rs := store.WriteGroup(db,
		store.GroupWrite{Session: "a", Events: []tier.Event{ev("a1")}},
		store.GroupWrite{Plan: p, Summary: sum},
		store.GroupWrite{Session: "s", Events: []tier.Event{ev("s4")}},
	)
	if !errors.Is(rs[1].Err, boom) {
		t.Errorf("the failing commit: %v, want the injected failure", rs[1].Err)
	}
	for _, i := range []int{0, 2} {
		if rs[i].Err != nil {
			t.Errorf("append %d beside the failing commit: %v", i, rs[i].Err)
		}
	}
	if got := state(t, db, "a"); len(got.Events) != 1 {
		t.Errorf("session a holds %d events, want 1", len(got.Events))
	}
	if got := state(t, db, "s"); len(got.Events) != 4 {
		t.Errorf("session s holds %d events, want 4", len(got.Events))
	}
	if roots := mustRoots(t, db, "s"); len(roots) != 0 {
		t.Errorf("roots %v after the failed commit, want none", roots)
	}

	events = 0
	rs = store.WriteGroup(db,
		store.GroupWrite{Session: "a", Events: []tier.Event{ev("a2")}},
		store.GroupWrite{Session: "b", Events: []tier.Event{ev("b1")}},
		store.GroupWrite{Session: "c", Events: []tier.Event{ev("c1")}},
	)
	// Encoded in order a, b, c: the third encode is c's.
	if !errors.Is(rs[2].Err, boom) || rs[0].Err != nil || rs[1].Err != nil {
		t.Errorf("appends a, b, c: %v, %v, %v; want only c's to fail", rs[0].Err, rs[1].Err, rs[2].Err)
	}
	if st := state(t, db, "c"); st.Exists {
		t.Error("session c exists: its failed append was stored")
	}
	if got := state(t, db, "b"); len(got.Events) != 1 {
		t.Errorf("session b holds %d events, want 1", len(got.Events))
	}
	mustVerify(t, db)
}

// TestGroupCommit_CommitWaitsForTheNextAppend: a compaction's commit made
// while an append is in flight waits (Options.CommitWait) for the
// appending goroutine's next append, and the two share one transaction:
// three writes, two commits. With CommitWait off, the commit does not wait
// for an append that never comes; nor does a commit made while no append
// is in flight.
func TestGroupCommit_CommitWaitsForTheNextAppend(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wait       time.Duration
		inFlight   bool // the commit is made while an append commits
		nextAppend bool // the appending goroutine appends again
	}{
		{"waits", time.Minute, true, true},
		{"off", -1, true, false},
		{"no append in flight", time.Minute, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock(), CommitWait: tc.wait})
			mustAppend(t, db, "s",
				tier.Event{Kind: tier.KindUser, Text: "go"},
				tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
			)
			p, err := compaction.Policy{EveryEvents: 2, Budget: 1000}.PlanSpan(db, "s")
			if err != nil {
				t.Fatal(err)
			}
			sum := store.Summary{Narrative: "x rejected", Claims: p.Required.Claims(), Summarizer: "test"}

			inFirst := make(chan struct{})   // the first append is committing
			release := make(chan struct{})   // let it commit
			queued := make(chan struct{}, 4) // a write was handed to the committer
			lingering := make(chan struct{}, 1)
			var commits atomic.Int32
			first := true
			defer store.SetTestHook(func(step string) error {
				switch step {
				case "commit":
					commits.Add(1)
					if first && tc.inFlight {
						first = false
						close(inFirst)
						<-release
					}
				case "queued":
					queued <- struct{}{}
				case "linger":
					lingering <- struct{}{}
				}
				return nil
			})()

			appended := make(chan error, 1)
			if tc.inFlight {
				go func() {
					_, err := db.Append("a", tier.Event{Kind: tier.KindUser, Text: "1"})
					appended <- err
				}()
				<-inFirst
			}
			committed := make(chan error, 1)
			go func() {
				_, err := db.Commit(p, sum)
				committed <- err
			}()
			if tc.inFlight {
				<-queued // the commit waits behind the append in flight
				close(release)
				if err := <-appended; err != nil {
					t.Fatal(err)
				}
			}
			if tc.nextAppend {
				// The appending goroutine comes back once the commit
				// waits for it; a commit that goes alone fails the test.
				select {
				case <-lingering:
					mustAppend(t, db, "a", tier.Event{Kind: tier.KindUser, Text: "2"})
				case err := <-committed:
					t.Fatalf("the commit went alone (%v), want it to wait for the next append", err)
				}
			}
			if err := <-committed; err != nil {
				t.Fatal(err)
			}
			if !tc.nextAppend && len(lingering) > 0 {
				t.Error("the commit waited for an append that never came")
			}
			want := int32(1) // the commit alone
			switch {
			case tc.nextAppend:
				want = 2 // the first append; the commit with the second
			case tc.inFlight:
				want = 2 // the append; the commit
			}
			if got := commits.Load(); got != want {
				t.Errorf("%d transactions, want %d", got, want)
			}
			if roots := mustRoots(t, db, "s"); len(roots) != 1 {
				t.Errorf("roots %v, want one", roots)
			}
		})
	}
}

// TestGroupCommit_CommitWaitsAfterARecentAppendOncePipelined: once commits
// and appends have met in a batch (a pipeline), a commit made within
// CommitWait of the last append waits for the next append though none is
// in flight; after a wait that found none, such a commit does not wait.
func TestGroupCommit_CommitWaitsAfterARecentAppendOncePipelined(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pipeline bool // an append and a commit met in a batch just before
		lingers  bool
	}{{"after a pipeline", true, true}, {"without one", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock(), CommitWait: time.Minute})
			mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "go"}, tier.Event{Kind: tier.KindUser, Text: "on"})
			p1, err := compaction.Policy{EveryEvents: 1, Budget: 1000}.PlanSpan(db, "s")
			if err != nil {
				t.Fatal(err)
			}
			sum := func(p *store.Plan) store.Summary {
				return store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "test"}
			}
			if tc.pipeline {
				rs := store.WriteGroup(db, store.GroupWrite{Plan: p1, Summary: sum(p1)}, store.GroupWrite{Session: "a", Events: []tier.Event{ev("a1")}})
				for _, r := range rs {
					if r.Err != nil {
						t.Fatal(r.Err)
					}
				}
			} else {
				if _, err := db.Commit(p1, sum(p1)); err != nil {
					t.Fatal(err)
				}
				mustAppend(t, db, "a", ev("a1"))
			}
			p2, err := compaction.Policy{EveryEvents: 1, Budget: 1000}.PlanSpan(db, "s")
			if err != nil {
				t.Fatal(err)
			}
			lingered := make(chan struct{}, 1)
			defer store.SetTestHook(func(step string) error {
				if step == "linger" {
					lingered <- struct{}{}
				}
				return nil
			})()
			committed := make(chan error, 1)
			go func() {
				_, err := db.Commit(p2, sum(p2))
				committed <- err
			}()
			select {
			case <-lingered:
				if !tc.lingers {
					t.Fatal("the commit waits for an append")
				}
				mustAppend(t, db, "a", ev("a2")) // its company
			case err := <-committed:
				if tc.lingers {
					t.Fatalf("the commit went alone (%v), want it to wait for the next append", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err := <-committed; err != nil {
				t.Fatal(err)
			}
		})
	}
}
