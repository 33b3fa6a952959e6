package store_test

import (
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestRefError: an Append of an event whose ref is stored already is
// refused with a *RefError naming the session, the record and the seqs
// that hold it (errors.Is ErrRefStored), and stores nothing.
func TestRefError(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "a", Ref: "msg-1"},
		tier.Event{Kind: tier.KindAssistant, Text: "b", Ref: "msg-1"})
	_, err := db.Append("s", tier.Event{Kind: tier.KindAssistant, Text: "c"}, tier.Event{Kind: tier.KindUser, Text: "again", Ref: "msg-1"})
	var re *store.RefError
	if !errors.As(err, &re) || !errors.Is(err, store.ErrRefStored) || re.Session != "s" || re.Ref != "msg-1" || re.First != 1 || re.Last != 2 {
		t.Fatalf("Append of a stored ref = %v, want a RefError of msg-1 at seqs 1..2", err)
	}
	if want := `store: the record is stored already: session "s" record "msg-1", at seq 1..2`; re.Error() != want {
		t.Errorf("RefError %q, want %q", re.Error(), want)
	}
	if info, err := db.Info("s"); err != nil || info.Head != 2 {
		t.Errorf("head %d (%v) after the refused Append, want 2", info.Head, err)
	}
}
