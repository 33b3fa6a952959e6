package compaction_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// dropClass maps a lossy summarizer's drop class to the reason class of
// the refusals it causes.
var dropClass = map[string]string{
	compaction.DropNegatives:   marker.ClassRetention,
	compaction.DropArtifacts:   marker.ClassArtifact,
	compaction.DropConstraints: marker.ClassConstraint,
	compaction.DropOpen:        marker.ClassClosure,
}

// TestCompactor_RealSessions replays every real agent session of
// ../shared/data/real (one database per summarizer, one session per file)
// with an L1 node every 50 events and a fold every 4 roots, appending turn
// by turn and compacting after each turn as an agent would.
func TestCompactor_RealSessions(t *testing.T) {
	files := dbtest.RealSessions(t)
	type replayed struct {
		session string
		events  []tier.Event
	}
	var all []replayed
	for _, f := range files {
		sessions, evs := readJSONL(t, f, strings.TrimSuffix(filepath.Base(f), ".jsonl"))
		for _, s := range sessions {
			all = append(all, replayed{s, evs[s]})
		}
	}
	policy := compaction.Policy{EveryEvents: 50, Fold: 4}

	// The lossy run alternates two summarizers between sessions, so that
	// every drop class is exercised in one pass.
	lossyDrops := [][]string{
		{compaction.DropNegatives, compaction.DropArtifacts},
		{compaction.DropConstraints, compaction.DropOpen},
	}
	for _, tc := range []struct {
		name  string
		lossy bool
	}{{"extractive", false}, {"lossy", true}} {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true})
			compactors := []*compaction.Compactor{newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})}
			allowed := []map[string]bool{{}}
			if tc.lossy {
				compactors, allowed = nil, nil
				for _, drop := range lossyDrops {
					compactors = append(compactors, newCompactor(t, db, compaction.Options{Summarizer: mustLossy(t, drop...), Policy: policy}))
					classes := map[string]bool{}
					for _, d := range drop {
						classes[dropClass[d]] = true
					}
					allowed = append(allowed, classes)
				}
			}
			var committed, refused, events int
			refusedBy := map[string]int{}
			for i, r := range all {
				c, allowed := compactors[i%len(compactors)], allowed[i%len(compactors)]
				events += len(r.events)
				for _, turn := range splitTurns(r.events) {
					if _, err := db.Append(r.session, turn...); err != nil {
						t.Fatalf("%s: append: %v", r.session, err)
					}
					results, err := c.Run(context.Background(), r.session)
					if err != nil {
						t.Fatalf("%s: run: %v", r.session, err)
					}
					for _, res := range results {
						if res.Committed() {
							committed++
							continue
						}
						refused++
						if !tc.lossy {
							t.Errorf("%s: extractive compaction of %s %d..%d refused: %v", r.session, res.Depth, res.From, res.To, res.Refused)
						}
						for _, f := range res.Refused.Failures {
							refusedBy[f.Class]++
							if !allowed[f.Class] {
								t.Errorf("%s: refusal of %d..%d for %s, a class the summarizer does not drop", r.session, res.From, res.To, f)
							}
						}
					}
				}
			}
			t.Logf("%d sessions, %d events: %d compactions committed, %d refused %v", len(all), events, committed, refused, refusedBy)
			if committed == 0 {
				t.Error("nothing was compacted")
			}
			if tc.lossy && len(refusedBy) != len(dropClass) {
				t.Errorf("refusals by class %v: not every drop class was refused", refusedBy)
			}

			verifyClean(t, db)
			var audited int
			sums := map[string]string{}
			for i, r := range all {
				a := refusals(t, db, r.session)
				audited += len(a)
				for _, x := range a {
					for _, f := range x.Failures {
						if !allowed[i%len(allowed)][f.Class] {
							t.Errorf("%s: audit %d: %s", r.session, x.ID, f)
						}
					}
				}
				if !tc.lossy {
					checkValidMarkers(t, db, r.session)
				}
				ctx := resume(t, db, r.session, store.Latest)
				if ctx.Source == checkpoint.SourceMarker && len(ctx.Nodes) == 0 {
					t.Errorf("%s: marker-served context without nodes", r.session)
				}
				sums[r.session] = ctx.SHA256()
				if again := resume(t, db, r.session, store.Latest); again.SHA256() != sums[r.session] {
					t.Errorf("%s: Resume(latest) twice differs", r.session)
				}
			}
			if audited != refused {
				t.Errorf("%d refusals audited, %d reported", audited, refused)
			}
			if !tc.lossy {
				// Every L1 boundary falls every 50 events: sessions longer than
				// that have markers.
				long := slices.IndexFunc(all, func(r replayed) bool { return len(r.events) >= 200 })
				if long >= 0 {
					if ctx := resume(t, db, all[long].session, store.Latest); ctx.Source != checkpoint.SourceMarker || ctx.Boundary < 150 {
						t.Errorf("%s (%d events): Resume(latest) source %s boundary %d", all[long].session, len(all[long].events), ctx.Source, ctx.Boundary)
					}
				}
			}

			re := reopen(t, db)
			for _, r := range all {
				if got := resume(t, re, r.session, store.Latest).SHA256(); got != sums[r.session] {
					t.Errorf("%s: Resume(latest) after reopen: sha256 %s, before %s", r.session, got, sums[r.session])
				}
			}
		})
	}
}

