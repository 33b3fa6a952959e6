package store_test

import (
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_FailureOpenedBeforeSpanHasTarget: a call opened in one node's
// span and failed in the next keeps its target — the command of its
// input — in the later node's failure, and in the state `resume --budget`
// fits: the open call's target is carried across the boundary in the
// facts the earlier node records (what the span after it starts on).
func TestCommit_FailureOpenedBeforeSpanHasTarget(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "run the tests"},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "Bash", Text: `{"command":"go test ./..."}`})
	pol := compaction.Policy{EveryEvents: 2, Budget: 1000}
	p, err := pol.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindToolResult, ID: "c1", Failed: true, Text: "FAIL"},
		tier.Event{Kind: tier.KindAssistant, Text: "it failed"})
	p, err = pol.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	if p.From != 3 || len(p.Required.Failures) != 1 || p.Required.Failures[0].Target != "go test ./..." {
		t.Fatalf("span %d..%d: failures %+v, want c1's with its target", p.From, p.To, p.Required.Failures)
	}
	res, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Node.Claims.Failures; len(f) != 1 || f[0].Target != "go test ./..." {
		t.Errorf("the committed node's failures: %+v", f)
	}
	var st tier.Claims
	if err := db.View(func(s *store.Snapshot) error {
		x, err := s.StateAt("s", 4)
		st = x.Claims
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(st.Failures) != 1 || st.Failures[0].Target != "go test ./..." {
		t.Errorf("StateAt: failures %+v", st.Failures)
	}
}
