package store_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestDB_CommitUnchecked commits a summary that Commit refuses: the node
// and its marker are written as for a valid one, marked unchecked; resume
// of the latest marker passes over them, resume that names the marker
// serves them and says so in the header, and Verify — which re-validates
// every root — reports the lie.
func TestDB_CommitUnchecked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unchecked.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustAppend(t, db, "s",
		tier.Event{Kind: tier.KindUser, Text: "migrate"},
		tier.Event{Kind: tier.KindRejected, Key: "approach/backfill", Text: "locks the table"},
		tier.Event{Kind: tier.KindArtifact, Key: "down.sql"},
		tier.Event{Kind: tier.KindUser, Text: "go on"},
	)
	plan, err := compaction.Policy{EveryEvents: 3, Budget: 100}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	lossy := store.Summary{Narrative: "explored approaches", Summarizer: "lossy",
		Claims: tier.Claims{Artifacts: []tier.Artifact{{Key: "down.sql"}}}}

	// Commit refuses it...
	if _, err := db.Commit(plan, lossy); !errors.Is(err, marker.ErrMarkerInvalid) {
		t.Fatalf("Commit of a summary missing a rejection: %v", err)
	}
	// ...CommitUnchecked trusts it (at the next boundary: a refused span is
	// asked for again, longer, one period on).
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindAssistant, Text: "ok"}, tier.Event{Kind: tier.KindAssistant, Text: "done"})
	plan, err = compaction.Policy{EveryEvents: 3, Budget: 100}.PlanSpan(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.CommitUnchecked(plan, lossy)
	if err != nil {
		t.Fatalf("CommitUnchecked: %v", err)
	}
	if res.Node == nil || res.Marker != res.Node.ID || res.Checkpoint == 0 || res.Refusal != nil {
		t.Fatalf("CommitUnchecked result %+v", res)
	}
	if !res.Node.Unchecked {
		t.Error("the node committed unchecked does not say so")
	}
	ctx, err := db.Resume("s", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Source != checkpoint.SourceCheckpoint || ctx.Boundary != 0 || len(ctx.Nodes) != 0 ||
		!strings.Contains(ctx.Reason, "unchecked") {
		t.Fatalf("resume latest: source %s boundary %d, %d nodes, reason %q; want the checkpoint before the unchecked node",
			ctx.Source, ctx.Boundary, len(ctx.Nodes), ctx.Reason)
	}
	for _, id := range []uint64{res.Marker, store.LatestUnchecked} {
		ctx, err = db.Resume("s", id)
		if err != nil {
			t.Fatal(err)
		}
		if ctx.Source != checkpoint.SourceMarker || ctx.Marker != res.Marker || ctx.Boundary != plan.To {
			t.Fatalf("resume %d: source %s marker %d boundary %d", id, ctx.Source, ctx.Marker, ctx.Boundary)
		}
		if len(ctx.Nodes) != 1 || len(ctx.Nodes[0].Claims.Dispositions) != 0 {
			t.Fatalf("resumed nodes %+v", ctx.Nodes)
		}
		text := string(ctx.Text())
		if !strings.Contains(text, "UNCHECKED: node 1 was committed without validation") || !strings.Contains(text, "(UNCHECKED)\n") {
			t.Errorf("resume %d of an unchecked marker does not say so:\n%s", id, text)
		}
	}
	if err := db.View(func(s *store.Snapshot) error {
		return s.Markers("s", func(m marker.Marker) error {
			if !m.Unchecked {
				t.Errorf("marker %d: not marked unchecked", m.ID)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}

	// The plan-consistency checks are not validation: they stay.
	if _, err := db.CommitUnchecked(plan, lossy); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CommitUnchecked of a stale plan: %v, want ErrConflict", err)
	}

	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatal("Verify is clean on a database with an unchecked, unsound marker")
	}
}
