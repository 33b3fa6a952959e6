package store_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

func cloneLedger(l *tier.Ledger) *tier.Ledger {
	return &tier.Ledger{
		Open:         maps.Clone(l.Open),
		Dispositions: maps.Clone(l.Dispositions),
		Constraints:  maps.Clone(l.Constraints),
		Artifacts:    maps.Clone(l.Artifacts),
	}
}

// randomEvent draws an event from small pools of ids and keys, so that
// opens collide, results find nothing open, closes hit calls and
// withdrawals hit nothing: about a third of random appends are refused.
func randomEvent(r *rand.Rand) tier.Event {
	id := fmt.Sprintf("id%d", r.IntN(4))
	key := fmt.Sprintf("key%d", r.IntN(4))
	switch r.IntN(12) {
	case 0:
		return tier.Event{Kind: tier.KindUser, Text: "u"}
	case 1:
		return tier.Event{Kind: tier.KindAssistant, Text: "a"}
	case 2:
		return tier.Event{Kind: tier.KindToolCall, ID: id, Name: "bash"}
	case 3:
		return tier.Event{Kind: tier.KindToolResult, ID: id, Failed: r.IntN(2) == 0, Key: key, Text: "out"}
	case 4:
		return tier.Event{Kind: tier.KindOpen, ID: id, Name: "file"}
	case 5:
		return tier.Event{Kind: tier.KindClose, ID: id, Failed: r.IntN(3) == 0}
	case 6:
		return tier.Event{Kind: tier.KindConstraint, Key: key, Text: fmt.Sprint("c", r.IntN(100))}
	case 7:
		return tier.Event{Kind: tier.KindWithdrawn, Key: key}
	case 8:
		return tier.Event{Kind: tier.KindRejected, Key: key, Text: "no"}
	case 9:
		return tier.Event{Kind: tier.KindFailed, Key: key, Text: "broke"}
	case 10:
		return tier.Event{Kind: tier.KindSuperseded, Key: key, By: key + "'", Text: "replaced"}
	default:
		return tier.Event{Kind: tier.KindArtifact, Key: key, Text: fmt.Sprint("v", r.IntN(100))}
	}
}

// TestLedger_IncrementalEqualsReplay makes random appends to a few sessions
// and checks after each one that the store accepted or refused it as a model
// ledger says (refusing at the same index), and that the stored ledger
// equals both the model and a replay of the stored raw log.
func TestLedger_IncrementalEqualsReplay(t *testing.T) {
	rounds := 600
	if testing.Short() {
		rounds = 150
	}
	r := rand.New(rand.NewPCG(1, 2))
	db := dbtest.Open(t, store.Options{NoSync: true})
	sessions := []string{"a", "b", "c"}
	model := map[string]*tier.Ledger{}
	head := map[string]uint64{}
	for _, s := range sessions {
		model[s] = tier.NewLedger()
	}
	refused := 0
	for round := 0; round < rounds; round++ {
		session := sessions[r.IntN(len(sessions))]
		evs := make([]tier.Event, 1+r.IntN(4))
		for i := range evs {
			evs[i] = randomEvent(r)
		}
		// What the model says.
		next := cloneLedger(model[session])
		wantIndex := -1
		for i := range evs {
			e := evs[i]
			e.Seq = head[session] + uint64(i) + 1
			if err := next.Apply(&e); err != nil {
				wantIndex = i
				break
			}
		}
		_, err := db.Append(session, evs...)
		var ee *tier.EventError
		switch {
		case wantIndex < 0 && err != nil:
			t.Fatalf("round %d: Append = %v; the model accepts %+v", round, err, evs)
		case wantIndex >= 0 && (!errors.As(err, &ee) || ee.Index != wantIndex):
			t.Fatalf("round %d: Append = %v; the model refuses event %d of %+v", round, err, wantIndex, evs)
		case wantIndex >= 0:
			refused++
		default:
			model[session] = next
			head[session] += uint64(len(evs))
		}
		st := state(t, db, session)
		if !st.Exists {
			if head[session] != 0 {
				t.Fatalf("round %d: session %q with %d events does not exist", round, session, head[session])
			}
			continue
		}
		if st.Info.Head != head[session] {
			t.Fatalf("round %d: head %d, want %d", round, st.Info.Head, head[session])
		}
		if d := st.Ledger.Diff(model[session]); len(d) != 0 {
			t.Fatalf("round %d: stored ledger differs from the model: %v", round, d)
		}
		if round%50 == 0 || round == rounds-1 {
			if d := st.Ledger.Diff(replayLedger(t, st.Events)); len(d) != 0 {
				t.Fatalf("round %d: stored ledger differs from the replay: %v", round, d)
			}
		}
	}
	if refused == 0 || refused == rounds {
		t.Errorf("%d of %d random appends refused: the generator does not exercise both paths", refused, rounds)
	}
}
