package store_test

import (
	"context"
	"path/filepath"
	"testing"

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
