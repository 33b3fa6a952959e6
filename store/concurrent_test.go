package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// ack is one acknowledged append: who made it and where it landed.
type ack struct {
	session string
	texts   []string
	res     store.AppendResult
}

// checkAcks checks that every acknowledged append is stored where its result
// says, that each session is gapless and holds nothing else, that each
// writer's appends landed in its order, and that the stored ledger is the
// replay of the raw log.
func checkAcks(t *testing.T, db *store.DB, byWriter [][]ack) {
	t.Helper()
	states := allStates(t, db)
	stored := map[string]int{}
	for w, acks := range byWriter {
		last := map[string]uint64{}
		for _, a := range acks {
			st := states[a.session]
			if a.res.Last-a.res.First+1 != uint64(len(a.texts)) {
				t.Fatalf("writer %d: result %+v for %d events", w, a.res, len(a.texts))
			}
			if a.res.First <= last[a.session] {
				t.Errorf("writer %d: append at %d after one at %d: out of the writer's order", w, a.res.First, last[a.session])
			}
			last[a.session] = a.res.Last
			for i, text := range a.texts {
				seq := a.res.First + uint64(i)
				if seq > uint64(len(st.Events)) {
					t.Fatalf("writer %d: acknowledged seq %d of %q is not stored (head %d)", w, seq, a.session, len(st.Events))
				}
				if got := st.Events[seq-1].Text; got != text {
					t.Errorf("%q seq %d holds %q, the writer appended %q", a.session, seq, got, text)
				}
			}
			stored[a.session] += len(a.texts)
		}
	}
	for id, st := range states {
		for i, e := range st.Events {
			if e.Seq != uint64(i+1) {
				t.Fatalf("%q: event %d has seq %d: not gapless", id, i, e.Seq)
			}
		}
		if st.Info.Head != uint64(stored[id]) {
			t.Errorf("%q: head %d, %d events acknowledged", id, st.Info.Head, stored[id])
		}
		if d := st.Ledger.Diff(replayLedger(t, st.Events)); len(d) != 0 {
			t.Errorf("%q: stored ledger differs from the replay: %v", id, d)
		}
	}
}

func TestAppend_Concurrent(t *testing.T) {
	const writers, sessions = 64, 16
	appends := 100
	if testing.Short() {
		appends = 20
	}
	db := dbtest.Open(t, store.Options{})
	byWriter := make([][]ack, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			session := fmt.Sprintf("s%02d", w%sessions)
			open := ""
			for i := 0; i < appends; i++ {
				// One to three events; a call opened in one append is
				// resolved in the next, so the ledger is shared state.
				var evs []tier.Event
				text := func(j int) string { return fmt.Sprintf("w%d i%d e%d", w, i, j) }
				if open != "" {
					evs = append(evs, tier.Event{Kind: tier.KindToolResult, ID: open, Failed: i%5 == 0, Key: fmt.Sprintf("w%d/k", w), Text: text(len(evs))})
					open = ""
				}
				evs = append(evs, tier.Event{Kind: tier.KindAssistant, Text: text(len(evs))})
				if i%2 == 0 {
					open = fmt.Sprintf("w%d-c%d", w, i)
					evs = append(evs, tier.Event{Kind: tier.KindToolCall, ID: open, Text: text(len(evs))})
				}
				res, err := db.Append(session, evs...)
				if err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
				a := ack{session: session, res: res}
				for _, e := range evs {
					a.texts = append(a.texts, e.Text)
				}
				byWriter[w] = append(byWriter[w], a)
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d writers × %d appends in %v", writers, appends, time.Since(began).Round(time.Millisecond))
	if t.Failed() {
		return
	}
	checkAcks(t, db, byWriter)
	ids, _ := db.Sessions()
	if len(ids) != sessions {
		t.Errorf("%d sessions, want %d", len(ids), sessions)
	}
}

func TestAppend_ConcurrentWithBadInput(t *testing.T) {
	const writers = 32
	appends := 30
	if testing.Short() {
		appends = 10
	}
	db := dbtest.Open(t, store.Options{})
	byWriter := make([][]ack, writers)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("s%d", w%8)
			for i := 0; i < appends; i++ {
				good := tier.Event{Kind: tier.KindUser, Text: fmt.Sprintf("w%d i%d good", w, i)}
				var evs []tier.Event
				var want error
				switch i % 4 {
				case 0, 2:
					evs = []tier.Event{good}
				case 1: // refused by the ledger, after a good event in the same append
					evs = []tier.Event{good, {Kind: tier.KindToolResult, ID: fmt.Sprintf("w%d-never-opened", w), Text: "BAD"}}
					want = tier.ErrNotOpen
				case 3: // refused by the format
					evs = []tier.Event{{Kind: tier.KindArtifact, Text: "BAD"}}
					want = tier.ErrMissingKey
				}
				res, err := db.Append(session, evs...)
				if want != nil {
					var ee *tier.EventError
					if !errors.As(err, &ee) || !errors.Is(err, want) {
						t.Errorf("writer %d append %d: %v, want %v", w, i, err, want)
					}
					continue
				}
				if err != nil {
					t.Errorf("writer %d append %d (good): %v", w, i, err)
					continue
				}
				byWriter[w] = append(byWriter[w], ack{session: session, res: res, texts: []string{good.Text}})
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// checkAcks also checks that each session holds exactly the
	// acknowledged events: nothing of a refused append.
	checkAcks(t, db, byWriter)
}

// TestClose_WhileAppending closes the database under running writers: every
// append acknowledged before Close is stored, every other one fails with
// ErrClosed and is not.
func TestClose_WhileAppending(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{NoSync: true})
	const writers = 16
	byWriter := make([][]ack, writers)
	var wg sync.WaitGroup
	// Close comes once every writer has an append acknowledged, while they
	// go on appending.
	var acked sync.WaitGroup
	acked.Add(writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if i == 1 {
					acked.Done()
				}
				text := fmt.Sprintf("w%d i%d", w, i)
				res, err := db.Append(fmt.Sprintf("s%d", w%4), tier.Event{Kind: tier.KindAssistant, Text: text})
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					if i == 0 {
						acked.Done()
					}
					return
				}
				byWriter[w] = append(byWriter[w], ack{session: fmt.Sprintf("s%d", w%4), res: res, texts: []string{text}})
			}
		}()
	}
	acked.Wait()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	ro, err := store.Open(db.Path(), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	n := 0
	for _, acks := range byWriter {
		n += len(acks)
	}
	if n == 0 {
		t.Fatal("no append was acknowledged before Close")
	}
	checkAcks(t, ro, byWriter)
}
