package store_test

import (
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_PlanChildrenAreChecked: a re-compaction plan of root 1 whose
// Children names root 3 is a conflict: committed, it would set root 3's
// Parent while root 3 stays in the frame, and the database would fail
// Verify.
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

// TestCommit_PlanShapeIsChecked: a plan built or edited by hand must name
// as many roots as its kind takes, and the children its node will have;
// else it is a conflict and nothing is written.
func TestCommit_PlanShapeIsChecked(t *testing.T) {
	for name, edit := range map[string]func(t *testing.T, db *store.DB) *store.Plan{
		"a digest of three roots": func(t *testing.T, db *store.DB) *store.Plan {
			p := mustPlan(t)(compaction.Policy{MaxRoots: 1, Budget: 1000}.PlanDigest(db, "s"))
			r := mustRoots(t, db, "s")
			p.Replaces, p.Children, p.To = []uint64{r[0].ID, r[1].ID, r[2].ID}, r[:3], r[2].To
			return p
		},
		"a re-compaction of two roots": func(t *testing.T, db *store.DB) *store.Plan {
			r := mustRoots(t, db, "s")
			p := mustPlan(t)(db.PlanRecompact("s", r[0].ID, 1000))
			p.Replaces, p.To = []uint64{r[0].ID, r[1].ID}, r[1].To
			return p
		},
		"a fold of one root": func(t *testing.T, db *store.DB) *store.Plan {
			p := mustPlan(t)(compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s"))
			p.Replaces, p.Children, p.To = p.Replaces[:1], p.Children[:1], p.Children[0].To
			return p
		},
		"a span naming a child": func(t *testing.T, db *store.DB) *store.Plan {
			mustAppend(t, db, "s", digestTurn(4)...)
			p := mustPlan(t)(compaction.Policy{EveryEvents: 4, Budget: 1000}.PlanSpan(db, "s"))
			p.Children = mustRoots(t, db, "s")[:1]
			return p
		},
		"a fold whose children are swapped": func(t *testing.T, db *store.DB) *store.Plan {
			p := mustPlan(t)(compaction.Policy{Fold: 2, Budget: 1000}.PlanFold(db, "s"))
			p.Children[0], p.Children[1] = p.Children[1], p.Children[0]
			return p
		},
	} {
		t.Run(name, func(t *testing.T) {
			db := digestFixture(t, 4)
			before := mustRoots(t, db, "s")
			p := edit(t, db)
			if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); !errors.Is(err, store.ErrConflict) {
				t.Errorf("Commit = %v, want ErrConflict", err)
			}
			if after := mustRoots(t, db, "s"); len(after) != len(before) {
				t.Errorf("%d roots after the refused plan, %d before", len(after), len(before))
			}
			mustVerify(t, db)
		})
	}
}

// mustPlan fails t on a planning error.
func mustPlan(t *testing.T) func(p *store.Plan, err error) *store.Plan {
	return func(p *store.Plan, err error) *store.Plan {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}
