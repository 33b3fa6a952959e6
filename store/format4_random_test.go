package store_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestFormat4_FoldsOnEveryUndamagedFile appends in many patterns —
// 1..12 events at a time, many sessions, new sessions, group commits
// mixing new sessions, direct and journal appends and compaction commits,
// reopens with another JournalEvents (3..7) — and after every successful
// commit asserts that the journal is below JournalEvents (a commit that
// found it at JournalEvents folded it), that it holds exactly its
// sequence's entries, and that every session with a pointer has entries.
// canFold refuses a journal whose entries are not where they belong: on an
// undamaged file it must never refuse, or the journal would grow without
// bound. -strata.fold-seeds and -strata.fold-steps run more (the second
// reading ran 6 seeds of 700 steps).
//
// Format 5 runs the same: there a session's first runs of events stay in
// its own bucket until its first small append turns it hot, and the first
// fold of its entries finds its older events there.
func TestFormat4_FoldsOnEveryUndamagedFile(t *testing.T) {
	for _, format := range []int{4, 5} {
		for seed := uint64(1); seed <= uint64(*foldSeeds); seed++ {
			t.Run(fmt.Sprintf("format %d/%d", format, seed), func(t *testing.T) { foldRandom(t, format, seed) })
		}
	}
}

var (
	foldSeeds = flag.Int("strata.fold-seeds", 2, "seeds of TestFormat4_FoldsOnEveryUndamagedFile (odd: many short sessions, even: few long ones)")
	foldSteps = flag.Int("strata.fold-steps", 250, "steps of each seed of TestFormat4_FoldsOnEveryUndamagedFile")
)

func foldRandom(t *testing.T, format int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	path := filepath.Join(t.TempDir(), "strata.db")
	je := 3 + rng.IntN(5)
	open := func() *store.DB {
		t.Helper()
		db, err := store.Open(path, store.Options{Format: format, Create: true, NoSync: true, JournalEvents: je})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	m := model4{}
	var ids []string
	newEvery := 6 // odd seeds: many short sessions; even: few long ones
	if seed%2 == 0 {
		newEvery = 60
	}
	folds, commits, groupPlans, groupNew := 0, 0, 0, 0
	pick := func() string {
		if len(ids) == 0 || rng.IntN(newEvery) == 0 {
			id := fmt.Sprintf("s%03d", len(ids))
			ids = append(ids, id)
			return id
		}
		return ids[rng.IntN(len(ids))]
	}
	size := func() int {
		if rng.IntN(3) == 0 {
			return 8 + rng.IntN(5) // direct (when no journal entries)
		}
		return 1 + rng.IntN(7)
	}
	var lastSeq uint64
	check := func(what string) {
		t.Helper()
		seq, n, ptrs, err := store.JournalState(db)
		if err != nil {
			t.Fatal(err)
		}
		if seq >= uint64(je) {
			t.Fatalf("after %s: journal sequence %d >= JournalEvents %d: the commit did not fold", what, seq, je)
		}
		if uint64(n) != seq {
			t.Fatalf("after %s: journal holds %d entries, sequence %d", what, n, seq)
		}
		if n == 0 && ptrs != 0 {
			t.Fatalf("after %s: empty journal, %d pointers left in h", what, ptrs)
		}
		if seq < lastSeq {
			folds++
		}
		lastSeq = seq
		commits++
	}
	evsFor := func(id string, n, pending int) []tier.Event {
		evs := make([]tier.Event, n)
		for i := range evs {
			evs[i] = gen4(id, uint64(len(m[id])+pending+1+i))
			evs[i].Time = int64(1 + commits)
		}
		return evs
	}
	for step := 0; step < *foldSteps; step++ {
		switch r := rng.IntN(20); {
		case r == 0: // reopen, maybe with another journal size
			mustClose(t, db)
			if rng.IntN(2) == 0 {
				je = 3 + rng.IntN(5)
			}
			db = open()
			lastSeq = 0
			// A reopen with a smaller JournalEvents: the next commit folds.
			m.gen(t, db, pick(), 1)
			lastSeq = 0
			check("reopen+append")
		case r <= 4: // a group commit of 2..5 writes
			var ws []store.GroupWrite
			pending := map[string]int{}
			planned := map[string]bool{}
			n := 2 + rng.IntN(4)
			for range n {
				if rng.IntN(5) == 0 && len(ids) > 0 {
					id := ids[rng.IntN(len(ids))]
					if pending[id] == 0 && !planned[id] {
						p, err := db.PlanSpan(id, store.SpanPolicy{Events: 4}, 1000)
						if err == nil {
							planned[id] = true
							groupPlans++
							ws = append(ws, store.GroupWrite{Session: id, Plan: p, Summary: store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}})
							continue
						} else if !errors.Is(err, store.ErrNothingToCompact) {
							t.Fatal(err)
						}
					}
				}
				before := len(ids)
				id := pick()
				if len(ids) > before {
					groupNew++
				}
				k := size()
				ws = append(ws, store.GroupWrite{Session: id, Events: evsFor(id, k, pending[id])})
				pending[id] += k
			}
			res := store.WriteGroup(db, ws...)
			for i, w := range ws {
				if res[i].Err != nil {
					t.Fatalf("group write %d (%q, plan %v): %v", i, w.Session, w.Plan != nil, res[i].Err)
				}
				if w.Plan != nil {
					continue
				}
				if want := uint64(len(m[w.Session]) + 1); res[i].Append.First != want {
					t.Fatalf("group append to %q: first %d, want %d", w.Session, res[i].Append.First, want)
				}
				for j, e := range w.Events {
					e.Seq = res[i].Append.First + uint64(j)
					m[w.Session] = append(m[w.Session], e)
				}
			}
			check(fmt.Sprintf("group of %d", len(ws)))
		case r == 5 && len(ids) > 0: // a compaction commit alone
			id := ids[rng.IntN(len(ids))]
			p, err := db.PlanSpan(id, store.SpanPolicy{Events: 4}, 1000)
			if errors.Is(err, store.ErrNothingToCompact) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
				t.Fatal(err)
			}
			check("commit")
		default:
			id := pick()
			m.gen(t, db, id, size())
			check("append")
		}
		if step%100 == 99 {
			checkReads4(t, db, m)
		}
	}
	checkReads4(t, db, m)
	mustClose(t, db)
	dbtest.MustVerify(t, path)
	t.Logf("seed %d: %d sessions, %d commits, %d folds seen, %d plans and %d new sessions in groups, final JournalEvents %d", seed, len(ids), commits, folds, groupPlans, groupNew, je)
	if folds == 0 {
		t.Errorf("no fold seen")
	}
}
