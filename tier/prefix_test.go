package tier_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-go/strata/tier"
)

// randomLog returns n events the ledger accepts, drawn from small pools of
// ids and keys so that ids are reopened after they resolve, keys change
// disposition several times and constraints are withdrawn and stated again.
func randomLog(r *rand.Rand, n int) []tier.Event {
	l := tier.NewLedger()
	var out []tier.Event
	for len(out) < n {
		seq := uint64(len(out) + 1)
		var e tier.Event
		switch r.IntN(9) {
		case 0, 1:
			kind := []tier.Kind{tier.KindToolCall, tier.KindOpen}[r.IntN(2)]
			e = tier.Event{Kind: kind, ID: fmt.Sprintf("id%d", r.IntN(12)), Name: "x"}
			if kind == tier.KindToolCall {
				// Calls with targets (failures on one are fixed by a
				// later success on it) and plan calls.
				switch r.IntN(3) {
				case 0:
					e.Name, e.Text = "Bash", fmt.Sprintf(`{"command":"go test ./p%d%s"}`, r.IntN(3), []string{"", " -run X"}[r.IntN(2)])
				case 1:
					st := []string{"pending", "in_progress", "completed"}
					e.Name, e.Text = "TodoWrite", fmt.Sprintf(`{"todos":[{"content":"a","status":%q},{"content":"b%d","status":%q}]}`,
						st[r.IntN(3)], r.IntN(3), st[r.IntN(3)])
				}
			}
		case 2, 3:
			open := l.OpenList()
			if len(open) == 0 {
				continue
			}
			o := open[r.IntN(len(open))]
			e = tier.Event{Kind: tier.KindToolResult, ID: o.ID}
			if o.Kind == tier.KindOpen {
				e.Kind = tier.KindClose
			} else {
				// Failures with and without a key, and keyed successes
				// that clear a key's failure.
				switch r.IntN(4) {
				case 0:
					e.Failed, e.Key = true, fmt.Sprintf("k%d", r.IntN(6))
				case 1:
					e.Failed = true
				case 2:
					e.Key = fmt.Sprintf("k%d", r.IntN(6))
				}
				e.Text = fmt.Sprint(seq)
			}
		case 4:
			e = tier.Event{Kind: tier.KindConstraint, Key: fmt.Sprintf("c%d", r.IntN(4)), Text: fmt.Sprint(seq)}
		case 5:
			if len(l.Constraints) == 0 {
				continue
			}
			keys := make([]string, 0, len(l.Constraints))
			for k := range l.Constraints {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			e = tier.Event{Kind: tier.KindWithdrawn, Key: keys[r.IntN(len(keys))]}
		case 6:
			kind := []tier.Kind{tier.KindRejected, tier.KindFailed, tier.KindSuperseded}[r.IntN(3)]
			e = tier.Event{Kind: kind, Key: fmt.Sprintf("k%d", r.IntN(6)), Text: fmt.Sprint(seq)}
			if kind == tier.KindSuperseded {
				e.By = fmt.Sprintf("k%d", r.IntN(6))
			}
		case 7:
			e = tier.Event{Kind: tier.KindArtifact, Key: fmt.Sprintf("a%d", r.IntN(5)), Text: fmt.Sprint(seq)}
		default:
			e = tier.Event{Kind: tier.KindUser, Text: fmt.Sprint("u", seq)}
		}
		e.Seq, e.Turn = seq, seq
		if err := l.Apply(&e); err != nil {
			continue // e.g. an id still open: draw again
		}
		out = append(out, e)
	}
	return out
}

// TestExtendPrefix_SameAsRaw: the Required of 1..b composed from the
// Required of 1..a and of a+1..b is the one computed from the raw events of
// 1..b — field by field, ResolvedInside included when the prefix's own
// exact ResolvedInside stands for what its node claimed, and a subset of it
// when the node claimed less.
func TestExtendPrefix_SameAsRaw(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for round := 0; round < 200; round++ {
		evs := randomLog(r, 20+r.IntN(200))
		openAt := func(a int) []tier.Open {
			l := tier.NewLedger()
			for _, e := range evs[:a] {
				if err := l.Apply(&e); err != nil {
					t.Fatal(err)
				}
			}
			return l.OpenList()
		}
		for try := 0; try < 5; try++ {
			a := 1 + r.IntN(len(evs)-1)
			b := a + 1 + r.IntN(len(evs)-a)
			prefix, err := tier.ComputeRequired(nil, evs[:a])
			if err != nil {
				t.Fatal(err)
			}
			// The next span starts on what the prefix leaves open and
			// its plan, as the store's facts record them.
			if open := openAt(a); len(open) != len(prefix.Unresolved) {
				t.Fatalf("open at %d: %+v, the prefix says %+v", a, open, prefix.Unresolved)
			}
			next, err := tier.ComputeRequiredAfter(tier.Before{Open: prefix.Unresolved, Plan: prefix.Plan, PlanAt: prefix.PlanAt}, evs[a:b])
			if err != nil {
				t.Fatal(err)
			}
			want, err := tier.ComputeRequired(nil, evs[:b])
			if err != nil {
				t.Fatal(err)
			}
			got, err := tier.ExtendPrefix(&prefix, prefix.ResolvedInside, &next)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(&want) {
				t.Fatalf("round %d, 1..%d + %d..%d:\ncomposed %+v\nfrom raw  %+v", round, a, a+1, b, got, want)
			}
			// A node that claimed nothing resolved: a subset.
			less, err := tier.ExtendPrefix(&prefix, nil, &next)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range less.ResolvedInside {
				if !slices.Contains(want.ResolvedInside, id) {
					t.Fatalf("round %d: %+v may be claimed resolved, the raw log says not", round, id)
				}
			}
		}
	}
}

func TestExtendPrefix_NotAdjacent(t *testing.T) {
	p := tier.Required{From: 1, To: 10}
	for _, next := range []tier.Required{{From: 12, To: 20}, {From: 11, To: 10}} {
		if _, err := tier.ExtendPrefix(&p, nil, &next); err == nil {
			t.Errorf("extending 1..10 with %d..%d: no error", next.From, next.To)
		}
	}
	q := tier.Required{From: 2, To: 10}
	if _, err := tier.ExtendPrefix(&q, nil, &tier.Required{From: 11, To: 12}); err == nil {
		t.Error("a prefix from seq 2: no error")
	}
}
