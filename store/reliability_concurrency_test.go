package store_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestConcurrency_AgainstModel runs writers (each the only writer of its
// sessions) while compactors, resumers, backups and dumps run on the same
// database; under -race. Each session is checked against a sequential
// model — the events its writer appended, in order, and the ledger a
// replay of them gives — and every resumed context seen on the way covers
// its session's raw log exactly once (nodes up to the boundary, then raw
// events up to the head).
func TestConcurrency_AgainstModel(t *testing.T) {
	t.Parallel()
	const writers, perWriter = 8, 2
	appends := 40
	if testing.Short() {
		appends = 15
	}
	db := dbtest.Open(t, store.Options{NoSync: true})
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	model := make([][]tier.Event, writers*perWriter) // session i's events, in order
	session := func(i int) string { return fmt.Sprintf("m%02d", i) }

	var wg, bg sync.WaitGroup
	done := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(w)))
			gens := make([]*crashGen, perWriter)
			for j := range gens {
				gens[j] = &crashGen{rng: rng, l: tier.NewLedger(), tag: fmt.Sprintf("w%d-%d", w, j)}
			}
			for i := 0; i < appends; i++ {
				j := rng.Intn(perWriter)
				s := w*perWriter + j
				evs := make([]tier.Event, 1+rng.Intn(3))
				for k := range evs {
					evs[k] = gens[j].next()
				}
				res, err := db.Append(session(s), evs...)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				if res.First != uint64(len(model[s])+1) {
					t.Errorf("%s: append landed at %d, the model's next seq is %d", session(s), res.First, len(model[s])+1)
				}
				model[s] = append(model[s], evs...)
			}
		}()
	}
	var ops [4]atomic.Int64 // compactions, resumes, backups, dumps
	loop := func(i int, fn func(rng *rand.Rand) error) {
		bg.Add(1)
		go func() {
			defer bg.Done()
			rng := rand.New(rand.NewSource(seed + 100 + int64(i)))
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := fn(rng); err != nil {
					t.Errorf("background op %d: %v", i, err)
					return
				}
				ops[i].Add(1)
			}
		}()
	}
	lossy, _ := compaction.NewLossy(compaction.DropArtifacts)
	for _, sum := range []compaction.Summarizer{compaction.Extractive{}, lossy} {
		c, err := compaction.NewCompactor(db, compaction.Options{Summarizer: sum, Policy: compaction.Policy{EveryEvents: 6, EveryTurns: 2, Fold: 2, MaxRoots: 3}})
		if err != nil {
			t.Fatal(err)
		}
		loop(0, func(rng *rand.Rand) error {
			s := session(rng.Intn(writers * perWriter))
			_, err := c.Run(context.Background(), s)
			if errors.Is(err, store.ErrSessionNotFound) || errors.Is(err, store.ErrConflict) {
				return nil
			}
			return err
		})
	}
	loop(1, func(rng *rand.Rand) error {
		s := session(rng.Intn(writers * perWriter))
		ctx, err := db.Resume(s, store.Latest)
		if errors.Is(err, store.ErrSessionNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return coversOnce(ctx)
	})
	if !dbtest.Postgres() { // a PostgreSQL store is no file to copy
		loop(2, func(*rand.Rand) error {
			var buf bytes.Buffer
			_, err := db.Backup(&buf)
			return err
		})
	}
	loop(3, func(*rand.Rand) error {
		_ = logicalState(t, db)
		return nil
	})
	wg.Wait()
	close(done)
	bg.Wait()
	t.Logf("%d writers × %d appends over %d sessions, with %d compaction runs, %d resumes, %d backups, %d dumps alongside",
		writers, appends, writers*perWriter, ops[0].Load(), ops[1].Load(), ops[2].Load(), ops[3].Load())
	if t.Failed() {
		return
	}
	for s, want := range model {
		st := state(t, db, session(s))
		if len(want) == 0 {
			continue
		}
		if uint64(len(want)) != st.Info.Head {
			t.Errorf("%s: head %d, the model has %d events", session(s), st.Info.Head, len(want))
			continue
		}
		if eventDigest(st.Events) != eventDigest(want) {
			t.Errorf("%s: the stored events differ from the model's", session(s))
		}
		l := tier.NewLedger()
		for i := range want {
			e := want[i]
			e.Seq = uint64(i + 1)
			if err := l.Apply(&e); err != nil {
				t.Fatalf("model replay: %v", err)
			}
		}
		if d := st.Ledger.Diff(l); len(d) != 0 {
			t.Errorf("%s: stored ledger differs from the model's: %v", session(s), d)
		}
		ctx, err := db.Resume(session(s), store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if err := coversOnce(ctx); err != nil {
			t.Errorf("%s: %v", session(s), err)
		}
	}
}

// coversOnce checks that a resumed context's nodes cover 1..Boundary
// without gap or overlap and its raw events are Boundary+1..Head.
func coversOnce(ctx *checkpoint.Context) error {
	next := uint64(1)
	for _, n := range ctx.Nodes {
		if n.From != next {
			return fmt.Errorf("resume of %q: node %d covers %d..%d, expected to start at %d", ctx.Session, n.ID, n.From, n.To, next)
		}
		next = n.To + 1
	}
	if next != ctx.Boundary+1 {
		return fmt.Errorf("resume of %q: nodes end at %d, boundary %d", ctx.Session, next-1, ctx.Boundary)
	}
	for _, e := range ctx.Events {
		if e.Seq != next {
			return fmt.Errorf("resume of %q: raw seq %d where %d was expected", ctx.Session, e.Seq, next)
		}
		next++
	}
	if next != ctx.Head+1 {
		return fmt.Errorf("resume of %q: ends at %d, head %d", ctx.Session, next-1, ctx.Head)
	}
	return nil
}
