package compaction_test

import (
	"os"
	"path/filepath"
	"regexp"
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

// realSession is one session of the development data, its events as an
// agent appends them.
type realSession struct {
	id     string
	events []tier.Event
	tokens int // the raw session as a resumed context carries it
}

// allRealSessions returns the recorded sessions of ../shared/data/real and
// the Claude Code transcripts of ../shared/data/claude-code, imported (ids
// "claude_" + the transcript's), skipping the test where they are absent.
func allRealSessions(t *testing.T) []realSession {
	t.Helper()
	var all []realSession
	for _, f := range dbtest.RealSessions(t) {
		ids, evs := readJSONL(t, f, strings.TrimSuffix(filepath.Base(f), ".jsonl"))
		for _, id := range ids {
			all = append(all, realSession{id: id, events: evs[id]})
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
			all = append(all, realSession{id: "claude_" + s.ID, events: s.Events})
		}
	}
	for i := range all {
		size := 0
		for j := range all[i].events {
			size += checkpoint.EventTextLen(&all[i].events[j])
		}
		all[i].tokens = tier.TokensOfBytes(size)
	}
	return all
}

// TestDefaultPolicy_RealSessions replays every recorded session of
// ../shared/data/real and the Claude Code transcripts of
// ../shared/data/claude-code (imported) under compaction.DefaultPolicy
// with the extractive summarizer, turn by turn as an agent appends: a
// session gets an L1 summary exactly when it outgrows the L1 boundary
// (about one per DefaultEveryTokens tokens: the 143k-token Claude Code
// session a handful, not a hundred), the tail is left under the boundary,
// the resumed context stays within the window's share give or take the
// event that ends a span, no node's narrative is only ellipses, and every
// session resumes — from a marker where it has a summary — to a context
// that holds every fact at head, the same after a reopen.
func TestDefaultPolicy_RealSessions(t *testing.T) {
	all := allRealSessions(t)
	pol := compaction.DefaultPolicy
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: pol})
	perSession := make([]int, len(all))
	sums := map[string]string{}
	share := int(compaction.DefaultWindow * compaction.DefaultShare)
	largestCtx, compacted := 0, 0
	for i, s := range all {
		largest := 0 // the largest event, as a context renders it
		for j := range s.events {
			largest = max(largest, tier.TokensOfBytes(checkpoint.EventTextLen(&s.events[j])))
		}
		for _, turn := range splitTurns(s.events) {
			for _, r := range agentLoopBatch(t, db, c, s.id, turn) {
				if !r.Committed() {
					t.Errorf("%s: extractive compaction of %s %d..%d refused: %v", s.id, r.Depth, r.From, r.To, r.Refused)
				}
				if r.Kind == store.PlanSpan {
					perSession[i]++
				}
			}
			if s.tokens < share {
				continue // the whole session raw fits the share
			}
			ctx := resume(t, db, s.id, store.Latest)
			got := tier.TokensOfBytes(len(ctx.Text()))
			largestCtx = max(largestCtx, got)
			if got > share+largest {
				t.Errorf("%s: a resumed context of %d tokens, over the share of %d by more than the largest event (%d)", s.id, got, share, largest)
			}
		}
		if perSession[i] > 0 {
			compacted++
		}
		switch n := perSession[i]; {
		case s.tokens < pol.EveryTokens && n != 0:
			t.Errorf("%s: %d tokens, under the boundary of %d, got %d summaries", s.id, s.tokens, pol.EveryTokens, n)
		case s.tokens >= pol.EveryTokens && (n == 0 || n > s.tokens/pol.EveryTokens):
			t.Errorf("%s: %d tokens got %d summaries, want 1 to %d", s.id, s.tokens, n, s.tokens/pol.EveryTokens)
		}
		info := info(t, db, s.id)
		if info.TailTokens >= pol.EveryTokens {
			t.Errorf("%s: a tail of %d tokens is left, the boundary is %d", s.id, info.TailTokens, pol.EveryTokens)
		}
		ctx := resume(t, db, s.id, store.Latest)
		if perSession[i] > 0 && (ctx.Source != checkpoint.SourceMarker || len(ctx.Nodes) == 0) {
			t.Errorf("%s: %d summaries, resumed from %s with %d nodes", s.id, perSession[i], ctx.Source, len(ctx.Nodes))
		}
		checkContextHoldsFacts(t, db, s.id, ctx)
		checkNarratives(t, db, s.id)
		sums[s.id] = ctx.SHA256()
		if strings.HasPrefix(s.id, "claude_") {
			t.Logf("%s: %d events, %d tokens: %d L1 summaries", s.id, len(s.events), s.tokens, perSession[i])
		}
	}
	sorted := slices.Clone(perSession)
	slices.Sort(sorted)
	t.Logf("%d sessions, %d with summaries: L1 summaries per session min %d, median %d, max %d; the largest resumed context %d tokens",
		len(all), compacted, sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1], largestCtx)
	verifyClean(t, db)

	re := reopen(t, db)
	for _, s := range all {
		if got := resume(t, re, s.id, store.Latest).SHA256(); got != sums[s.id] {
			t.Errorf("%s: Resume(latest) after reopen: sha256 %s, before %s", s.id, got, sums[s.id])
		}
	}
}

// TestExtractive_RealNarratives compacts the real sessions with the
// extractive summarizer at a small size budget (every 500 tokens, folds of
// 4: thousands of nodes, down to depth 4 on the Claude Code session) —
// every coding session and every fourth customer-support one, whose
// sessions all open with the same kind of span, a system prompt stored as
// a constraint: no node's narrative is empty or only ellipses and the
// labels of what it summarizes.
func TestExtractive_RealNarratives(t *testing.T) {
	all := allRealSessions(t)
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{},
		Policy: compaction.Policy{EveryTokens: 500, Fold: compaction.DefaultFold, Budget: compaction.DefaultBudget}})
	support := 0
	for _, s := range all {
		if strings.HasPrefix(s.id, "tau_") {
			if support++; support%4 != 1 {
				continue
			}
		}
		for _, turn := range splitTurns(s.events) {
			agentLoopBatch(t, db, c, s.id, turn)
		}
		checkNarratives(t, db, s.id)
	}
}

// labels are what an extractive narrative puts before the text of each
// line: the children's depths, ids and spans, then an event's kind, with a
// call's id and name or another event's key or id.
var labels = regexp.MustCompile(`(?m)^(\[L\d+ \d+, seq \d+\.\.\d+\] )*[a-z_]+( \S+){0,2}:`)

// checkNarratives fails t for every node of session whose narrative holds
// nothing but labels, ellipses and blanks.
func checkNarratives(t testing.TB, db *store.DB, session string) {
	t.Helper()
	err := db.View(func(s *store.Snapshot) error {
		return s.Nodes(session, func(n tier.Node) error {
			if strings.Trim(labels.ReplaceAllString(n.Narrative, ""), " \n…") == "" {
				t.Errorf("%s: node %d (%s %d..%d) has a narrative of nothing but ellipses: %q", session, n.ID, n.Depth, n.From, n.To, n.Narrative)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
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
