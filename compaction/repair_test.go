package compaction_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCompactor_Run_Repair: with Options.Repair a summarizer that keeps
// dropping the rejection and the artifact still gets a valid marker after
// its refused attempts, whose audit records stay; the Result names the
// refusal it repairs and what the summarizer missed.
func TestCompactor_Run_Repair(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	events = append(slices.Clone(events[:23]), tier.Event{Kind: tier.KindUser, Text: "next"})
	// The lossy summarizer drops the rejection and the failed dry run (c5, opened at seq 17), and the artifact.
	wantMissing := []string{"retention:" + keyApproach, "retention:c5@17", "artifact:" + keyDown}

	for _, retries := range []int{0, 2} {
		t.Run(fmt.Sprintf("Retries=%d", retries), func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true})
			lossy := mustLossy(t, compaction.DropNegatives, compaction.DropArtifacts)
			c := newCompactor(t, db, compaction.Options{Summarizer: lossy, Retries: retries, Repair: true,
				Policy: compaction.Policy{EveryTurns: 4}})
			results := agentLoop(t, db, c, session, events)
			if len(results) != 1 {
				t.Fatalf("results %+v", results)
			}
			r := results[0]
			if !r.Committed() || r.Refused != nil || r.Attempts != retries+1 || r.From != 1 || r.To != 23 {
				t.Fatalf("result %+v, want seq 1..23 committed after %d refused attempts", r, retries+1)
			}
			audit := refusals(t, db, session)
			if len(audit) != retries+1 {
				t.Fatalf("audit %+v, want every refused attempt", audit)
			}
			for i, a := range audit {
				if a.Attempt != i || a.Summarizer != "lossy" || !slices.Equal(failureStrings(a.Failures), wantMissing) {
					t.Errorf("audit record %d: %+v", i, a)
				}
			}
			last := audit[len(audit)-1]
			if r.Repaired != last.ID || !slices.Equal(failureStrings(r.Missed), wantMissing) {
				t.Errorf("Repaired %d, Missed %v; want the last refusal %d and %v", r.Repaired, failureStrings(r.Missed), last.ID, wantMissing)
			}

			n := node(t, db, session, r.Node)
			if n.Summarizer != "lossy" {
				t.Errorf("node summarizer %q", n.Summarizer)
			}
			if !slices.ContainsFunc(n.Claims.Dispositions, func(d tier.Disposition) bool { return d.Key == keyApproach && d.State == tier.KindRejected }) ||
				!slices.ContainsFunc(n.Claims.Artifacts, func(a tier.Artifact) bool { return a.Key == keyDown }) {
				t.Errorf("the repaired node lacks the claims from raw: %+v", n.Claims)
			}
			// The summarizer's narrative is kept: Lossy mentions what it
			// dropped in passing.
			if !strings.HasPrefix(n.Narrative, "Explored approaches: "+keyApproach) {
				t.Errorf("narrative %q, want the summarizer's", n.Narrative)
			}
			if checkValidMarkers(t, db, session) != 1 {
				t.Error("want one valid marker")
			}
			ctx := resume(t, db, session, store.Latest)
			if ctx.Source != checkpoint.SourceMarker || ctx.Boundary != 23 {
				t.Errorf("Resume(latest): source %s, boundary %d; want the repaired node's marker", ctx.Source, ctx.Boundary)
			}
			checkContextHoldsFacts(t, db, session, ctx)
			verifyClean(t, db)
		})
	}
}

// TestCompactor_Run_RepairOff: without Options.Repair the refusal stands.
func TestCompactor_Run_RepairOff(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	events = append(slices.Clone(events[:23]), tier.Event{Kind: tier.KindUser, Text: "next"})
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := newCompactor(t, db, compaction.Options{Summarizer: mustLossy(t, compaction.DropNegatives), Retries: 1,
		Policy: compaction.Policy{EveryTurns: 4}})
	results := agentLoop(t, db, c, session, events)
	if len(results) != 1 || results[0].Committed() || results[0].Repaired != 0 || results[0].Missed != nil {
		t.Fatalf("results %+v, want one refusal", results)
	}
	if ms := markers(t, db, session); len(ms) != 0 {
		t.Errorf("markers %+v", ms)
	}
}

// TestCompactor_Run_RepairUnusableOutput: an answer that is no summary at
// all is repaired with an extractive narrative and the claims from raw.
func TestCompactor_Run_RepairUnusableOutput(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	events = append(slices.Clone(events[:23]), tier.Event{Kind: tier.KindUser, Text: "next"})
	db := dbtest.Open(t, store.Options{NoSync: true})
	garbled := summarizerFunc{name: "garbled", fn: func(*compaction.Input) (compaction.Output, error) {
		return compaction.Output{}, compaction.UnusableOutput("invalid_json", errors.New("model: not JSON"))
	}}
	c := newCompactor(t, db, compaction.Options{Summarizer: garbled, Retries: 1, Repair: true,
		Policy: compaction.Policy{EveryTurns: 4}})
	results := agentLoop(t, db, c, session, events)
	if len(results) != 1 || !results[0].Committed() || results[0].Attempts != 2 {
		t.Fatalf("results %+v, want one repaired compaction after 2 attempts", results)
	}
	r := results[0]
	audit := refusals(t, db, session)
	if len(audit) != 2 || r.Repaired != audit[1].ID || !slices.Equal(failureStrings(r.Missed), []string{"output:invalid_json"}) {
		t.Fatalf("audit %+v, result %+v", audit, r)
	}
	n := node(t, db, session, r.Node)
	span := allEvents(t, db, session)[:23]
	req, err := tier.ComputeRequired(nil, span)
	if err != nil {
		t.Fatal(err)
	}
	in := &compaction.Input{Session: session, Depth: 1, From: 1, To: 23, Budget: compaction.DefaultBudget, Events: span, Required: req}
	want, err := compaction.Extractive{}.Summarize(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if n.Narrative == "" || n.Narrative != want.Narrative || n.Summarizer != "garbled" {
		t.Errorf("node by %q, narrative %q; want Extractive's %q", n.Summarizer, n.Narrative, want.Narrative)
	}
	checkValidMarkers(t, db, session)
	checkContextHoldsFacts(t, db, session, resume(t, db, session, store.Latest))
	verifyClean(t, db)
}
