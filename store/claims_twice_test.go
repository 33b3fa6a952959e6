package store_test

import (
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_ContradictoryClaimsForOneKey: claims that give one key two
// dispositions, the wrong one first, are refused: the right claim last
// does not hide the wrong one (Normalize drops exact duplicates only).
func TestCommit_ContradictoryClaimsForOneKey(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "go"}, tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"})
	p, err := compaction.Policy{EveryEvents: 2, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Required.Claims()
	wrong := c.Dispositions[0]
	wrong.State = tier.KindSuperseded
	wrong.By = "approach/y"
	c.Dispositions = append([]tier.Disposition{wrong}, c.Dispositions...)
	res, err := db.Commit(p, store.Summary{Narrative: "n", Claims: c, Summarizer: "t"})
	if err == nil {
		t.Errorf("node %d committed VALID claiming %v", res.Node.ID, res.Node.Claims.Dispositions)
	}
}
