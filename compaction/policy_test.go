package compaction_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// sized returns events whose renderings in a resumed context
// (checkpoint.EventTextLen) take exactly 4·tokens[i] bytes each: one user
// event starting each turn of perTurn events, the others assistant
// messages, with their seqs and turns set as the store assigns them.
func sized(t testing.TB, perTurn int, tokens ...int) []tier.Event {
	t.Helper()
	evs := make([]tier.Event, len(tokens))
	for i, n := range tokens {
		e := tier.Event{Seq: uint64(i + 1), Turn: uint64(i/perTurn + 1), Kind: tier.KindAssistant, Text: "x"}
		if i%perTurn == 0 {
			e.Kind = tier.KindUser
		}
		pad := 4*n - checkpoint.EventTextLen(&e)
		if pad < 0 {
			t.Fatalf("event %d: %d tokens is less than its rendering without text", i+1, n)
		}
		e.Text += strings.Repeat("x", pad)
		if got := checkpoint.EventTextLen(&e); got != 4*n {
			t.Fatalf("event %d renders to %d bytes, want %d", i+1, got, 4*n)
		}
		evs[i] = e
	}
	return evs
}

// repeat returns n copies of v.
func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// spans returns the L1 spans of rs as "from..to", with "!" for a refusal.
func spans(rs []compaction.Result) []string {
	var out []string
	for _, r := range rs {
		if r.Kind != store.PlanSpan {
			continue
		}
		s := fmt.Sprintf("%d..%d", r.From, r.To)
		if !r.Committed() {
			s += "!"
		}
		out = append(out, s)
	}
	return out
}

// refuseAll is a summarizer whose every summary invents a constraint: each
// one is refused.
var refuseAll = summarizerFunc{name: "refuse-all", fn: func(in *compaction.Input) (compaction.Output, error) {
	out, err := compaction.Extractive{}.Summarize(context.Background(), in)
	out.Claims.Constraints = append(out.Claims.Constraints, tier.Constraint{Key: "invented"})
	return out, err
}}

