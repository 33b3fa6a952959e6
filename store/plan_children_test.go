package store_test

import (
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_PlanChildrenAreChecked: a re-compaction plan of root 1 whose
// Children names root 3 is a conflict. (Commit once took a plan's Children
// as they were: it set root 3's Parent while root 3 stayed in the frame,
// and the database failed Verify. Found by a second reading.)
func TestCommit_PlanChildrenAreChecked(t *testing.T) {
	db := digestFixture(t, 4)
	roots := mustRoots(t, db, "s")
	p, err := db.PlanRecompact("s", roots[0].ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	p.Children = []tier.Node{roots[2]}
	if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Commit of a plan with another root as its child = %v, want ErrConflict", err)
	}
	rep, _ := db.Verify(store.VerifyOptions{})
	if len(rep.Problems) > 0 {
		t.Errorf("a hand-built plan's Children committed and broke the frame: %v", rep.Problems)
	}
}
