package store_test

import (
	"errors"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_FoldOfMixedDepths: a hand-built fold over roots of two depths
// (L2 1..8, L1 9..12) is a conflict: a fold takes roots of one depth, and
// the database still verifies.
func TestCommit_FoldOfMixedDepths(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	for i := 0; i < 6; i++ {
		mustAppend(t, db, "s", digestTurn(i)...)
	}
	p12, err := compaction.Policy{EveryEvents: 12, Budget: 1000}.PlanSpan(db, "s")
	if err != nil || p12.To != 12 {
		t.Fatal(err, p12)
	}
	compactHonestly(t, db, "s", 100)
	pf, err := compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(pf, store.Summary{Narrative: "n", Claims: pf.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatal(err)
	}
	roots := mustRoots(t, db, "s")
	a, r2 := roots[0], roots[1]
	if a.Depth != 2 || r2.Depth != 1 || r2.To != 12 {
		t.Fatalf("fixture: %+v %+v", a, r2)
	}
	cur, err := compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	p := *p12
	p.Kind = store.PlanFold
	p.Depth = 3
	p.Replaces = []uint64{a.ID, r2.ID}
	p.Children = []tier.Node{a, r2}
	p.FrameVersion = cur.FrameVersion
	if _, err := db.Commit(&p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a fold over depths [2 1] = %v, want ErrConflict", err)
	}
	mustVerify(t, db)
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
