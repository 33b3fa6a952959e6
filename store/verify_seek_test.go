package store

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/tier"
)

// TestVerify_FindsUnseekableKeys damages one key of a branch page so that
// the page still sorts but sends seeks for part of its left child to the
// wrong leaf: iteration (and so a replay) still sees every event, a read by
// seq does not. Verify must say so.
func TestVerify_FindsUnseekableKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db, err := Open(path, Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]tier.Event, 100)
	for i := range evs {
		evs[i] = tier.Event{Kind: tier.KindAssistant, Text: strings.Repeat("x", 100)}
	}
	for i := 0; i < 30; i++ {
		if _, err := db.Append("s", evs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Find the l0 bucket's root page: a branch page over the leaves.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	if err := bdb.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket(bucketSessions).Bucket([]byte("s")).Bucket(bucketL0).Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pageSize := int64(bdb.Info().PageSize)
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, pageSize)
	if _, err := f.ReadAt(page, int64(root)*pageSize); err != nil {
		t.Fatal(err)
	}
	const header, elem = 16, 16
	if flags, count := binary.LittleEndian.Uint16(page[8:]), binary.LittleEndian.Uint16(page[10:]); flags != 0x01 || count < 2 {
		t.Fatalf("l0 root page %d: flags %#x count %d, want a branch page of 2 or more", root, flags, count)
	}
	key := func(i int) []byte {
		off := header + i*elem
		pos, ksize := binary.LittleEndian.Uint32(page[off:]), binary.LittleEndian.Uint32(page[off+4:])
		return page[off+int(pos) : off+int(pos)+int(ksize)]
	}
	first, second := binary.BigEndian.Uint64(key(0)), binary.BigEndian.Uint64(key(1))
	if second-first < 3 {
		t.Fatalf("first leaf too small: keys %d, %d", first, second)
	}
	// Still above the first key, so the page sorts; below the second
	// leaf's first key, so seeks for the first leaf's tail go there.
	binary.BigEndian.PutUint64(key(1), first+1)
	if _, err := f.WriteAt(page, int64(root)*pageSize); err != nil {
		t.Fatal(err)
	}

	db, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Verify(VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		if strings.Contains(p.What, "not found by a seek") && strings.Contains(p.What, "l0") {
			found = true
		}
	}
	if !found {
		t.Fatalf("Verify did not report the unseekable key; problems: %v", rep.Problems)
	}
}
