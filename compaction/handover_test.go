package compaction_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/mutate"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// vandal is a summarizer that answers as inner does and then edits, in
// place, everything it was handed: every element of every list of its
// input and every field of every element (the events, the children with
// their claims, the required facts, what the last attempt missed).
type vandal struct {
	inner compaction.Summarizer
	edits *int
}

func (v vandal) Name() string { return v.inner.Name() }
func (v vandal) Summarize(ctx context.Context, in *compaction.Input) (compaction.Output, error) {
	out, err := v.inner.Summarize(ctx, in)
	*v.edits += mutate.Edit(in)
	return out, err
}

// TestHandover_SummarizerEditsChangeNothing runs the incident through the
// compactor — L1 spans, folds and digests, with a first attempt refused
// and retried, or repaired — twice: with a summarizer, and with the same
// summarizer editing in place everything it is handed after it answered.
// The results, the nodes, the refusals and every resumed context must be
// the same: a summarizer's input is its own copy (compaction.NewInput),
// shared neither with the plan the store commits nor with the next
// attempt's input. On PostgreSQL too (STRATA_TEST_BACKEND=postgres).
func TestHandover_SummarizerEditsChangeNothing(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	clock := func() time.Time { return time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC) }
	policy := compaction.Policy{EveryEvents: 4, Fold: 3, MaxRoots: 2}
	lossy := mustLossy(t, compaction.DropNegatives)
	// Lossy on a first attempt, extractive on a retry.
	retried := summarizerFunc{name: "retried", fn: func(in *compaction.Input) (compaction.Output, error) {
		if in.Attempt == 0 {
			return lossy.Summarize(context.Background(), in)
		}
		return compaction.Extractive{}.Summarize(context.Background(), in)
	}}
	for _, tc := range []struct {
		name string
		opts compaction.Options
	}{
		{"retry", compaction.Options{Summarizer: retried, Retries: 1, Policy: policy}},
		{"repair", compaction.Options{Summarizer: lossy, Repair: true, Policy: policy}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type run struct {
				results  []compaction.Result
				nodes    []tier.Node
				refusals []store.Refusal
				contexts [][]byte
			}
			do := func(sum compaction.Summarizer) (r run) {
				db := dbtest.Open(t, store.Options{NoSync: true, Clock: clock})
				opts := tc.opts
				opts.Summarizer = sum
				r.results = agentLoop(t, db, newCompactor(t, db, opts), session, events)
				if err := db.View(func(s *store.Snapshot) error {
					return s.Nodes(session, func(n tier.Node) error { r.nodes = append(r.nodes, n); return nil })
				}); err != nil {
					t.Fatal(err)
				}
				r.refusals = refusals(t, db, session)
				for _, m := range markers(t, db, session) {
					r.contexts = append(r.contexts, resume(t, db, session, m.ID).Text())
				}
				r.contexts = append(r.contexts, resume(t, db, session, store.Latest).Text())
				return r
			}
			want := do(tc.opts.Summarizer)
			edits := 0
			got := do(vandal{inner: tc.opts.Summarizer, edits: &edits})
			kinds := map[store.PlanKind]int{}
			retries := 0
			for _, r := range want.results {
				kinds[r.Kind]++
				if r.Attempts > 1 || r.Repaired != 0 {
					retries++
				}
			}
			if kinds[store.PlanSpan] == 0 || kinds[store.PlanFold] == 0 || kinds[store.PlanDigest] == 0 || retries == 0 {
				t.Fatalf("compactions by kind %v, %d retried or repaired: the test does not exercise them all", kinds, retries)
			}
			if edits < 1000 {
				t.Fatalf("%d values edited: the test edits too little", edits)
			}
			if !reflect.DeepEqual(got.results, want.results) {
				t.Errorf("results differ:\n got %+v\nwant %+v", got.results, want.results)
			}
			if !reflect.DeepEqual(got.nodes, want.nodes) {
				t.Errorf("nodes differ:\n got %+v\nwant %+v", got.nodes, want.nodes)
			}
			if !reflect.DeepEqual(got.refusals, want.refusals) {
				t.Errorf("refusals differ:\n got %+v\nwant %+v", got.refusals, want.refusals)
			}
			if len(got.contexts) != len(want.contexts) {
				t.Fatalf("%d contexts, want %d", len(got.contexts), len(want.contexts))
			}
			for i := range want.contexts {
				if !bytes.Equal(got.contexts[i], want.contexts[i]) {
					t.Errorf("context %d differs:\n%s\nwant\n%s", i, got.contexts[i], want.contexts[i])
				}
			}
		})
	}
}
