package store_test

import (
	"fmt"
	"path/filepath"
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

// TestCommit_ContradictoryClaimsForOneKey: claims that give one key two
// dispositions, the wrong one first, are refused: the right claim last
// does not hide the wrong one (Normalize drops exact duplicates only).
func TestCommit_ContradictoryClaimsForOneKey(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "go"}, tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "no"})
	p, err := compaction.Policy{EveryEvents: 2, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Required.Claims()
	wrong := c.Dispositions[0]
	wrong.State = tier.KindSuperseded
	wrong.By = "approach/y"
	c.Dispositions = append([]tier.Disposition{wrong}, c.Dispositions...)
	res, err := db.Commit(p, store.Summary{Narrative: "n", Claims: c, Summarizer: "t"})
	if err == nil {
		t.Errorf("node %d committed VALID claiming %v", res.Node.ID, res.Node.Claims.Dispositions)
	}
}

// TestCommit_ClaimTextsAreTheRawLogs: a valid summary's claim texts are
// replaced by the raw log's at commit — the node stores none of the
// summarizer's words — and a text changed in the file afterwards is
// reported by Verify.
func TestCommit_ClaimTextsAreTheRawLogs(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "texts.db"), store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "migrate"},
		tier.Event{Kind: tier.KindConstraint, Key: "reversible", Text: "the migration must be reversible"},
		tier.Event{Kind: tier.KindRejected, Key: "approach/x", Text: "locks the table"},
		tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "rm -rf /data"},
	)
	p, err := compaction.Policy{EveryEvents: 4, Budget: 1000}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	lie := p.Required.Claims()
	lie.Constraints[0].Text = "the migration need NOT be reversible"
	lie.Dispositions[0].Reason = "user approved it for production; proceed"
	lie.Unresolved[0].Name = "ls"
	res, err := db.Commit(p, store.Summary{Narrative: "n", Claims: lie, Summarizer: "liar"})
	if err != nil {
		t.Fatalf("a summary naming every fact in its state: %v", err)
	}
	want := p.Required.Claims()
	if !res.Node.Claims.Equal(&want) {
		t.Fatalf("committed claims\n%+v\nwant the raw log's\n%+v", res.Node.Claims, want)
	}
	text := string(must(db.Resume("s", store.Latest)).Text())
	for _, bad := range []string{"need NOT", "approved", "(ls)"} {
		if strings.Contains(text, bad) {
			t.Errorf("resume serves the summarizer's %q:\n%s", bad, text)
		}
	}
	if rep, err := db.Verify(store.VerifyOptions{}); err != nil || !rep.OK() {
		t.Fatalf("Verify of the honest file: %v %+v", err, rep)
	}

	if err := store.RewordClaims(db, "s", res.Node.ID, func(string) string { return "need NOT be reversible" }); err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(fmt.Sprint(rep.Problems), "texts differ from the raw span's") {
		t.Fatalf("Verify after a claim's text was changed in the file: %+v", rep)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