// splitTurns cuts a session's events where each user event starts a turn.
func splitTurns(events []tier.Event) [][]tier.Event {
	var out [][]tier.Event
	start := 0
	for i := 1; i <= len(events); i++ {
		if i == len(events) || events[i].Kind == tier.KindUser {
			out = append(out, events[start:i])
			start = i
		}
	}
	return out
}

// TestCompactor_ClaudeCodeFailuresSurviveCompaction imports the real Claude
// Code transcripts of ../shared/data/claude-code and compacts them every 20
// events: the lossy summarizer that drops negatives is refused for every
// failed tool call it drops, and with the extractive one every failed call
// is in the resumed context — claimed FAILED by the node covering it, or in
// the raw tail.
func TestCompactor_ClaudeCodeFailuresSurviveCompaction(t *testing.T) {
	paths, _ := filepath.Glob("../../shared/data/claude-code/*.jsonl")
	if len(paths) == 0 {
		t.Skip("../../shared/data/claude-code: no real Claude Code transcripts here")
	}
	failedTotal := 0
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		ss, _, err := transcript.Read(transcript.ClaudeCode, f, transcript.Options{})
		f.Close()
		if err != nil || len(ss) != 1 {
			t.Fatalf("%s: %d sessions, %v; want one", path, len(ss), err)
		}
		evs := ss[0].Events
		for i := range evs {
			evs[i].Ref = "" // the agent loop appends event by event: a record's events are appended together, or refused
		}
		failed := 0
		for _, e := range evs {
			if e.Kind == tier.KindToolResult && e.Failed {
				failed++
			}
		}
		failedTotal += failed
		policy := compaction.Policy{EveryEvents: 20, Fold: 4}
		name := filepath.Base(path)

		db := dbtest.Open(t, store.Options{NoSync: true})
		lossy := newCompactor(t, db, compaction.Options{Summarizer: mustLossy(t, compaction.DropNegatives), Policy: policy})
		refusedFor := 0
		for _, r := range agentLoop(t, db, lossy, "s", evs) {
			if r.Refused != nil {
				for _, f := range r.Refused.Failures {
					if f.Class == marker.ClassRetention && strings.Contains(f.Item, "@") {
						refusedFor++
					}
				}
			}
		}
		if failed > 0 && refusedFor == 0 {
			t.Errorf("%s: %d failed calls, and the summarizer that drops them was never refused for one", name, failed)
		}

		db = dbtest.Open(t, store.Options{NoSync: true})
		ext := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
		agentLoop(t, db, ext, "s", evs)
		ctx := resume(t, db, "s", store.Latest)
		stored := allEvents(t, db, "s")
		for _, e := range stored {
			if e.Kind != tier.KindToolResult || !e.Failed {
				continue
			}
			if e.Seq > ctx.Boundary {
				continue // in the raw tail
			}
			held := false
			for _, n := range ctx.Nodes {
				held = held || n.From <= e.Seq && e.Seq <= n.To && slices.ContainsFunc(n.Claims.Failures, func(r tier.Resolution) bool {
					return r.ID == e.ID && r.At == e.Seq && r.Reason == e.Text
				})
			}
			if !held {
				t.Errorf("%s: failed call %s at seq %d is not claimed FAILED in the resumed context", name, e.ID, e.Seq)
			}
		}
	}
	if failedTotal == 0 {
		t.Error("the real transcripts hold no failed tool call: the test tests nothing")
	}
}
