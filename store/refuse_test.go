package store_test

import (
	"errors"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
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
