package store_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
)

// TestPrune_ArchiveResumesToTheSameBytes archives a fork and its parent's
// sibling before removing them: the archive file verifies and resumes to
// the same bytes; the fork's parent, which stays, is copied with it.
func TestPrune_ArchiveResumesToTheSameBytes(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "strata.db"), store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bigSession(t, db, "p", 100)
	bigSession(t, db, "other", 50)
	if _, err := db.Fork("p", store.Latest, "f"); err != nil {
		t.Fatal(err)
	}
	bigSession(t, db, "f", 30)
	archive := filepath.Join(dir, "archive.db")
	res, err := db.Prune(store.PruneOptions{Sessions: []string{"f", "other"}, Archive: db.ArchiveFile(context.Background(), archive)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 2 {
		t.Fatalf("removed %+v", res.Removed)
	}
	ids, err := db.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "p" {
		t.Fatalf("sessions after prune: %v, want p", ids)
	}
	a, err := store.Open(archive, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ids, err = a.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 {
		t.Fatalf("archive holds %v, want f, other and f's parent p", ids)
	}
	// An archive onto an existing file is refused before anything goes.
	if _, err := db.Prune(store.PruneOptions{Sessions: []string{"p"}, Archive: db.ArchiveFile(context.Background(), archive)}); err == nil {
		t.Fatal("an archive onto an existing file was written")
	}
	if ids, _ := db.Sessions(); len(ids) != 1 {
		t.Fatalf("a failed archive removed sessions: %v", ids)
	}
}

// TestPrune_ForkHoldsItsParent: a session named for pruning whose fork
// stays is held — Prune and DeleteSession return a *HeldError naming the
// session and the fork (errors.Is ErrForkHeld) and remove nothing — and
// pruning the fork with it removes both, the fork first.
func TestPrune_ForkHoldsItsParent(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	bigSession(t, db, "p", 20)
	if _, err := db.Fork("p", store.Latest, "f"); err != nil {
		t.Fatal(err)
	}
	_, err := db.Prune(store.PruneOptions{Sessions: []string{"p"}})
	var he *store.HeldError
	if !errors.As(err, &he) || !errors.Is(err, store.ErrForkHeld) ||
		len(he.Held) != 1 || he.Held[0].Session != "p" || !slices.Equal(he.Held[0].Forks, []string{"f"}) {
		t.Fatalf("Prune of a held parent = %v, want a HeldError of p held by f", err)
	}
	if want := `store: prune: session "p" is held by its forks f`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if err := db.DeleteSession("p"); !errors.As(err, &he) || !errors.Is(err, store.ErrForkHeld) {
		t.Fatalf("DeleteSession of a held parent = %v, want a HeldError", err)
	}
	if ids, err := db.Sessions(); err != nil || !slices.Equal(ids, []string{"f", "p"}) {
		t.Fatalf("sessions after the refusals: %v %v, want f and p", ids, err)
	}
	res, err := db.Prune(store.PruneOptions{Sessions: []string{"p", "f"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 2 || res.Removed[0].Session != "f" || res.Removed[1].Session != "p" {
		t.Errorf("removed %+v, want f then p", res.Removed)
	}
	if ids, err := db.Sessions(); err != nil || len(ids) != 0 {
		t.Errorf("sessions after pruning both: %v %v", ids, err)
	}
	mustVerify(t, db)
}
