package store_test

import (
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_PlanCannotBeTamperedWith: Commit checks the claims against
// what the raw span requires, never against what the caller's Plan says.
// A plan whose Required and Events were changed after planning — or a Plan
// built by hand from its exported fields — gets a summary refused when it
// misses a disposition of the span.
func TestCommit_PlanCannotBeTamperedWith(t *testing.T) {
	for name, tamper := range map[string]func(p *store.Plan) *store.Plan{
		"required and events changed": func(p *store.Plan) *store.Plan {
			p.Required.Dispositions = nil
			p.Events = p.Events[:1]
			return p
		},
		"built from its exported fields": func(p *store.Plan) *store.Plan {
			q := store.Plan{Session: p.Session, Kind: p.Kind, Depth: p.Depth, From: p.From, To: p.To,
				FrameVersion: p.FrameVersion, Events: p.Events, Required: p.Required, SpanHash: p.SpanHash, Budget: p.Budget}
			q.Required.Dispositions = nil
			return &q
		},
	} {
		t.Run(name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true})
			mustAppend(t, db, "s",
				tier.Event{Kind: tier.KindUser, Text: "go"},
				tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
				tier.Event{Kind: tier.KindUser, Text: "again"},
			)
			p, err := compaction.Policy{EveryEvents: 3, Budget: 1000}.PlanSpan(db, "s")
			if err != nil {
				t.Fatal(err)
			}
			p = tamper(p)
			_, err = db.Commit(p, store.Summary{Narrative: "all fine", Claims: p.Required.Claims(), Summarizer: "test"})
			var ie *marker.InvalidError
			if !errors.As(err, &ie) || len(ie.Failures) != 1 || ie.Failures[0].String() != "retention:approach/x" {
				t.Fatalf("Commit = %v, want refused for retention:approach/x", err)
			}
		})
	}
}

// TestCommit_PlanFromAnotherDatabase: a Plan made by one DB and committed
// to another whose session has the same id and the same span bytes, but
// another history before the span, must be checked against the second DB's
// raw log: the claims the first computed (its seal) say nothing there. A
// summary that forgets a call open in the second DB is refused.
func TestCommit_PlanFromAnotherDatabase(t *testing.T) {
	const when = 1_700_000_000_000_000_000
	a := dbtest.Open(t, store.Options{NoSync: true})
	b := dbtest.Open(t, store.Options{NoSync: true})
	// A: a call c1 opened at seq 1 and never resolved.
	mustAppend(t, a, "s", tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "grep", Text: "x", Turn: 1, Time: when})
	// B: a plain user message at seq 1.
	mustAppend(t, b, "s", tier.Event{Kind: tier.KindUser, Text: "x", Turn: 1, Time: when})
	// Seq 2: the same bytes in both.
	same := tier.Event{Kind: tier.KindUser, Text: "hi", Turn: 2, Time: when}
	mustAppend(t, a, "s", same)
	mustAppend(t, b, "s", same)
	// Compact seq 1 in both, honestly.
	for _, db := range []*store.DB{a, b} {
		p, err := compaction.Policy{EveryEvents: 1, Budget: 1000}.PlanSpan(db, "s")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	// A plan of 2..2 made by A requires c1 unresolved.
	pa, err := compaction.Policy{EveryEvents: 1, Budget: 1000}.PlanSpan(a, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(pa.Required.Unresolved) != 1 {
		t.Fatalf("A's plan requires %+v, want c1 unresolved", pa.Required)
	}
	// The same span planned by B requires nothing.
	pb, err := compaction.Policy{EveryEvents: 1, Budget: 1000}.PlanSpan(b, "s")
	if err != nil {
		t.Fatal(err)
	}
	if string(pa.SpanHash) != string(pb.SpanHash) {
		t.Fatal("the span's bytes differ between the databases: the test no longer builds its case")
	}
	// B's plan, committed to A with a summary that forgets c1.
	// (It claims what B's plan requires: the user's request at seq 2.)
	_, err = a.Commit(pb, store.Summary{Narrative: "forgets c1", Claims: pb.Required.Claims(), Summarizer: "t"})
	var ie *marker.InvalidError
	if !errors.As(err, &ie) || len(ie.Failures) != 1 || ie.Failures[0].String() != "closure:c1" {
		t.Fatalf("A's commit of B's plan = %v, want refused for closure:c1 (open in A)", err)
	}
}

// TestCommit_RefusalReadsTheRawSpan: a refusal records the turn of the
// span's last event from the raw log, never from the caller's p.Events: a
// plan whose Events were emptied is refused like any other, not reported as
// damage (the first version indexed p.Events and panicked).
func TestCommit_RefusalReadsTheRawSpan(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "go"},
		tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
		tier.Event{Kind: tier.KindUser, Text: "again"},
	)
	p, err := compaction.Policy{EveryEvents: 3, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	p.Events = nil
	_, err = db.Commit(p, store.Summary{Narrative: "forgets the rejection", Summarizer: "test"})
	var ie *marker.InvalidError
	if !errors.As(err, &ie) || ie.Failures[0].String() != "retention:approach/x" {
		t.Fatalf("Commit = %v, want refused for retention:approach/x", err)
	}
}
