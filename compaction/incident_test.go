package compaction_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

const (
	keyApproach = "approach/add-column-then-backfill"
	keyDown     = "migrations/003_down.sql"
)

// TestCompactor_Incident_Lossy replays the seed's incident with a
// compaction every 2 turns under a summarizer that drops negatives and
// artifacts — what lost the rejected approach and the rollback script in the
// seed — and checks that no marker is committed, that the refusal names both
// facts, and that resume falls back to raw.
func TestCompactor_Incident_Lossy(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := newCompactor(t, db, compaction.Options{
		Summarizer: mustLossy(t, compaction.DropNegatives, compaction.DropArtifacts),
		Policy:     compaction.Policy{EveryTurns: 2},
	})
	results := agentLoop(t, db, c, session, events)

	if len(results) == 0 {
		t.Fatal("no compaction was attempted")
	}
	both := false
	for _, r := range results {
		if r.Committed() || r.Refused == nil {
			t.Fatalf("lossy compaction of seq %d..%d was not refused: %+v", r.From, r.To, r)
		}
		reasons := r.Refused.Reasons()
		if strings.Contains(reasons, "retention:"+keyApproach) && strings.Contains(reasons, "artifact:"+keyDown) {
			both = true
		}
		for _, f := range r.Refused.Failures {
			if f.Class != marker.ClassRetention && f.Class != marker.ClassArtifact {
				t.Errorf("seq %d..%d: failure %s is of a class the summarizer did not drop", r.From, r.To, f)
			}
		}
	}
	if !both {
		t.Fatalf("no refusal names both %s and %s: %v", "retention:"+keyApproach, "artifact:"+keyDown, results)
	}
	// The first span (turns 1-2) holds the rollback script but not yet the
	// rejected approach: it is refused for the artifact alone.
	if r := results[0]; r.From != 1 || r.To != 12 || r.Refused.Reasons() != "artifact:"+keyDown {
		t.Errorf("first refusal: seq %d..%d reasons %s; want 1..12 artifact:%s", r.From, r.To, r.Refused.Reasons(), keyDown)
	}

	// The audit holds every refused attempt, as the results report them.
	audit := refusals(t, db, session)
	if len(audit) != len(results) {
		t.Fatalf("%d audit records for %d refusals", len(audit), len(results))
	}
	for i, a := range audit {
		r := results[i]
		if a.From != r.From || a.To != r.To || a.Summarizer != "lossy" || a.Checkpoint != r.Checkpoint ||
			!slices.Equal(failureStrings(a.Failures), failureStrings(r.Refused.Failures)) {
			t.Errorf("audit %d = %+v, result %+v", i, a, r)
		}
	}
	if ms := markers(t, db, session); len(ms) != 0 {
		t.Fatalf("a refused compaction left markers: %+v", ms)
	}

	ctx := resume(t, db, session, store.Latest)
	if ctx.Source != checkpoint.SourceCheckpoint || ctx.Marker != 0 || len(ctx.Nodes) != 0 {
		t.Fatalf("Resume(latest): source %s marker %d nodes %d; want a checkpoint, raw only", ctx.Source, ctx.Marker, len(ctx.Nodes))
	}
	if !strings.Contains(ctx.Reason, "refused") || !strings.Contains(ctx.Reason, "retention:"+keyApproach) {
		t.Errorf("Resume(latest) reason %q does not say which refusal", ctx.Reason)
	}
	text := string(ctx.Text())
	for _, k := range []string{keyApproach, keyDown} {
		if !strings.Contains(text, k) {
			t.Errorf("resumed context lacks %s", k)
		}
	}
	checkContextHoldsFacts(t, db, session, ctx)
}

// TestCompactor_Incident_Extractive replays the incident the same way under
// the extractive summarizer: every compaction commits, and the resumed
// context carries both facts, with their states, in summary nodes.
func TestCompactor_Incident_Extractive(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.Policy{EveryTurns: 2}})
	results := agentLoop(t, db, c, session, events)

	var spans []string
	for _, r := range results {
		if !r.Committed() {
			t.Fatalf("extractive compaction of seq %d..%d refused: %v", r.From, r.To, r.Refused)
		}
		if r.Marker != r.Node || r.Checkpoint == 0 {
			t.Errorf("result %+v: marker must be the node's id, with a checkpoint", r)
		}
		spans = append(spans, fmt.Sprintf("%d..%d", r.From, r.To))
	}
	// Turns 7-8 are not complete at the end (turn 8 is still going on).
	if want := []string{"1..12", "13..23", "24..33"}; !slices.Equal(spans, want) {
		t.Fatalf("compacted spans %v, want %v (every 2 turns)", spans, want)
	}
	if n := checkValidMarkers(t, db, session); n != 3 {
		t.Fatalf("%d valid markers, want 3", n)
	}

	ctx := resume(t, db, session, store.Latest)
	if ctx.Source != checkpoint.SourceMarker || ctx.Marker != 3 || ctx.Boundary != 33 || len(ctx.Nodes) != 3 {
		t.Fatalf("Resume(latest): source %s marker %d boundary %d nodes %d", ctx.Source, ctx.Marker, ctx.Boundary, len(ctx.Nodes))
	}
	text := string(ctx.Text())
	for _, want := range []string{
		"- rejected: " + keyApproach + " — user rejected after the failed dry run\n",
		"- artifact: " + keyDown + " — rollback script, already written\n",
		"- constraint: reversible — the schema migration must be reversible\n",
		"- superseded: migrations/003_up.sql@v1 (by migrations/003_up.sql@v2)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("resumed context lacks %q:\n%s", want, text)
		}
	}
	checkContextHoldsFacts(t, db, session, ctx)
}

