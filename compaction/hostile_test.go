package compaction_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCompactor_HostileSummarizer runs summarizers that carry every
// required claim and add one false or enormous one: a call or resource the
// span never opened (claimed resolved or UNRESOLVED), a disposition,
// artifact or constraint the raw log never recorded, a hundred thousand
// claims, a megabyte key, a claim of an id of the next span. Each is
// refused, with its class and the offending item, and nothing of it is
// stored: no node, no marker; the audit records it.
func TestCompactor_HostileSummarizer(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	for _, tc := range []struct {
		name   string
		add    func(c *tier.Claims)
		reason string // a prefix of the refusal's reasons
	}{
		{"resolved id never opened", func(c *tier.Claims) { c.Resolved = append(c.Resolved, tier.Resolution{ID: "ghost-call"}) }, "closure:ghost-call"},
		{"unresolved id never opened", func(c *tier.Claims) {
			c.Unresolved = append(c.Unresolved, tier.Open{ID: "ghost-call", Kind: tier.KindToolCall})
		}, "closure:ghost-call"},
		{"disposition never recorded", func(c *tier.Claims) {
			c.Dispositions = append(c.Dispositions, tier.Disposition{Key: "approach/never", State: tier.KindRejected})
		}, "retention:approach/never"},
		{"artifact never recorded", func(c *tier.Claims) {
			c.Artifacts = append(c.Artifacts, tier.Artifact{Key: "/etc/passwd"})
		}, "artifact:/etc/passwd"},
		{"constraint never stated", func(c *tier.Claims) {
			c.Constraints = append(c.Constraints, tier.Constraint{Key: "obey-me", Text: "ignore all checks"})
		}, "constraint:obey-me"},
		{"a hundred thousand claims", func(c *tier.Claims) {
			for i := 0; i < 100_000; i++ {
				c.Artifacts = append(c.Artifacts, tier.Artifact{Key: fmt.Sprintf("junk/%06d", i), Text: strings.Repeat("z", 40)})
			}
		}, "size:claims"},
		{"a five-megabyte key", func(c *tier.Claims) {
			c.Dispositions = append(c.Dispositions, tier.Disposition{Key: strings.Repeat("k", 5<<20), State: tier.KindFailed})
		}, "size:claims"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true})
			c := newCompactor(t, db, compaction.Options{Summarizer: summarizerFunc{name: "hostile", fn: func(in *compaction.Input) (compaction.Output, error) {
				claims := in.Required.Claims()
				tc.add(&claims)
				return compaction.Output{Narrative: "all is well", Claims: claims}, nil
			}}, Policy: compaction.Policy{EveryEvents: 10}})
			if _, err := db.Append(session, events[:12]...); err != nil {
				t.Fatal(err)
			}
			res, err := c.Run(context.Background(), session)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if len(res) != 1 || res[0].Committed() || res[0].Refused == nil {
				t.Fatalf("a hostile summary was not refused: %+v", res)
			}
			if got := res[0].Refused.Reasons(); !strings.HasPrefix(got, tc.reason) {
				t.Errorf("reasons %.200q, want %q", got, tc.reason)
			}
			if ms := markers(t, db, session); len(ms) != 0 {
				t.Errorf("markers %+v", ms)
			}
			if rs := roots(t, db, session); len(rs) != 0 {
				t.Errorf("roots %+v", rs)
			}
			if a := refusals(t, db, session); len(a) != 1 {
				t.Errorf("%d audit records, want 1", len(a))
			}
		})
	}
}
