package store_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/mutate"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestHandover_CallerEditsChangeNothing compacts the same session into two
// databases — L1 spans, folds of two and digests — committing in each the
// summary a caller makes from its plan (the plan's required facts as
// claims). In the second, before each commit, the caller edits in place
// every value of the plan's required facts, events and children (every
// element of every list, every field of every element: internal/mutate),
// and after it the node the commit returned; after each resume it edits
// the context it got. Every commit must be the same in both — the nodes
// with their claims, the resumed contexts — and each database verify
// (dbtest.Open): what the store validates against, commits and serves is
// its own copy. On PostgreSQL too (STRATA_TEST_BACKEND=postgres).
func TestHandover_CallerEditsChangeNothing(t *testing.T) {
	honest := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	edited := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	kinds := map[store.PlanKind]int{}
	edits := 0
	commit := func(db *store.DB, p *store.Plan, edit bool) *tier.Node {
		t.Helper()
		sum := store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}
		if edit {
			edits += mutate.Edit(&p.Required) + mutate.Edit(&p.Events)
			for i := range p.Children {
				edits += mutate.Edit(&p.Children[i].Claims) + mutate.Edit(&p.Children[i].Narrative)
			}
		}
		res, err := db.Commit(p, sum)
		if err != nil {
			t.Fatalf("commit %s %d..%d (edited %v): %v", p.Kind, p.From, p.To, edit, err)
		}
		n := res.Node.Clone()
		if edit {
			edits += mutate.Edit(res.Node)
		}
		return &n
	}
	policy := compaction.Policy{EveryEvents: 4, Fold: 2, MaxRoots: 3, Budget: 1000}
	step := func(plan func(*store.DB) (*store.Plan, error)) bool {
		t.Helper()
		var nodes [2]*tier.Node
		for i, db := range []*store.DB{honest, edited} {
			p, err := plan(db)
			if errors.Is(err, store.ErrNothingToCompact) {
				if i == 1 {
					t.Fatal("the edited database has nothing to compact where the other had")
				}
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			kinds[p.Kind]++
			nodes[i] = commit(db, p, i == 1)
		}
		if !reflect.DeepEqual(nodes[0], nodes[1]) {
			t.Fatalf("the commit after the caller's edits differs:\n got %+v\nwant %+v", nodes[1], nodes[0])
		}
		return true
	}
	for i := 0; i < 40; i++ {
		for _, db := range []*store.DB{honest, edited} {
			mustAppend(t, db, "s", digestTurn(i)...)
		}
		for step(func(db *store.DB) (*store.Plan, error) { return policy.PlanSpan(db, "s") }) {
			for step(func(db *store.DB) (*store.Plan, error) { return policy.PlanFold(db, "s") }) {
			}
			for step(func(db *store.DB) (*store.Plan, error) { return policy.PlanDigest(db, "s") }) {
			}
		}
		want, err := honest.Resume("s", store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		got, err := edited.Resume("s", store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		edits += mutate.Edit(got)
		again, err := edited.Resume("s", store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Text(), want.Text()) {
			t.Fatalf("turn %d: the context resumed after the caller's edits differs:\n%s\nwant\n%s", i, again.Text(), want.Text())
		}
	}
	// Both databases count: two of each at least.
	for _, k := range []store.PlanKind{store.PlanSpan, store.PlanFold, store.PlanDigest} {
		if kinds[k] < 4 {
			t.Errorf("%d %s commits: the test does not exercise them", kinds[k]/2, k)
		}
	}
	if edits < 1000 {
		t.Errorf("%d values edited: the test edits too little", edits)
	}
}
