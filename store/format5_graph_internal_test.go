package store

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/tier"
)

// e5Damaged makes a format 5 file with a hot session s of 3,000 events in
// e and a cold session c, and points the last element of e's root branch
// page back at the page: the path a session turning hot walks first.
func e5Damaged(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "strata.db")
	db, err := Open(path, Options{Create: true, NoSync: true, Format: 5, JournalEvents: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append("s", tier.Event{Kind: tier.KindUser, Text: "warm"}); err != nil {
		t.Fatal(err)
	}
	evs := appendRuns(t, db, "s")
	if _, err := db.Append("c", evs[:10]...); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	root := rootOf(t, path, "e")
	f, page := openBranchPage(t, path, root, "e's root")
	defer f.Close()
	count := int(binary.LittleEndian.Uint16(page[10:]))
	binary.LittleEndian.PutUint64(page[boltPageHeader+(count-1)*boltElement+8:], root)
	rewritePage(t, f, root, page)
	return path
}

// TestFormat5_DamagedEventsTailKeepsSessionsCold: with a cycle where a
// session turning hot would write in e, a small append to a cold session,
// or a new session's first, is not refused: canWarm's walk finds the cycle
// before any cursor goes there, and the session stays cold, appending in
// its own bucket. Runs to cold sessions go on too.
func TestFormat5_DamagedEventsTailKeepsSessionsCold(t *testing.T) {
	for _, who := range []string{"c", "new"} {
		t.Run(who, func(t *testing.T) {
			path := e5Damaged(t)
			db, err := Open(path, Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = within(t, "warm", func() error {
				_, err := db.Append(who, tier.Event{Kind: tier.KindUser, Text: "hi"})
				return err
			})
			if err != nil {
				t.Errorf("small append to %s: %v", who, err)
			}
			if err := db.bolt.View(func(tx *bolt.Tx) error {
				if b := tx.Bucket(sessionKey(who)); b == nil || b.Get(stateKey2) == nil || b.Get(keyNum3) != nil {
					t.Errorf("%s did not stay cold", who)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			// A run still goes to a cold session.
			evs := make([]tier.Event, 9)
			for i := range evs {
				evs[i] = tier.Event{Kind: tier.KindAssistant, Text: "r"}
			}
			if _, err := db.Append("c", evs...); err != nil {
				t.Errorf("run to cold c: %v", err)
			}
		})
	}
}
