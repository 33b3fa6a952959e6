package store_test

import (
	"testing"

	"github.com/cockroachdb/errors"

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
			p, err := db.PlanSpan("s", store.SpanPolicy{Events: 3}, 1000)
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
