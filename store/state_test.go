package store_test

import (
	"context"
	"fmt"
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
)

// TestResumeFitted: the context is Resume's, byte for byte, and the
// fitted state is the raw log's at the head — a call opened after the
// marker's boundary is in it, a request the summary covered too — within
// the budget; a smaller budget lists fewer facts and counts the others.
func TestResumeFitted(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Text: "rename the flag"},
		tier.Event{Kind: tier.KindConstraint, Key: "compat", Text: "keep the old flag as an alias"})
	p, err := db.PlanSpan("s", 2, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatal(err)
	}
	evs := []tier.Event{{Kind: tier.KindToolCall, ID: "c9", Name: "edit", Text: "cmd/main.go"}}
	for i := 0; i < 30; i++ {
		evs = append(evs, tier.Event{Kind: tier.KindArtifact, Key: "file/" + strings.Repeat("x", i+1), Text: strings.Repeat("an artifact ", 20)})
	}
	mustAppend(t, db, "s", evs...)

	want := must(db.Resume("s", store.Latest))
	ctx, f, err := db.ResumeFitted("s", store.Latest, 4000)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.SHA256() != want.SHA256() {
		t.Errorf("ResumeFitted's context differs from Resume's")
	}
	for _, s := range []string{"c9", "rename the flag", "compat"} {
		if !strings.Contains(f.Text, s) {
			t.Errorf("the fitted state lacks %q:\n%s", s, f.Text)
		}
	}
	if f.Tokens > 4000 || f.Shown != f.Facts || len(f.LeftOut) != 0 {
		t.Errorf("budget 4000: %d tokens, %d of %d facts shown, left out %v", f.Tokens, f.Shown, f.Facts, f.LeftOut)
	}
	_, small, err := db.ResumeFitted("s", store.Latest, checkpoint.MinStateBudget)
	if err != nil {
		t.Fatal(err)
	}
	if small.Facts != f.Facts || small.Shown >= small.Facts || len(small.LeftOut) == 0 || small.Tokens > checkpoint.MinStateBudget {
		t.Errorf("budget %d: %d tokens, %d of %d facts shown, left out %v", checkpoint.MinStateBudget, small.Tokens, small.Shown, small.Facts, small.LeftOut)
	}
	if _, _, err := db.ResumeFitted("nobody", store.Latest, 4000); err == nil {
		t.Error("ResumeFitted of an unknown session succeeded")
	}
}

// realSession returns the id of a real session file (its name) and its
// events.
func realSession(t testing.TB, name string) (string, []tier.Event) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []tier.Event
	for _, r := range readJSONL(t, f, filepath.Base(name)) {
		evs = append(evs, r.Event)
	}
	return strings.TrimSuffix(filepath.Base(name), ".jsonl"), evs
}

// compactedReal stores a session as an agent would — appends of 50
// events, each followed by the extractive compactor under a small policy
// (a summary every 500 tokens, folds of 4, digests past 4 roots) — so
// that its first root covers a growing prefix.
func compactedReal(t testing.TB, db *store.DB, session string, evs []tier.Event) {
	t.Helper()
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{},
		Policy: compaction.Policy{EveryTokens: 500, Fold: 4, MaxRoots: 4, Budget: compaction.DefaultBudget}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(evs); i += 50 {
		if _, err := db.Append(session, evs[i:min(i+50, len(evs))]...); err != nil {
			t.Fatalf("%s: %v", session, err)
		}
		if _, err := comp.Run(context.Background(), session); err != nil {
			t.Fatalf("%s: %v", session, err)
		}
	}
}

