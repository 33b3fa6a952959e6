package compaction_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-go/strata/backend/boltfile"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/memback"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestBackends_SameBehaviour replays the incident — with refusals and
// folds, appended in runs and one event at a time — into a bbolt file and
// into the in-memory reference backend, reopening each halfway to go on:
// every resumed context is the same bytes, the nodes read back are the
// same, and each database verifies.
func TestBackends_SameBehaviour(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	half := len(events) / 2
	// One clock for both: events without a time get the store's, and the
	// span hashes cover the stored bytes.
	clock := func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
	opts := store.Options{NoSync: true, Clock: clock}
	run := func(open func() *store.DB, reopen func(*store.DB) *store.DB) (contexts [][]byte, nodes []tier.Node) {
		db := open()
		defer func() { db.Close() }()
		policy := compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.Policy{EveryTurns: 1, Fold: 2}}
		bulk(t, db, newCompactor(t, db, policy), session, events[:half/2])
		agentLoop(t, db, newCompactor(t, db, policy), session, events[half/2:half])
		lossy := compaction.Options{Summarizer: mustLossy(t, compaction.DropNegatives), Policy: compaction.Policy{EveryTurns: 1}}
		agentLoop(t, db, newCompactor(t, db, lossy), session, events[half:half+5])
		// Reopened, the database takes more appends and compactions.
		db = reopen(db)
		bulk(t, db, newCompactor(t, db, policy), session, events[half+5:half+13])
		bulk(t, db, newCompactor(t, db, policy), session, events[half+13:half+21])
		agentLoop(t, db, newCompactor(t, db, policy), session, events[half+21:])
		for id := uint64(1); ; id++ {
			rc, err := db.Resume(session, id)
			if err != nil {
				break
			}
			contexts = append(contexts, rc.Text())
		}
		rc, err := db.Resume(session, store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		contexts = append(contexts, rc.Text())
		if err := db.View(func(s *store.Snapshot) error {
			return s.Nodes(session, func(n tier.Node) error { nodes = append(nodes, n); return nil })
		}); err != nil {
			t.Fatal(err)
		}
		rep, err := db.Verify(store.VerifyOptions{})
		if err != nil || !rep.OK() {
			t.Fatalf("Verify %v %v", rep.Problems, err)
		}
		return contexts, nodes
	}

	path := filepath.Join(t.TempDir(), "strata.db")
	c1, n1 := run(func() *store.DB {
		o := opts
		o.Create = true
		db, err := store.Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}, func(db *store.DB) *store.DB {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := store.Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.View(func(s *store.Snapshot) error {
			got, err := s.FormatVersion()
			if err == nil && got != boltfile.FormatVersion {
				t.Errorf("reopened file reports format %d, want %d", got, boltfile.FormatVersion)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return db
	})
	if len(c1) < 3 {
		t.Fatalf("%d contexts", len(c1))
	}

	var be *memback.Backend
	c2, n2 := run(func() *store.DB {
		be = memback.New()
		db, err := store.New(be, opts)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}, func(db *store.DB) *store.DB {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		be = be.Reopen()
		db, err := store.New(be, opts)
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
	if len(c1) != len(c2) {
		t.Fatalf("memback: %d contexts, boltfile %d", len(c2), len(c1))
	}
	for i := range c1 {
		if !bytes.Equal(c1[i], c2[i]) {
			t.Errorf("context %d differs between boltfile and memback:\n%s\n---\n%s", i, c1[i], c2[i])
		}
	}
	if fmt.Sprint(n1) != fmt.Sprint(n2) {
		t.Errorf("the nodes differ between boltfile and memback:\n%v\n%v", n1, n2)
	}
}

// bulk appends events to session in one call, and compacts.
func bulk(t *testing.T, db *store.DB, c *compaction.Compactor, session string, events []tier.Event) {
	t.Helper()
	if _, err := db.Append(session, events...); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(context.Background(), session); err != nil {
		t.Fatal(err)
	}
}
