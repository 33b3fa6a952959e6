package store_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_OversizeNodeIsRefused: the size limit applies to the claims a
// node is committed with — the raw log's texts, not the summarizer's
// words. A summary that names every artifact by its key alone passes
// validation, but the node would carry the artifacts' texts, more than
// MaxEventBytes together: the commit is a refusal with its reason, and an
// append in the same group commit is stored.
func TestCommit_OversizeNodeIsRefused(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock(), MaxEventBytes: 1000})
	text := strings.Repeat("x", 400)
	for _, k := range []string{"a", "b", "c", "d"} {
		mustAppend(t, db, "s", tier.Event{Kind: tier.KindArtifact, Key: "file/" + k, Text: text})
	}
	p, err := compaction.Policy{EveryEvents: 4, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	claims := p.Required.Claims()
	for i := range claims.Artifacts {
		claims.Artifacts[i].Text = ""
	}
	rs := store.WriteGroup(db,
		store.GroupWrite{Plan: p, Summary: store.Summary{Narrative: "four files", Claims: claims, Summarizer: "keys"}},
		store.GroupWrite{Session: "a", Events: []tier.Event{ev("a1")}},
	)
	var ie *marker.InvalidError
	if !errors.As(rs[0].Err, &ie) || len(ie.Failures) != 1 || ie.Failures[0].Class != marker.ClassSize ||
		ie.Failures[0].Item != "the raw log's claims" {
		t.Fatalf("commit of an oversize node: %v, want a ClassSize refusal of the raw log's claims", rs[0].Err)
	}
	if rs[0].Commit.Refusal == nil || rs[0].Commit.Node != nil {
		t.Errorf("commit result %+v, want a refusal and no node", rs[0].Commit)
	}
	if rs[1].Err != nil {
		t.Errorf("append beside the refused commit: %v", rs[1].Err)
	}
	if roots := mustRoots(t, db, "s"); len(roots) != 0 {
		t.Errorf("roots %v after the refusal, want none", roots)
	}
	mustVerify(t, db)
}