// TestStateAt_TailEqualsReplay: on every real session (../shared/data/real)
// stored and compacted, the state StateAt composes from the first root's
// facts and the events after it equals the replay of the whole raw log —
// at the head, at the first root's end and just after it, and midway.
func TestStateAt_TailEqualsReplay(t *testing.T) {
	files := dbtest.RealSessions(t)
	if testing.Short() {
		files = files[:len(files)/4]
	}
	db := dbtest.Open(t, store.Options{NoSync: true})
	composed, rejections := 0, 0
	for _, name := range files {
		session, evs := realSession(t, name)
		if len(evs) == 0 {
			continue
		}
		compactedReal(t, db, session, evs)
		err := db.View(func(s *store.Snapshot) error {
			roots, err := s.Roots(session)
			if err != nil {
				return err
			}
			head := uint64(len(evs))
			seqs := []uint64{head, head / 2}
			if len(roots) > 0 {
				composed++
				seqs = append(seqs, roots[0].To, roots[0].To+1)
			}
			for _, seq := range seqs {
				if seq == 0 || seq > head {
					continue
				}
				got, err := s.StateAt(session, seq)
				if err != nil {
					return err
				}
				want, err := s.StateAtReplay(session, seq)
				if err != nil {
					return err
				}
				if !got.Claims.Equal(&want.Claims) || !slices.Equal(got.Rejected, want.Rejected) {
					t.Errorf("%s at seq %d: composed state\n%+v\nreplayed\n%+v", session, seq, got, want)
				}
				if seq == head {
					rejections += len(want.Rejected)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", session, err)
		}
	}
	if composed == 0 {
		t.Fatal("no real session got a root: nothing composed")
	}
	t.Logf("%d real sessions, %d with a first root to compose from; %d rejections at the heads", len(files), composed, rejections)
}

// BenchmarkStateAt compares the state at the head composed from the first
// root's facts and the tail (tail) with the replay of the whole raw log
// (full) — the cost of `strata resume --budget`'s state — on the longest
// real session (../shared/data/real) and on a session of 20,000 events
// (forkTurn's), each stored as compactedReal does: digests keep the
// frame at 4 roots, so the first root covers most of the log.
func BenchmarkStateAt(b *testing.B) {
	db := dbtest.Open(b, store.Options{NoSync: true})
	var sessions []string
	if files := dbtest.RealSessionFiles(); len(files) > 0 {
		var session string
		var evs []tier.Event
		for _, name := range files {
			if id, e := realSession(b, name); len(e) > len(evs) {
				session, evs = id, e
			}
		}
		compactedReal(b, db, session, evs)
		sessions = append(sessions, session)
	}
	var big []tier.Event
	for i := range 5000 {
		big = append(big, forkTurn(i)...)
	}
	compactedReal(b, db, "big", big)
	sessions = append(sessions, "big")
	for _, session := range sessions {
		info, err := db.Info(session)
		if err != nil {
			b.Fatal(err)
		}
		var firstTo uint64
		if err := db.View(func(s *store.Snapshot) error {
			roots, err := s.Roots(session)
			if len(roots) > 0 {
				firstTo = roots[0].To
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: %d events, the first root ends at seq %d", session, info.Head, firstTo)
		for _, c := range []struct {
			name string
			fn   func(*store.Snapshot) (checkpoint.State, error)
		}{
			{"full", func(s *store.Snapshot) (checkpoint.State, error) { return s.StateAtReplay(session, info.Head) }},
			{"tail", func(s *store.Snapshot) (checkpoint.State, error) { return s.StateAt(session, info.Head) }},
		} {
			b.Run(fmt.Sprintf("events=%d/%s", info.Head, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := db.View(func(s *store.Snapshot) error {
						_, err := c.fn(s)
						return err
					}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestStateAt_RejectionsOfThePrefix: a failed result that the user's
// rejection follows is a rejection in the composed state as in the
// replay, inside the first root's span and across its end (the failed
// result its last event, the rejection the tail's first).
func TestStateAt_RejectionsOfThePrefix(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	rejected := func(turn uint64, id, cmd string) []tier.Event {
		return []tier.Event{
			{Kind: tier.KindUser, Turn: turn, Text: "step " + id},
			{Kind: tier.KindToolCall, Turn: turn, ID: id, Name: "Bash", Text: `{"command":"` + cmd + `"}`},
			{Kind: tier.KindToolResult, Turn: turn, ID: id, Failed: true, Text: "The user doesn't want to proceed with this tool use."},
			{Kind: tier.KindRejected, Turn: turn, Key: "approach/" + id, Text: cmd},
		}
	}
	if _, err := db.Append("s", rejected(1, "c1", "rm -rf build")...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append("s", rejected(2, "c2", "git push -f")[:3]...); err != nil {
		t.Fatal(err)
	}
	commit := func(to uint64) {
		t.Helper()
		p, err := db.PlanSpan("s", to, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(p, store.Summary{Claims: p.Required.Claims(), Summarizer: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	commit(7) // the first root ends at c2's failed result
	if _, err := db.Append("s", rejected(2, "c2", "git push -f")[3], tier.Event{Kind: tier.KindAssistant, Turn: 2, Text: "ok"}); err != nil {
		t.Fatal(err)
	}
	err := db.View(func(s *store.Snapshot) error {
		for _, seq := range []uint64{7, 8, 9} {
			got, err := s.StateAt("s", seq)
			if err != nil {
				return err
			}
			want, err := s.StateAtReplay("s", seq)
			if err != nil {
				return err
			}
			if !got.Claims.Equal(&want.Claims) || !slices.Equal(got.Rejected, want.Rejected) {
				t.Errorf("at seq %d: composed %+v, replayed %+v", seq, got, want)
			}
			if n := map[uint64]int{7: 1, 8: 2, 9: 2}[seq]; len(got.Rejected) != n {
				t.Errorf("at seq %d: rejections %v, want %d", seq, got.Rejected, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
