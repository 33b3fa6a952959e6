package compaction_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
)

// RunSessions over events stored without compaction — a summarizer that
// did not answer — makes the compactions an agent loop compacting after
// every append makes; it goes on where an earlier call stopped, and a
// second call adds nothing.
func TestRunSessions_CompactsWhatIsStored(t *testing.T) {
	t.Parallel()
	session, events := readIncident(t, "migration.jsonl")
	policy := compaction.Policy{EveryTokens: 200, Fold: 2}

	ref := dbtest.Open(t, store.Options{})
	want := results(agentLoop(t, ref, newCompactor(t, ref, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy}), session, events))
	if len(want) < 3 {
		t.Fatalf("the reference made %d compactions: too few to test with", len(want))
	}

	db := dbtest.Open(t, store.Options{})
	if _, err := db.Append(session, events...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append("other", events[0]); err != nil {
		t.Fatal(err)
	}
	// A summarizer that stops answering after its first summary.
	calls := 0
	down := errors.New("connection refused")
	flaky := summarizerFunc{name: "extractive", fn: func(in *compaction.Input) (compaction.Output, error) {
		if calls++; calls > 1 {
			return compaction.Output{}, down
		}
		return compaction.Extractive{}.Summarize(context.Background(), in)
	}}
	var got []compaction.Result
	collect := func(s string, rs []compaction.Result) {
		if s != session {
			t.Errorf("results of session %q", s)
		}
		got = append(got, rs...)
	}
	err := newCompactor(t, db, compaction.Options{Summarizer: flaky, Policy: policy}).RunSessions(context.Background(), nil, collect)
	if !errors.Is(err, down) || len(got) != 1 {
		t.Fatalf("with the summarizer down: %d results, err %v", len(got), err)
	}
	comp := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
	if err := comp.RunSessions(context.Background(), []string{session}, collect); err != nil {
		t.Fatal(err)
	}
	if g := results(got); g != want {
		t.Errorf("compactions:\n%s\nwant, as an agent loop makes them:\n%s", g, want)
	}
	again := 0
	if err := comp.RunSessions(context.Background(), nil, func(string, []compaction.Result) { again++ }); err != nil || again != 0 {
		t.Errorf("a second run: %d sessions with results, err %v", again, err)
	}
	if err := comp.RunSessions(context.Background(), []string{session, "nope"}, collect); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("an unknown session: %v", err)
	}
	verifyClean(t, db)
}

// results returns where compactions fell and how they ended, a line each.
func results(rs []compaction.Result) string {
	s := ""
	for _, r := range rs {
		s += fmt.Sprintf("%s depth %d seq %d..%d committed %v node %d\n", r.Kind, r.Depth, r.From, r.To, r.Committed(), r.Node)
	}
	return s
}
