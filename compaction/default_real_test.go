package compaction_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// TestDefaultPolicy_RealSessions replays every recorded session of
// ../shared/data/real and the Claude Code transcripts of
// ../shared/data/claude-code (imported) under compaction.DefaultPolicy
// with the extractive summarizer, turn by turn as an agent appends: the
// median session gets at least 2 L1 summaries, every session's tail is left
// under the budget, and every session resumes — from a marker where it has
// a summary — to a context that holds every fact at head, the same after a
// reopen.
func TestDefaultPolicy_RealSessions(t *testing.T) {
	type session struct {
		id     string
		events []tier.Event
	}
	var all []session
	for _, f := range dbtest.RealSessions(t) {
		ids, evs := readJSONL(t, f, strings.TrimSuffix(filepath.Base(f), ".jsonl"))
		for _, id := range ids {
			all = append(all, session{id, evs[id]})
		}
	}
	paths, _ := filepath.Glob("../../shared/data/claude-code/*.jsonl")
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		ss, _, err := transcript.Read(transcript.ClaudeCode, f, transcript.Options{File: path})
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, s := range ss {
			all = append(all, session{"claude_" + s.ID, s.Events})
		}
	}

	db := dbtest.Open(t, store.Options{NoSync: true})
	c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.DefaultPolicy})
	perSession := make([]int, len(all))
	sums := map[string]string{}
	for i, s := range all {
		for _, turn := range splitTurns(s.events) {
			for _, r := range agentLoopBatch(t, db, c, s.id, turn) {
				if !r.Committed() {
					t.Errorf("%s: extractive compaction of %s %d..%d refused: %v", s.id, r.Depth, r.From, r.To, r.Refused)
				}
				if r.Kind == store.PlanSpan {
					perSession[i]++
				}
			}
		}
		info := info(t, db, s.id)
		if info.TailTokens >= compaction.DefaultEveryTokens {
			t.Errorf("%s: a tail of %d tokens is left, the budget is %d", s.id, info.TailTokens, compaction.DefaultEveryTokens)
		}
		ctx := resume(t, db, s.id, store.Latest)
		if perSession[i] > 0 && (ctx.Source != checkpoint.SourceMarker || len(ctx.Nodes) == 0) {
			t.Errorf("%s: %d summaries, resumed from %s with %d nodes", s.id, perSession[i], ctx.Source, len(ctx.Nodes))
		}
		checkContextHoldsFacts(t, db, s.id, ctx)
		sums[s.id] = ctx.SHA256()
	}
	sorted := slices.Clone(perSession)
	slices.Sort(sorted)
	median := sorted[len(sorted)/2]
	t.Logf("%d sessions: L1 summaries per session min %d, median %d, max %d", len(all), sorted[0], median, sorted[len(sorted)-1])
	if median < 2 {
		t.Errorf("the median session gets %d summaries under the default policy, want 2 or more", median)
	}
	verifyClean(t, db)

	re := reopen(t, db)
	for _, s := range all {
		if got := resume(t, re, s.id, store.Latest).SHA256(); got != sums[s.id] {
			t.Errorf("%s: Resume(latest) after reopen: sha256 %s, before %s", s.id, got, sums[s.id])
		}
	}
}

// agentLoopBatch appends events in one call, as an agent appends a turn,
// and runs the compactor after it.
func agentLoopBatch(t testing.TB, db *store.DB, c *compaction.Compactor, session string, events []tier.Event) []compaction.Result {
	t.Helper()
	if _, err := db.Append(session, events...); err != nil {
		t.Fatalf("%s: append: %v", session, err)
	}
	rs, err := c.Run(t.Context(), session)
	if err != nil {
		t.Fatalf("%s: run: %v", session, err)
	}
	return rs
}