// TestPolicy_EveryTokens_Boundary: a span ends at the first event at which
// the uncompacted tail reaches the budget — just over it, by at most that
// event — and the tail then left is what Info says.
func TestPolicy_EveryTokens_Boundary(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens []int
		want   []string
		tail   int // tokens left uncompacted
	}{
		// 100 tokens each, budget 250: the tail reaches 300 at the third.
		{"even", repeat(100, 10), []string{"1..3", "4..6", "7..9"}, 100},
		// Exactly the budget at the event that reaches it.
		{"exact", []int{125, 125, 125, 125, 100}, []string{"1..2", "3..4"}, 100},
		// One event of four budgets: the span ends at it, whatever its size,
		// and the next starts from nothing.
		{"one large event", []int{100, 1000, 100, 100, 100}, []string{"1..2", "3..5"}, 0},
		{"a first event over the budget", []int{900, 10, 10}, []string{"1..1"}, 20},
		{"under the budget", []int{100, 100}, nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := sized(t, 3, tc.tokens...)
			policy := compaction.Policy{EveryTokens: 250}
			// The boundaries depend on the events, not on how they are
			// appended: one at a time, or all in one append.
			db := dbtest.Open(t, store.Options{NoSync: true})
			c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
			if got := spans(agentLoop(t, db, c, "s", evs)); !slices.Equal(got, tc.want) {
				t.Errorf("one event at a time: spans %v, want %v", got, tc.want)
			}
			if info := info(t, db, "s"); info.TailTokens != tc.tail {
				t.Errorf("Info.TailTokens = %d, want %d (%+v)", info.TailTokens, tc.tail, info)
			}

			db = dbtest.Open(t, store.Options{NoSync: true})
			c = newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
			if _, err := db.Append("s", evs...); err != nil {
				t.Fatal(err)
			}
			rs, err := c.Run(context.Background(), "s")
			if err != nil {
				t.Fatal(err)
			}
			if got := spans(rs); !slices.Equal(got, tc.want) {
				t.Errorf("one append: spans %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPolicy_EveryTokens_MidTurn: the boundary falls where the budget is
// reached, mid-turn with a call open, which the node claims UNRESOLVED.
func TestPolicy_EveryTokens_MidTurn(t *testing.T) {
	evs := []tier.Event{
		{Kind: tier.KindUser, Text: "run the suite"},
		{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "go test ./... " + strings.Repeat("-run X ", 200)},
		{Kind: tier.KindToolResult, ID: "c1", Text: "ok"},
		{Kind: tier.KindAssistant, Text: "green"},
	}
	db := dbtest.Open(t, store.Options{NoSync: true})
	c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.Policy{EveryTokens: 300}})
	if got := spans(agentLoop(t, db, c, "s", evs)); !slices.Equal(got, []string{"1..2"}) {
		t.Fatalf("spans %v, want 1..2: the call's 1,400 bytes reach the budget", got)
	}
	text := string(resume(t, db, "s", store.Latest).Text())
	if !strings.Contains(text, "- UNRESOLVED call c1 (bash), opened at seq 2\n") {
		t.Errorf("the node does not claim the open call UNRESOLVED:\n%s", text)
	}
}

// TestPolicy_EveryTokens_RefusedSpanWaits: after a refused span ending
// where the tail held r tokens, the next attempt is at the first event at
// which it reaches the next multiple of the budget above r — not at the
// next event — over the longer span; a commit then starts again from
// nothing.
func TestPolicy_EveryTokens_RefusedSpanWaits(t *testing.T) {
	evs := sized(t, 4, repeat(100, 16)...)
	policy := compaction.Policy{EveryTokens: 250}
	db := dbtest.Open(t, store.Options{NoSync: true})
	refusing := newCompactor(t, db, compaction.Options{Summarizer: refuseAll, Policy: policy})
	// 300 tokens at 3 (refused), then 500 at 5, 800 at 8, 1000 at 10.
	if got, want := spans(agentLoop(t, db, refusing, "s", evs[:11])), []string{"1..3!", "1..5!", "1..8!", "1..10!"}; !slices.Equal(got, want) {
		t.Fatalf("refused spans %v, want %v", got, want)
	}
	i := info(t, db, "s")
	if i.RefusedTo != 10 || i.RefusedTokens != 1000 || i.TailTokens != 1100 {
		t.Errorf("info %+v: want refused to 10 at 1,000 tokens, a tail of 1,100", i)
	}
	// Another summarizer waits for the same boundary: 1,250 tokens, at 13.
	ext := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
	if rs, err := ext.Run(context.Background(), "s"); err != nil || len(rs) != 0 {
		t.Fatalf("Run before the next boundary: %v, %v", spans(rs), err)
	}
	if got, want := spans(agentLoop(t, db, ext, "s", evs[11:])), []string{"1..13", "14..16"}; !slices.Equal(got, want) {
		t.Errorf("after the refusals: spans %v, want %v", got, want)
	}
	if i := info(t, db, "s"); i.RefusedTokens != 0 || i.TailTokens != 0 {
		t.Errorf("info %+v: a refusal before the compacted prefix counts no tokens", i)
	}
}

// TestPolicy_EveryTokens_Combined: with several rules set, the earliest
// due boundary wins, and each rule waits past a refused span.
func TestPolicy_EveryTokens_Combined(t *testing.T) {
	evs := sized(t, 2, repeat(100, 12)...) // turns of 2 events
	for _, tc := range []struct {
		name   string
		policy compaction.Policy
		sum    compaction.Summarizer
		want   []string
	}{
		{"tokens before events", compaction.Policy{EveryTokens: 250, EveryEvents: 5}, compaction.Extractive{},
			[]string{"1..3", "4..6", "7..9", "10..12"}},
		{"events before tokens", compaction.Policy{EveryTokens: 250, EveryEvents: 2}, compaction.Extractive{},
			[]string{"1..2", "3..4", "5..6", "7..8", "9..10", "11..12"}},
		// Turns end at 2, 4, …, each due once the next turn begins; the
		// tokens' 450 would end a span at the fifth event from its start.
		{"turns before tokens", compaction.Policy{EveryTokens: 450, EveryTurns: 1}, compaction.Extractive{},
			[]string{"1..2", "3..4", "5..6", "7..8", "9..10"}},
		{"tokens before turns", compaction.Policy{EveryTokens: 250, EveryTurns: 3}, compaction.Extractive{},
			[]string{"1..3", "4..6", "7..9", "10..12"}},
		// Refused: tokens at 3 (300), events at 5, tokens at 5 (500) —
		// the same —, events at 10, tokens at 8 (800): the earliest.
		{"refused", compaction.Policy{EveryTokens: 250, EveryEvents: 5}, refuseAll,
			[]string{"1..3!", "1..5!", "1..8!", "1..10!"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{NoSync: true})
			c := newCompactor(t, db, compaction.Options{Summarizer: tc.sum, Policy: tc.policy})
			if got := spans(agentLoop(t, db, c, "s", evs)); !slices.Equal(got, tc.want) {
				t.Errorf("spans %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPolicy_EveryTokens_CountersKept: the tail's tokens Info reports are
// those of the raw events a resumed context carries after the compacted
// prefix, after appends, commits and refusals, and after a reopen; Verify
// recomputes them from the raw log and agrees.
func TestPolicy_EveryTokens_CountersKept(t *testing.T) {
	_, evs := readIncident(t, "long_migration.jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	policy := compaction.Policy{EveryTokens: 300, Fold: 2}
	lossy := newCompactor(t, db, compaction.Options{Summarizer: mustLossy(t, compaction.DropNegatives), Policy: policy})
	ext := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: policy})
	var committed, refused int
	for i := range evs {
		c := ext
		if i < len(evs)/2 {
			c = lossy
		}
		for _, r := range agentLoop(t, db, c, "s", evs[i:i+1]) {
			if r.Committed() {
				committed++
			} else {
				refused++
			}
		}
		want := tailTokens(t, db, "s")
		if got := info(t, db, "s"); got.TailTokens != want.TailTokens || got.RefusedTokens != want.RefusedTokens {
			t.Fatalf("after event %d: Info says %d tokens in the tail, %d refused; the raw events %d and %d",
				i+1, got.TailTokens, got.RefusedTokens, want.TailTokens, want.RefusedTokens)
		}
	}
	if committed == 0 || refused == 0 {
		t.Fatalf("%d committed, %d refused: the test wants both", committed, refused)
	}
	before := info(t, db, "s")
	verifyClean(t, db)
	re := reopen(t, db)
	if after := info(t, re, "s"); after != before {
		t.Errorf("after a reopen Info is %+v, before %+v", after, before)
	}
}

// info returns session's Info.
func info(t testing.TB, db *store.DB, session string) store.Info {
	t.Helper()
	i, err := db.Info(session)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// tailTokens computes from the raw events what Info's TailTokens and
// RefusedTokens must be.
func tailTokens(t testing.TB, db *store.DB, session string) (want store.Info) {
	t.Helper()
	i := info(t, db, session)
	var tail, refused int
	for _, e := range allEvents(t, db, session)[i.CompactedTo:] {
		tail += checkpoint.EventTextLen(&e)
		if e.Seq <= i.RefusedTo {
			refused += checkpoint.EventTextLen(&e)
		}
	}
	want.TailTokens = tier.TokensOfBytes(tail)
	if i.RefusedTo > i.CompactedTo {
		want.RefusedTokens = tier.TokensOfBytes(refused)
	}
	return want
}

// TestWindow_Policy derives the L1 boundary from the window and share: the
// defaults give DefaultPolicy, a 1M window at half gives a tail of 500,000
// tokens less the frame's, and a share out of (0, 1] or a window too small
// for the frame is ErrWindow.
func TestWindow_Policy(t *testing.T) {
	got, err := compaction.Window{}.Policy()
	if err != nil || got != compaction.DefaultPolicy {
		t.Errorf("Window{}.Policy() = %+v, %v; want DefaultPolicy %+v", got, err, compaction.DefaultPolicy)
	}
	if want := 200_000/4 - 4*2048; compaction.DefaultEveryTokens != want {
		t.Errorf("DefaultEveryTokens = %d, want %d", compaction.DefaultEveryTokens, want)
	}
	got, err = compaction.Window{Tokens: 1_000_000, Share: 0.5, Roots: 2, Budget: 4096}.Policy()
	want := compaction.Policy{EveryTokens: 500_000 - 2*4096, Fold: compaction.DefaultFold, MaxRoots: 2, Budget: 4096}
	if err != nil || got != want {
		t.Errorf("Window{1M, 0.5, 2, 4096}.Policy() = %+v, %v; want %+v", got, err, want)
	}
	for _, w := range []compaction.Window{
		{Share: 1.5}, {Share: -0.1}, {Tokens: -1}, {Roots: -1},
		{Tokens: 8192, Share: 1}, // 4 summaries of 2048 leave no tail
		{Tokens: 20_000, Share: 0.5},
	} {
		if p, err := w.Policy(); !errors.Is(err, compaction.ErrWindow) {
			t.Errorf("%+v.Policy() = %+v, %v; want ErrWindow", w, p, err)
		}
	}
}