// TestCompactor_Incident_FoldThenRecompact follows a marker through the
// frame changes that make it stale: an L1 node folded into an L2 digest,
// then the L2 re-compacted with a tighter budget. Each change invalidates
// the markers and checkpoints it makes stale, with a reason, and resuming
// from a stale marker falls back to a checkpoint that still holds every fact.
func TestCompactor_Incident_FoldThenRecompact(t *testing.T) {
	session, events := readIncident(t, "long_migration.jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{},
		Policy: compaction.Policy{EveryTurns: 2, Fold: 4}})

	// Up to the first fold: the L1 marker is valid, and resumable.
	var results []compaction.Result
	var fold compaction.Result
	i := 0
	for ; i < len(events) && fold.Node == 0; i++ {
		rs := agentLoop(t, db, c, session, events[i:i+1])
		for _, r := range rs {
			if r.Kind == store.PlanFold {
				fold = r
			}
		}
		results = append(results, rs...)
	}
	if fold.Node == 0 || fold.Depth != 2 {
		t.Fatalf("no L2 fold after %d events: %+v", i, results)
	}
	l2 := node(t, db, session, fold.Node)
	if len(l2.Children) != 4 || l2.From != 1 {
		t.Fatalf("L2 node %d children %v from %d", l2.ID, l2.Children, l2.From)
	}
	l1 := l2.Children[0]
	if !slices.Equal(fold.InvalidatedMarkers, l2.Children) {
		t.Errorf("fold invalidated markers %v, want its children %v", fold.InvalidatedMarkers, l2.Children)
	}
	if len(fold.InvalidatedCheckpoints) == 0 {
		t.Error("the fold invalidated no checkpoint")
	}
	m1 := getMarker(t, db, session, l1)
	if m1.Status != marker.StatusInvalid || !strings.Contains(m1.Reason, fmt.Sprintf("folded into L2 node %d", l2.ID)) || m1.InvalidatedAt == 0 {
		t.Fatalf("L1 marker after the fold: %+v", m1)
	}
	checkStaleCheckpoints(t, db, session, l1)

	// The rest of the session.
	results = append(results, agentLoop(t, db, c, session, events[i:])...)
	for _, r := range results {
		if !r.Committed() {
			t.Fatalf("extractive compaction refused: %+v", r)
		}
	}
	if m := getMarker(t, db, session, l2.ID); m.Status != marker.StatusValid {
		t.Fatalf("L2 marker before the re-compaction: %+v", m)
	}

	// A lossy re-compaction is refused and changes nothing.
	lossy := newCompactor(t, db, compaction.Options{Summarizer: mustLossy(t, compaction.DropNegatives)})
	before := markers(t, db, session)
	if _, err := lossy.Recompact(context.Background(), session, l2.ID, 256); !isRefused(err) {
		t.Fatalf("lossy Recompact: %v, want ErrMarkerInvalid", err)
	}
	if after := markers(t, db, session); !slices.Equal(before, after) {
		t.Fatalf("a refused re-compaction changed markers:\n%+v\n%+v", before, after)
	}

	// Re-compact the L2 digest with a tighter budget: three quarters of what
	// it takes now.
	budget := l2.Tokens * 3 / 4
	rr, err := c.Recompact(context.Background(), session, l2.ID, budget)
	if err != nil || !rr.Committed() {
		t.Fatalf("Recompact: %v %+v", err, rr)
	}
	if !slices.Equal(rr.InvalidatedMarkers, []uint64{l2.ID}) {
		t.Errorf("re-compaction invalidated markers %v, want [%d]", rr.InvalidatedMarkers, l2.ID)
	}
	nl2 := node(t, db, session, rr.Node)
	old := node(t, db, session, l2.ID)
	if nl2.Depth != 2 || nl2.From != l2.From || nl2.To != l2.To || nl2.Budget != budget || !slices.Equal(nl2.Children, l2.Children) {
		t.Errorf("new L2 node %+v", nl2)
	}
	// Within the budget, or over it by the one line a narrative keeps.
	if nl2.Tokens > budget && strings.Count(nl2.Narrative, "\n") > 1 || len(nl2.Narrative) >= len(old.Narrative) {
		t.Errorf("tighter budget: %d tokens (narrative %d bytes), was %d (%d)", nl2.Tokens, len(nl2.Narrative), old.Tokens, len(old.Narrative))
	}
	if old.SupersededBy != nl2.ID || old.IsRoot() {
		t.Errorf("old L2 node: superseded by %d", old.SupersededBy)
	}
	m2 := getMarker(t, db, session, l2.ID)
	if m2.Status != marker.StatusInvalid || !strings.Contains(m2.Reason, fmt.Sprintf("re-compacted into node %d (budget %d)", nl2.ID, budget)) {
		t.Fatalf("L2 marker after the re-compaction: %+v", m2)
	}
	if m1 := getMarker(t, db, session, l1); m1.InvalidatedAt >= m2.InvalidatedAt {
		t.Errorf("L1 marker invalidated at frame %d, L2 at %d", m1.InvalidatedAt, m2.InvalidatedAt)
	}
	checkStaleCheckpoints(t, db, session, l1, l2.ID)
	checkValidMarkers(t, db, session)

	// Resuming from either stale marker falls back to a checkpoint, says why,
	// and still holds every fact.
	for _, tc := range []struct {
		id   uint64
		why  string
		seq  uint64 // the checkpoint that serves
		node uint64 // the node in its prefix, if any
	}{
		{l1, fmt.Sprintf("folded into L2 node %d", l2.ID), 0, 0},
		{l2.ID, fmt.Sprintf("re-compacted into node %d", nl2.ID), l2.To, nl2.ID},
	} {
		ctx := resume(t, db, session, tc.id)
		if ctx.Source != checkpoint.SourceCheckpoint || ctx.Marker != tc.id || ctx.Checkpoint == 0 {
			t.Errorf("Resume(marker %d): source %s marker %d checkpoint %d", tc.id, ctx.Source, ctx.Marker, ctx.Checkpoint)
		}
		if !strings.Contains(ctx.Reason, fmt.Sprintf("marker %d invalid", tc.id)) || !strings.Contains(ctx.Reason, tc.why) {
			t.Errorf("Resume(marker %d) reason %q does not mention the invalidation (%q)", tc.id, ctx.Reason, tc.why)
		}
		if ctx.Boundary != tc.seq {
			t.Errorf("Resume(marker %d) served from seq %d, want %d", tc.id, ctx.Boundary, tc.seq)
		}
		if tc.node != 0 && (len(ctx.Nodes) != 1 || ctx.Nodes[0].ID != tc.node) {
			t.Errorf("Resume(marker %d) nodes %d, want [%d]", tc.id, len(ctx.Nodes), tc.node)
		}
		checkContextHoldsFacts(t, db, session, ctx)
		text := string(ctx.Text())
		for _, k := range []string{keyApproach, keyDown, "approach/shadow-column-with-trigger", "maintenance-window"} {
			if !strings.Contains(text, k) {
				t.Errorf("Resume(marker %d) lacks %s", tc.id, k)
			}
		}
	}

	// Latest is still served by a marker.
	if ctx := resume(t, db, session, store.Latest); ctx.Source != checkpoint.SourceMarker {
		t.Errorf("Resume(latest) source %s, reason %q", ctx.Source, ctx.Reason)
	} else {
		checkContextHoldsFacts(t, db, session, ctx)
	}
}

