package store_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-go/strata/store"
)

// TestVacuum_GivesSpaceBack prunes most sessions of a file, vacuums it and
// checks that the file shrank and what stays resumes to the same bytes.
func TestVacuum_GivesSpaceBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		bigSession(t, db, fmt.Sprintf("s%d", i), 200)
	}
	if _, err := db.Fork("s0", store.Latest, "f"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 1; i < 8; i++ {
		ids = append(ids, fmt.Sprintf("s%d", i))
	}
	if _, err := db.Prune(store.PruneOptions{Sessions: ids}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, id := range []string{"s0", "f"} {
		c, err := db.Resume(id, store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = c.Text()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := store.Vacuum(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("vacuum: %d bytes before, %d after", res.Before, res.After)
	if res.After*2 > res.Before || res.After != fileSize(t, path) || res.Sessions != 2 {
		t.Fatalf("vacuum: %+v, want the file at most half as long, 2 sessions", res)
	}
	db, err = store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for id, w := range want {
		c, err := db.Resume(id, store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c.Text(), w) {
			t.Fatalf("session %s resumes to other bytes after the vacuum", id)
		}
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("verify after vacuum: %v %v", err, rep.Problems)
	}
}
