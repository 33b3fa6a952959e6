package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestInfo_TailTokens: the tail's tokens and the refused span's, as Info
// reports them from the counters the state keeps, are those of the raw
// events rendered as a resumed context carries them — after appends, L1
// commits and refusals of sealed plans and of plans built by hand — and
// Verify, which recomputes the counters from the raw log, agrees at every
// step.
func TestInfo_TailTokens(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	verify := func(step string) {
		t.Helper()
		rep, err := db.Verify(store.VerifyOptions{})
		if err != nil || !rep.OK() {
			t.Fatalf("%s: verify: %v %v", step, err, rep.Problems)
		}
		info, err := db.Info("s")
		if err != nil {
			t.Fatal(err)
		}
		var tail, refused int
		err = db.View(func(s *store.Snapshot) error {
			return s.Events("s", info.CompactedTo+1, info.Head, func(e tier.Event) error {
				tail += checkpoint.EventTextLen(&e)
				if e.Seq <= info.RefusedTo {
					refused += checkpoint.EventTextLen(&e)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if info.TailTokens != tier.TokensOfBytes(tail) || info.RefusedTokens != tier.TokensOfBytes(refused) {
			t.Errorf("%s: Info says %d tokens in the tail, %d refused; the raw events %d and %d (%+v)",
				step, info.TailTokens, info.RefusedTokens, tier.TokensOfBytes(tail), tier.TokensOfBytes(refused), info)
		}
	}
	plan := func(to uint64) *store.Plan {
		t.Helper()
		p, err := db.PlanSpan("s", to, 100)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// byHand is p as a caller would build it: the store's seal is not
	// copied, so the commit computes the span from its raw events.
	byHand := func(p *store.Plan) *store.Plan {
		return &store.Plan{Session: p.Session, Kind: p.Kind, Depth: p.Depth, From: p.From, To: p.To, FrameVersion: p.FrameVersion,
			Events: p.Events, Required: p.Required, SpanHash: p.SpanHash, Budget: p.Budget}
	}
	commit := func(p *store.Plan, honest bool) {
		t.Helper()
		sum := store.Summary{Narrative: "n", Summarizer: "t"}
		if honest {
			sum.Claims = p.Required.Claims()
		}
		_, err := db.Commit(p, sum)
		if refused := errors.Is(err, marker.ErrMarkerInvalid); refused == honest || err != nil && !refused {
			t.Fatalf("commit of %d..%d (honest %v): %v", p.From, p.To, honest, err)
		}
	}

	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "Migrate users.email to citext."},
		tier.Event{Kind: tier.KindConstraint, Key: "reversible", Text: "the migration must be reversible"},
		tier.Event{Kind: tier.KindAssistant, Text: strings.Repeat("Looking at the schema. ", 40)},
		tier.Event{Kind: tier.KindAssistant, Text: "Writing the rollback first.\nThen the forward migration."},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "psql -f up.sql --dry-run"},
		tier.Event{Kind: tier.KindToolResult, ID: "c1", Failed: true, Text: "lock timeout"},
	)
	verify("appended")
	commit(plan(3), true)
	verify("a sealed plan committed")
	commit(byHand(plan(4)), true)
	verify("a plan by hand committed")
	commit(byHand(plan(5)), false)
	verify("a plan by hand refused")
	commit(plan(6), false)
	verify("a sealed plan refused")
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "Find another way."}, tier.Event{Kind: tier.KindAssistant, Text: "ALTER COLUMN ... TYPE citext"})
	verify("appended after the refusal")
	info, err := db.Info("s")
	if err != nil {
		t.Fatal(err)
	}
	if info.CompactedTo != 4 || info.RefusedTo != 6 || info.RefusedTokens == 0 || info.TailTokens <= info.RefusedTokens {
		t.Errorf("info %+v: want the prefix compacted to 4, a refused span to 6 inside a longer tail", info)
	}
}

// TestVerify_SizeCounters: a state whose size counters the raw log
// contradicts — up to head, to the compacted prefix's end, to the last
// refused span's end — is a problem Verify reports, naming the counter.
func TestVerify_SizeCounters(t *testing.T) {
	db := dbtest.OpenUnverified(t, store.Options{NoSync: true})
	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "deploy"},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "make deploy"},
		tier.Event{Kind: tier.KindToolResult, ID: "c1", Failed: true, Text: "no credentials"},
		tier.Event{Kind: tier.KindAssistant, Text: "it failed"},
	)
	p, err := db.PlanSpan("s", 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatal(err)
	}
	if p, err = db.PlanSpan("s", 3, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, store.Summary{Narrative: "n", Summarizer: "t"}); !errors.Is(err, marker.ErrMarkerInvalid) {
		t.Fatalf("the summary without the failed call: %v, want refused", err)
	}
	// The counters as the raw log gives them: up to seq 4, 1 and 3.
	var want [3]uint64
	var n uint64
	err = db.View(func(s *store.Snapshot) error {
		return s.Events("s", 1, 4, func(e tier.Event) error {
			n += uint64(checkpoint.EventTextLen(&e))
			switch e.Seq {
			case 4:
				want[0] = n
			case 1:
				want[1] = n
			case 3:
				want[2] = n
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		counter string
		edit    func(head, compacted, refused *uint64)
		want    string
	}{
		{"head", func(h, _, _ *uint64) { *h++ }, "up to head (seq 4)"},
		{"compacted", func(_, c, _ *uint64) { *c-- }, "up to the compacted prefix's end (seq 1)"},
		{"refused", func(_, _, r *uint64) { *r = 0 }, "up to the last refused span's end (seq 3)"},
	} {
		t.Run(tc.counter, func(t *testing.T) {
			if err := store.EditSizes(db, "s", tc.edit); err != nil {
				t.Fatal(err)
			}
			rep, err := db.Verify(store.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].What, tc.want) || !strings.Contains(rep.Problems[0].What, "bytes in a resumed context") {
				t.Errorf("Verify found %v, want one problem naming %q", rep.Problems, tc.want)
			}
			// Undone, the state verifies again.
			if err := store.EditSizes(db, "s", func(h, c, r *uint64) { *h, *c, *r = want[0], want[1], want[2] }); err != nil {
				t.Fatal(err)
			}
			if rep, err := db.Verify(store.VerifyOptions{}); err != nil || !rep.OK() {
				t.Errorf("restored: %v %v", err, rep.Problems)
			}
		})
	}
}