// checkStaleCheckpoints checks that every checkpoint whose prefix holds one
// of the nodes is invalid with a reason, and that every usable checkpoint's
// prefix holds only roots.
func checkStaleCheckpoints(t *testing.T, db *store.DB, session string, stale ...uint64) {
	t.Helper()
	isRoot := map[uint64]bool{}
	for _, r := range roots(t, db, session) {
		isRoot[r.ID] = true
	}
	held := 0
	for _, ck := range checkpoints(t, db, session) {
		for _, id := range ck.Prefix {
			if slices.Contains(stale, id) {
				held++
				if ck.Usable() || ck.Reason == "" || ck.InvalidatedAt == 0 {
					t.Errorf("checkpoint %d holds stale node %d: %+v", ck.ID, id, ck)
				}
			}
			if ck.Usable() && !isRoot[id] {
				t.Errorf("usable checkpoint %d holds node %d, not a root", ck.ID, id)
			}
		}
	}
	if held == 0 {
		t.Errorf("no checkpoint ever held nodes %v", stale)
	}
}

// TestCompactor_Incident_OpenCallAtBoundary compacts every 17 events, so
// that the first boundary falls mid-turn while the dry run (call c5) is
// open.
func TestCompactor_Incident_OpenCallAtBoundary(t *testing.T) {
	session, events := readIncident(t, "migration.jsonl")
	if e := events[16]; e.Kind != tier.KindToolCall || e.ID != "c5" {
		t.Fatalf("fixture changed: event 17 is %s %s", e.Kind, e.ID)
	}
	policy := compaction.Policy{EveryEvents: 17}

	t.Run("lossy dropping open is refused", func(t *testing.T) {
		db := dbtest.Open(t, store.Options{NoSync: true})
		c := newCompactor(t, db, compaction.Options{Summarizer: mustLossy(t, compaction.DropOpen), Policy: policy})
		results := agentLoop(t, db, c, session, events[:20])
		if len(results) == 0 {
			t.Fatal("no compaction attempted")
		}
		r := results[0]
		if r.Committed() || r.From != 1 || r.To != 17 {
			t.Fatalf("first compaction %+v, want seq 1..17 refused", r)
		}
		if got := failureStrings(r.Refused.Failures); !slices.Equal(got, []string{"closure:c5"}) {
			t.Fatalf("failures %v, want [closure:c5]", got)
		}
		if d := r.Refused.Failures[0].Detail; !strings.Contains(d, "not claimed UNRESOLVED") {
			t.Errorf("detail %q", d)
		}
	})

	t.Run("extractive claims it UNRESOLVED, then resolved", func(t *testing.T) {
		db := dbtest.Open(t, store.Options{NoSync: true})
		c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
		results := agentLoop(t, db, c, session, events)
		if len(results) < 2 || !results[0].Committed() || !results[1].Committed() {
			t.Fatalf("results %+v", results)
		}
		n1, n2 := node(t, db, session, results[0].Node), node(t, db, session, results[1].Node)
		if n1.To != 17 || len(n1.Claims.Unresolved) != 1 || n1.Claims.Unresolved[0].ID != "c5" || n1.Claims.Unresolved[0].Kind != tier.KindToolCall {
			t.Fatalf("node over 1..%d claims UNRESOLVED %+v, want c5", n1.To, n1.Claims.Unresolved)
		}
		if n2.From != 18 || !slices.ContainsFunc(n2.Claims.Resolved, func(r tier.Resolution) bool { return r.ID == "c5" && r.Seq == n1.Claims.Unresolved[0].Seq }) {
			t.Fatalf("node over %d..%d claims resolved %v, want c5", n2.From, n2.To, n2.Claims.Resolved)
		}
		if slices.ContainsFunc(n2.Claims.Unresolved, func(o tier.Open) bool { return o.ID == "c5" }) {
			t.Fatal("the next node still claims c5 UNRESOLVED")
		}
		ctx := resume(t, db, session, n1.ID)
		if !strings.Contains(string(ctx.Text()), fmt.Sprintf("- UNRESOLVED call c5 (bash), opened at seq %d\n", n1.Claims.Unresolved[0].Seq)) {
			t.Errorf("Resume(marker %d) does not show c5 UNRESOLVED:\n%s", n1.ID, ctx.Text())
		}
		checkContextHoldsFacts(t, db, session, ctx)
		checkValidMarkers(t, db, session)
	})

	t.Run("the next node must claim it resolved", func(t *testing.T) {
		db := dbtest.Open(t, store.Options{NoSync: true})
		forgetful := summarizerFunc{name: "forgetful", fn: func(in *compaction.Input) (compaction.Output, error) {
			c := in.Required.Claims()
			if in.From > 1 {
				c.Resolved = nil // "the dry run" goes unmentioned
			}
			return compaction.Output{Narrative: "work went on", Claims: c}, nil
		}}
		c := newCompactor(t, db, compaction.Options{Summarizer: forgetful, Policy: policy})
		results := agentLoop(t, db, c, session, events[:34])
		if len(results) != 2 || !results[0].Committed() || results[1].Committed() {
			t.Fatalf("results %+v, want 1..17 committed, 18..34 refused", results)
		}
		r := results[1]
		if got := failureStrings(r.Refused.Failures); !slices.Equal(got, []string{"closure:c5@17"}) || !strings.Contains(r.Refused.Failures[0].Detail, "not claimed resolved") {
			t.Fatalf("failures %v (%v), want closure:c5@17 not claimed resolved", got, r.Refused)
		}
		// The earlier marker stays valid and usable: its UNRESOLVED claim was
		// true at its boundary, and the raw tail after it holds the result.
		ctx := resume(t, db, session, store.Latest)
		if ctx.Source != checkpoint.SourceMarker || ctx.Boundary != 17 {
			t.Fatalf("Resume(latest) source %s boundary %d", ctx.Source, ctx.Boundary)
		}
		checkContextHoldsFacts(t, db, session, ctx)
	})
}
