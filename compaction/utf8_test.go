package compaction_test

import (
	"context"
	"testing"
	"unicode/utf8"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// A summarizer whose narrative is not valid UTF-8, or whose unusable
// answer's error quotes bytes that are not: each compaction is refused
// (class output), none of its text is stored, the compactor goes on, and
// with Options.Repair the node is committed with Extractive's narrative.
func TestCompactor_InvalidUTF8Refused(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	badNarrative := summarizerFunc{name: "bad", fn: func(in *compaction.Input) (compaction.Output, error) {
		out, err := compaction.Extractive{}.Summarize(context.Background(), in)
		out.Narrative = "summary \xff\xfe of the span"
		return out, err
	}}
	badAnswer := summarizerFunc{name: "bad", fn: func(in *compaction.Input) (compaction.Output, error) {
		return compaction.Output{}, compaction.UnusableOutput("invalid_json", errors.Newf("not JSON: %s", "{\xff"))
	}}
	for _, tc := range []struct {
		name   string
		sum    compaction.Summarizer
		repair bool
		item   string
	}{
		{"narrative", badNarrative, false, store.OutputInvalidUTF8},
		{"narrative repaired", badNarrative, true, store.OutputInvalidUTF8},
		{"unusable answer", badAnswer, false, "invalid_json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true})
			results := agentLoop(t, db, newCompactor(t, db, compaction.Options{Summarizer: tc.sum, Repair: tc.repair,
				Policy: compaction.Policy{EveryEvents: 8}}), session, events)
			if len(results) < 3 {
				t.Fatalf("%d compactions", len(results))
			}
			for _, r := range results {
				if tc.repair != (r.Node != 0) {
					t.Errorf("%s %d..%d: node %d (repair %v)", r.Kind, r.From, r.To, r.Node, tc.repair)
				}
			}
			for _, r := range refusals(t, db, session) {
				if len(r.Failures) != 1 || r.Failures[0].Class != marker.ClassOutput || r.Failures[0].Item != tc.item {
					t.Errorf("refusal %d: %+v, want one %s:%s", r.ID, r.Failures, marker.ClassOutput, tc.item)
				}
				if w := tier.InvalidUTF8(r); w != "" {
					t.Errorf("refusal %d stores text that is not UTF-8: %s", r.ID, w)
				}
			}
			for _, n := range roots(t, db, session) {
				if !utf8.ValidString(n.Narrative) {
					t.Errorf("node %d's narrative is the summarizer's: %q", n.ID, n.Narrative)
				}
			}
			if len(refusals(t, db, session)) != len(results) {
				t.Errorf("%d refusals for %d compactions", len(refusals(t, db, session)), len(results))
			}
			verifyClean(t, db)
		})
	}
}
