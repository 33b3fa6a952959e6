package store_test

import (
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_RetriedFoldKeepsDigests: a fold refused once and accepted on
// retry (compaction.Options.Retries) lifts the refusal: digests go on, and
// the frame keeps its bound for the rest of the session.
func TestCommit_RetriedFoldKeepsDigests(t *testing.T) {
	for _, refuseFirst := range []bool{false, true} {
		db := digestFixture(t, 6)
		honest := func(p *store.Plan) {
			t.Helper()
			if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
				t.Fatal(err)
			}
		}
		p, err := compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s") // roots 0 and 1
		if err != nil {
			t.Fatal(err)
		}
		honest(p)
		p, err = compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s") // roots 2 and 3 (L1)
		if err != nil {
			t.Fatal(err)
		}
		if refuseFirst {
			if _, err := db.Commit(p, store.Summary{Narrative: "lossy", Summarizer: "t"}); err == nil {
				t.Fatal("the lossy fold was accepted")
			}
		}
		honest(p) // the retry
		n := len(mustRoots(t, db, "s"))
		_, err = compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
		if errors.Is(err, store.ErrNothingToCompact) {
			t.Errorf("refused first=%v: %d roots, MaxRoots 2, no digest refused, PlanDigest = %v", refuseFirst, n, err)
		} else if err != nil {
			t.Fatal(err)
		}
		// And later: many more turns, still no digest.
		for i := 6; i < 30; i++ {
			mustAppend(t, db, "s", digestTurn(i)...)
		}
		compactHonestly(t, db, "s", 2)
		if n := len(mustRoots(t, db, "s")); n > 2 {
			t.Errorf("refused first=%v: %d roots after 30 turns with MaxRoots 2", refuseFirst, n)
		}
	}
}

// TestCommit_RefusalReadsTheRawSpan: a refusal records the turn of the
// span's last event from the raw log, never from the caller's p.Events: a
// plan whose Events were emptied is refused like any other, not reported as
// damage (the first version indexed p.Events and panicked).
func TestCommit_RefusalReadsTheRawSpan(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "go"},
		tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
		tier.Event{Kind: tier.KindUser, Text: "again"},
	)
	p, err := compaction.Policy{EveryEvents: 3, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	p.Events = nil
	_, err = db.Commit(p, store.Summary{Narrative: "forgets the rejection", Summarizer: "test"})
	var ie *marker.InvalidError
	if !errors.As(err, &ie) || ie.Failures[0].String() != "retention:approach/x" {
		t.Fatalf("Commit = %v, want refused for retention:approach/x", err)
	}
}

// TestCommit_RetryKeepsAnEarlierRefusal: a fold refused, then another
// refused and accepted on retry: the first stays refused — the policy does
// not ask for it again.
func TestCommit_RetryKeepsAnEarlierRefusal(t *testing.T) {
	db := digestFixture(t, 6) // 6 L1 roots
	lossy := store.Summary{Narrative: "lossy", Summarizer: "t"}
	p1, err := compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s") // roots 0,1
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p1, lossy); err == nil {
		t.Fatal("lossy accepted")
	}
	p2, err := compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s") // roots 2,3
	if err != nil {
		t.Fatal(err)
	}
	if p2.From <= p1.To {
		t.Fatalf("fixture: %d..%d after %d..%d", p2.From, p2.To, p1.From, p1.To)
	}
	if _, err := db.Commit(p2, lossy); err == nil {
		t.Fatal("lossy accepted")
	}
	if _, err := db.Commit(p2, store.Summary{Narrative: "n", Claims: p2.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatal(err)
	}
	p3, err := compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s")
	if errors.Is(err, store.ErrNothingToCompact) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if p3.From <= p1.To {
		t.Errorf("the fold refused first (%d..%d) is planned again (%d..%d): the retry's lift forgot it", p1.From, p1.To, p3.From, p3.To)
	}
}

// TestRefuse_Recorded runs testdata/protocol/refuse: a refused span or
// fold is recorded with its failures and a checkpoint in place of its
// marker, and the honest retry of the same span is valid.
func TestRefuse_Recorded(t *testing.T) { runProtocol(t, "refuse") }
