package compaction_test

import (
	"context"
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

			path := db.Path()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			re, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
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
