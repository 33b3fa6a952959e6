package store_test

import (
	"crypto/sha256"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestCommit_SealOfAnotherKindIsNotReused: a recompact plan of the second
// root, turned into a digest plan by its exported fields only, is checked
// against what the digest requires, not against its seal: a summary that
// drops every fact of the first root's span is refused: a seal of the
// same span serves only the kind of plan that made it.
func TestCommit_SealOfAnotherKindIsNotReused(t *testing.T) {
	db := digestFixture(t, 4)
	roots := mustRoots(t, db, "s")
	if len(roots) < 3 {
		t.Fatalf("%d roots", len(roots))
	}
	honest, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	p, err := db.PlanRecompact("s", roots[1].ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	claims := p.Required.Claims() // what roots[1]'s span requires, nothing of roots[0]'s
	h := sha256.New()
	h.Write([]byte("strata digest\x00"))
	h.Write(roots[0].SpanHash)
	h.Write(p.SpanHash)
	p.Kind, p.From, p.Depth = store.PlanDigest, 1, 2
	p.Replaces = []uint64{roots[0].ID, roots[1].ID}
	p.Children = []tier.Node{roots[0], roots[1]}
	p.SpanHash = h.Sum(nil)
	p.Previous = nil
	res, err := db.Commit(p, store.Summary{Narrative: "n", Claims: claims, Summarizer: "t"})
	if err == nil {
		t.Errorf("a digest over 1..%d committed VALID (marker %d) claiming %d dispositions, %d constraints, %d artifacts; the raw prefix requires %d, %d, %d",
			p.To, res.Marker, len(claims.Dispositions), len(claims.Constraints), len(claims.Artifacts),
			len(honest.Required.Dispositions), len(honest.Required.Constraints), len(honest.Required.Artifacts))
		rep, verr := db.Verify(store.VerifyOptions{})
		t.Logf("Verify: err=%v problems=%v", verr, rep)
	} else {
		t.Logf("refused: %v", err)
	}
}

// TestCommit_DigestSealNotReusedByARecompact: the other way round. A digest
// plan, turned into a re-compaction of its second root by its exported
// fields, is checked against the second root's span: a summary that does
// not claim resolved the call c0 — which the first root claims UNRESOLVED
// and the span resolves — is refused.
func TestCommit_DigestSealNotReusedByARecompact(t *testing.T) {
	db := digestFixture(t, 4)
	roots := mustRoots(t, db, "s")
	rp, err := db.PlanRecompact("s", roots[1].ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Required.Resolved) == 0 {
		t.Fatal("the second root's span resolves no earlier call: the test no longer builds its case")
	}
	p, err := compaction.Policy{MaxRoots: 2, Budget: 1000}.PlanDigest(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	claims := p.Required.Claims()
	p.Kind, p.From, p.Depth = store.PlanRecompact, roots[1].From, roots[1].Depth
	p.Replaces = []uint64{roots[1].ID}
	p.Children = nil
	p.SpanHash = rp.SpanHash
	_, err = db.Commit(p, store.Summary{Narrative: "n", Claims: claims, Summarizer: "t"})
	if err == nil {
		t.Errorf("a re-compaction of %d..%d committed VALID without claiming resolved %v (the first root claims %v UNRESOLVED)",
			p.From, p.To, rp.Required.Resolved, roots[0].Claims.Unresolved)
		rep, _ := db.Verify(store.VerifyOptions{})
		t.Logf("Verify: %v", rep)
	} else {
		t.Logf("refused: %v", err)
	}
}
