package compaction_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestFormats_SameBehaviour replays the incident — with refusals, folds and
// a re-compaction — into a database of each format the store writes, and
// reopens each to go on: every resumed context is the same bytes, the
// records read back are the same, and each file verifies (dbtest) in its
// own layout.
func TestFormats_SameBehaviour(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	half := len(events) / 2
	run := func(format int) (contexts [][]byte, nodes []tier.Node) {
		// One clock for both: events without a time get the store's, and
		// the span hashes cover the stored bytes.
		clock := func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
		db := dbtest.Open(t, store.Options{NoSync: true, Format: format, Clock: clock, JournalEvents: 3})
		opts := compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.Policy{EveryTurns: 1, Fold: 2}}
		// A run of events first (format 5 keeps them in the session's
		// bucket while it is cold), then one at a time (the journal; format
		// 5 moves the state to the hot bucket).
		bulk(t, db, newCompactor(t, db, opts), session, events[:half/2])
		agentLoop(t, db, newCompactor(t, db, opts), session, events[half/2:half])
		lossy := compaction.Options{Summarizer: mustLossy(t, compaction.DropNegatives), Policy: compaction.Policy{EveryTurns: 1}}
		agentLoop(t, db, newCompactor(t, db, lossy), session, events[half:half+5])
		// Reopened, the file keeps its format (Options.Format is for
		// creating only) and takes more appends and compactions.
		path := db.Path()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := store.Open(path, store.Options{NoSync: true, Format: format%store.FormatVersion + 1, Clock: clock, JournalEvents: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.View(func(s *store.Snapshot) error {
			got, err := s.FormatVersion()
			if err == nil && got != format {
				t.Errorf("reopened format %d, want %d", got, format)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// Two runs: the first joins the journal, whose commit folds it;
		// the second goes straight to the events bucket (formats 3 to 5).
		bulk(t, db, newCompactor(t, db, opts), session, events[half+5:half+13])
		bulk(t, db, newCompactor(t, db, opts), session, events[half+13:half+21])
		agentLoop(t, db, newCompactor(t, db, opts), session, events[half+21:])
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
			t.Fatalf("format %d: Verify %v %v", format, rep.Problems, err)
		}
		return contexts, nodes
	}
	c1, n1 := run(1)
	if len(c1) < 3 {
		t.Fatalf("%d contexts", len(c1))
	}
	for f := 2; f <= store.FormatVersion; f++ {
		c2, n2 := run(f)
		if len(c1) != len(c2) {
			t.Fatalf("format %d: %d contexts, format 1 %d", f, len(c2), len(c1))
		}
		for i := range c1 {
			if !bytes.Equal(c1[i], c2[i]) {
				t.Errorf("context %d differs between formats 1 and %d:\n%s\n---\n%s", i, f, c1[i], c2[i])
			}
		}
		if fmt.Sprint(n1) != fmt.Sprint(n2) {
			t.Errorf("the nodes differ between formats 1 and %d:\n%v\n%v", f, n1, n2)
		}
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

// TestFormats_BadOption: Open refuses a format it does not make.
func TestFormats_BadOption(t *testing.T) {
	for _, f := range []int{-1, store.FormatVersion + 1} {
		if _, err := store.Open(t.TempDir()+"/x.db", store.Options{Create: true, Format: f}); err == nil {
			t.Errorf("Open with Format %d succeeded", f)
		}
	}
}
