package postgres_test

import (
	"testing"

	"github.com/strata-go/strata/backend/postgres"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestRoundTrips counts the round trips the store's operations make on
// PostgreSQL: what each costs in latency, however fast the server. The
// store reads ahead what it knows a transaction will read
// (backend.Prefetcher); a read it makes that the read-ahead does not name
// costs a round trip of its own, and shows here as one more.
func TestRoundTrips(t *testing.T) {
	be, err := postgres.Open(pgtest.URL(t), postgres.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.New(be, store.Options{})
	if err != nil {
		be.Close()
		t.Fatal(err)
	}
	defer db.Close()
	count := func(what string, want int64, fn func() error) {
		t.Helper()
		before := be.RoundTrips()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := be.RoundTrips() - before; got != want {
			t.Errorf("%s: %d round trips, want %d", what, got, want)
		}
	}
	appendTo := func(events ...tier.Event) func() error {
		return func() error {
			_, err := db.Append("s", events...)
			return err
		}
	}

	// An append is two: the BEGIN with the session's lock and every read
	// (its row, the ledger entries its events touch), then every write
	// with the COMMIT.
	count("the append that makes the session", 2, appendTo(
		tier.Event{Kind: tier.KindUser, Text: "build it"},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "make"},
		tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "too slow"},
		tier.Event{Kind: tier.KindConstraint, Key: "no-network", Text: "stay offline"},
	))
	count("an append touching every ledger table", 2, appendTo(
		tier.Event{Kind: tier.KindToolResult, ID: "c1", Key: "build", Failed: true, Text: "error"},
		tier.Event{Kind: tier.KindSuperseded, Key: "approach/x", By: "approach/y", Text: "y instead"},
		tier.Event{Kind: tier.KindWithdrawn, Key: "no-network"},
		tier.Event{Kind: tier.KindArtifact, Key: "out/app", Text: "the binary"},
		tier.Event{Kind: tier.KindToolCall, ID: "c2", Name: "bash", Text: "make"},
	))
	// A keyed result that succeeds after a failure takes the failure's
	// seq from the disposition's record, which the event it names must
	// confirm before the seq goes into the raw log: one more.
	count("an append of a result after a failure", 3, appendTo(
		tier.Event{Kind: tier.KindToolResult, ID: "c2", Key: "build", Text: "ok"},
		tier.Event{Kind: tier.KindAssistant, Text: "built"},
	))

	// A span's plan reads the session, then the span with the
	// root before it, then that root's node (store's spanReads says why
	// by itself); a read transaction ends with a ROLLBACK of its own. A
	// commit is two, as an append is: its lock and everything it checks,
	// then its writes with the COMMIT.
	var markers []uint64
	for i, to := range []uint64{9, 11, 13} {
		plan := int64(4)
		if i == 0 {
			plan = 3 // no root before the span
		} else {
			count("an append", 2, appendTo(
				tier.Event{Kind: tier.KindUser, Text: "more"},
				tier.Event{Kind: tier.KindAssistant, Text: "done"}))
		}
		var p *store.Plan
		count("a plan", plan, func() (err error) {
			p, err = db.PlanSpan("s", to, 4000)
			return err
		})
		count("its commit", 2, func() error {
			res, err := db.Commit(p, store.Summary{Narrative: "so far", Claims: p.Required.Claims(), Summarizer: "test"})
			markers = append(markers, res.Marker)
			return err
		})
	}

	// Resume is three, with three roots as with one: the session and its
	// roots, then the marker, every root's node and the raw tail, then the
	// ROLLBACK (while the roots and the tail fit the first pages read
	// ahead: 32 roots, 256 events).
	count("resume latest of three roots", 3, func() error {
		_, err := db.Resume("s", store.Latest)
		return err
	})
	count("resume of the first marker", 3, func() error {
		_, err := db.Resume("s", markers[0])
		return err
	})

	var fold *store.Plan
	count("a fold's plan", 3, func() (err error) {
		fold, err = db.PlanFold("s", markers[0], 3, 4000)
		return err
	})
	// A fold's commit makes the checkpoints inside its span unusable,
	// read by the ids the checkpoint index gives: one round trip more.
	count("the fold's commit", 3, func() error {
		_, err := db.Commit(fold, store.Summary{Narrative: "all of it", Claims: fold.Required.Claims(), Summarizer: "test"})
		return err
	})
	count("resume latest of one root", 3, func() error {
		_, err := db.Resume("s", store.Latest)
		return err
	})

	count("an append", 2, appendTo(tier.Event{Kind: tier.KindUser, Text: "next"}))
	for _, plan := range []struct {
		what         string
		fn           func() (*store.Plan, error)
		plan, commit int64 // a commit that replaces roots reads their checkpoints: 3
	}{
		{"a plan after the fold", func() (*store.Plan, error) { return db.PlanSpan("s", 14, 4000) }, 4, 2},
		{"a digest's plan", func() (*store.Plan, error) { return db.PlanDigest("s", 4000) }, 3, 3},
	} {
		var p *store.Plan
		count(plan.what, plan.plan, func() (err error) {
			p, err = plan.fn()
			return err
		})
		count("its commit", plan.commit, func() error {
			_, err := db.Commit(p, store.Summary{Narrative: "so far", Claims: p.Required.Claims(), Summarizer: "test"})
			return err
		})
	}
}
