package store_test

import (
	"strings"
	"testing"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestResumeFitted: the context is Resume's, byte for byte, and the
// fitted state is the raw log's at the head — a call opened after the
// marker's boundary is in it, a request the summary covered too — within
// the budget; a smaller budget lists fewer facts and counts the others.
func TestResumeFitted(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "rename the flag"},
		tier.Event{Kind: tier.KindConstraint, Key: "compat", Text: "keep the old flag as an alias"})
	p, err := db.PlanSpan("s", 2, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatal(err)
	}
	evs := []tier.Event{{Kind: tier.KindToolCall, ID: "c9", Name: "edit", Text: "cmd/main.go"}}
	for i := 0; i < 30; i++ {
		evs = append(evs, tier.Event{Kind: tier.KindArtifact, Key: "file/" + strings.Repeat("x", i+1), Text: strings.Repeat("an artifact ", 20)})
	}
	mustAppend(t, db, "s", evs...)

	want := must(db.Resume("s", store.Latest))
	ctx, f, err := db.ResumeFitted("s", store.Latest, 4000)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.SHA256() != want.SHA256() {
		t.Errorf("ResumeFitted's context differs from Resume's")
	}
	for _, s := range []string{"c9", "rename the flag", "compat"} {
		if !strings.Contains(f.Text, s) {
			t.Errorf("the fitted state lacks %q:\n%s", s, f.Text)
		}
	}
	if f.Tokens > 4000 || f.Shown != f.Facts || len(f.LeftOut) != 0 {
		t.Errorf("budget 4000: %d tokens, %d of %d facts shown, left out %v", f.Tokens, f.Shown, f.Facts, f.LeftOut)
	}
	_, small, err := db.ResumeFitted("s", store.Latest, checkpoint.MinStateBudget)
	if err != nil {
		t.Fatal(err)
	}
	if small.Facts != f.Facts || small.Shown >= small.Facts || len(small.LeftOut) == 0 || small.Tokens > checkpoint.MinStateBudget {
		t.Errorf("budget %d: %d tokens, %d of %d facts shown, left out %v", checkpoint.MinStateBudget, small.Tokens, small.Shown, small.Facts, small.LeftOut)
	}
	if _, _, err := db.ResumeFitted("nobody", store.Latest, 4000); err == nil {
		t.Error("ResumeFitted of an unknown session succeeded")
	}
}
