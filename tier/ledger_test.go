package tier_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/tier"
)

// replay applies evs to a new ledger, numbering them from seq 1, and
// returns the ledger and the events as applied (with Opener set).
func replay(t testing.TB, evs []tier.Event) (*tier.Ledger, []tier.Event) {
	t.Helper()
	l := tier.NewLedger()
	out := make([]tier.Event, len(evs))
	for i := range evs {
		e := evs[i]
		e.Seq = uint64(i + 1)
		if err := l.Apply(&e); err != nil {
			t.Fatalf("event %d (%v): %v", i+1, e.Kind, err)
		}
		out[i] = e
	}
	return l, out
}

func TestLedger_Apply_OpenResolve(t *testing.T) {
	l, evs := replay(t, []tier.Event{
		{Kind: tier.KindToolCall, ID: "c1", Name: "bash"},
		{Kind: tier.KindOpen, ID: "h1", Name: "file"},
		{Kind: tier.KindToolCall, ID: "c2", Name: "edit"},
		{Kind: tier.KindToolResult, ID: "c1", Text: "ok"},
		{Kind: tier.KindClose, ID: "h1", Failed: true},
		{Kind: tier.KindToolCall, ID: "c1", Name: "bash again"}, // reopened after it was resolved
	})
	want := []tier.Open{
		{ID: "c1", Kind: tier.KindToolCall, Name: "bash again", Seq: 6},
		{ID: "c2", Kind: tier.KindToolCall, Name: "edit", Seq: 3},
	}
	if got := l.OpenList(); !reflect.DeepEqual(got, want) {
		t.Errorf("open = %+v, want %+v", got, want)
	}
	if evs[3].Opener != 1 || evs[4].Opener != 2 {
		t.Errorf("openers %d %d, want 1 2", evs[3].Opener, evs[4].Opener)
	}
	if len(l.Dispositions) != 0 {
		t.Errorf("a failed close without key recorded a disposition: %+v", l.Dispositions)
	}
}

func TestLedger_Apply_BadInput(t *testing.T) {
	setup := []tier.Event{
		{Kind: tier.KindToolCall, ID: "call"},
		{Kind: tier.KindOpen, ID: "handle"},
		{Kind: tier.KindConstraint, Key: "c", Text: "stated"},
	}
	cases := []struct {
		name string
		e    tier.Event
		want error
	}{
		{"tool_result for an id never opened", tier.Event{Kind: tier.KindToolResult, ID: "nope"}, tier.ErrNotOpen},
		{"close for an id never opened", tier.Event{Kind: tier.KindClose, ID: "nope"}, tier.ErrNotOpen},
		{"tool_result for a handle", tier.Event{Kind: tier.KindToolResult, ID: "handle"}, tier.ErrWrongResource},
		{"failed tool_result with key for a handle", tier.Event{Kind: tier.KindToolResult, ID: "handle", Failed: true, Key: "k"}, tier.ErrWrongResource},
		{"close of a tool call", tier.Event{Kind: tier.KindClose, ID: "call"}, tier.ErrWrongResource},
		{"tool_call of an open call", tier.Event{Kind: tier.KindToolCall, ID: "call"}, tier.ErrAlreadyOpen},
		{"open of an open handle", tier.Event{Kind: tier.KindOpen, ID: "handle"}, tier.ErrAlreadyOpen},
		{"open of an open call id", tier.Event{Kind: tier.KindOpen, ID: "call"}, tier.ErrAlreadyOpen},
		{"withdrawn of a constraint never stated", tier.Event{Kind: tier.KindWithdrawn, Key: "other"}, tier.ErrNotActive},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := replay(t, setup)
			before, _ := replay(t, setup)
			e := tc.e
			e.Seq = 4
			err := l.Apply(&e)
			var ee *tier.EventError
			if !errors.As(err, &ee) || !errors.Is(err, tc.want) {
				t.Fatalf("Apply = %v, want *EventError Is %v", err, tc.want)
			}
			if ee.Seq != 4 || ee.Kind != tc.e.Kind.String() || ee.ID != tc.e.ID {
				t.Errorf("error names seq %d kind %q id %q", ee.Seq, ee.Kind, ee.ID)
			}
			if d := l.Diff(before); len(d) != 0 {
				t.Errorf("a refused event changed the ledger: %v", d)
			}
			if e.Opener != 0 {
				t.Errorf("a refused event got opener %d", e.Opener)
			}
		})
	}
	// Withdrawn twice: the second is refused.
	l, _ := replay(t, setup)
	if err := l.Apply(&tier.Event{Seq: 4, Kind: tier.KindWithdrawn, Key: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(&tier.Event{Seq: 5, Kind: tier.KindWithdrawn, Key: "c"}); !errors.Is(err, tier.ErrNotActive) {
		t.Errorf("second withdrawal: %v, want ErrNotActive", err)
	}
	// Resolved twice: the second is refused.
	if err := l.Apply(&tier.Event{Seq: 6, Kind: tier.KindToolResult, ID: "call"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(&tier.Event{Seq: 7, Kind: tier.KindToolResult, ID: "call"}); !errors.Is(err, tier.ErrNotOpen) {
		t.Errorf("second result: %v, want ErrNotOpen", err)
	}
}

func TestLedger_Apply_Dispositions(t *testing.T) {
	l, _ := replay(t, []tier.Event{
		{Kind: tier.KindRejected, Key: "a", Text: "no"},
		{Kind: tier.KindFailed, Key: "b", Text: "crashed"},
		{Kind: tier.KindSuperseded, Key: "a", By: "a2", Text: "replaced"}, // a: rejected → superseded
		{Kind: tier.KindToolCall, ID: "c1"},
		{Kind: tier.KindToolResult, ID: "c1", Failed: true, Key: "c", Text: "exit 1"}, // records failed for c
		{Kind: tier.KindToolCall, ID: "c2"},
		{Kind: tier.KindToolResult, ID: "c2", Failed: false, Key: "d", Text: "fine"}, // ok: no disposition
		{Kind: tier.KindToolCall, ID: "c3"},
		{Kind: tier.KindToolResult, ID: "c3", Failed: true, Text: "failed, no key"}, // no key: no disposition
		{Kind: tier.KindRejected, Key: "b", Text: "and rejected"},                   // b: failed → rejected
	})
	want := []tier.Disposition{
		{Key: "a", State: tier.KindSuperseded, Reason: "replaced", By: "a2", Seq: 3},
		{Key: "b", State: tier.KindRejected, Reason: "and rejected", Seq: 10},
		{Key: "c", State: tier.KindFailed, Reason: "exit 1", Seq: 5},
	}
	if got := l.DispositionList(); !reflect.DeepEqual(got, want) {
		t.Errorf("dispositions:\n got %+v\nwant %+v", got, want)
	}
	if len(l.Open) != 0 {
		t.Errorf("open: %+v", l.Open)
	}
}

func TestLedger_Apply_ConstraintsAndArtifacts(t *testing.T) {
	l, _ := replay(t, []tier.Event{
		{Kind: tier.KindConstraint, Key: "reversible", Text: "v1"},
		{Kind: tier.KindConstraint, Key: "tests", Text: "keep tests green"},
		{Kind: tier.KindConstraint, Key: "reversible", Text: "v2"}, // restated: new text
		{Kind: tier.KindWithdrawn, Key: "tests"},
		{Kind: tier.KindConstraint, Key: "again", Text: "x"},
		{Kind: tier.KindWithdrawn, Key: "again"},
		{Kind: tier.KindConstraint, Key: "again", Text: "back"}, // active again after withdrawal
		{Kind: tier.KindArtifact, Key: "a.sql", Text: "first"},
		{Kind: tier.KindArtifact, Key: "b.sql", Text: "b"},
		{Kind: tier.KindArtifact, Key: "a.sql", Text: "rewritten"},
	})
	wantC := []tier.Constraint{
		{Key: "again", Text: "back", Seq: 7},
		{Key: "reversible", Text: "v2", Seq: 3},
	}
	if got := l.ConstraintList(); !reflect.DeepEqual(got, wantC) {
		t.Errorf("constraints:\n got %+v\nwant %+v", got, wantC)
	}
	wantA := []tier.Artifact{{Key: "a.sql", Text: "rewritten", Seq: 10}, {Key: "b.sql", Text: "b", Seq: 9}}
	if got := l.ArtifactList(); !reflect.DeepEqual(got, wantA) {
		t.Errorf("artifacts:\n got %+v\nwant %+v", got, wantA)
	}
}

func TestLedger_Apply_MessagesChangeNothing(t *testing.T) {
	l, _ := replay(t, []tier.Event{
		{Kind: tier.KindUser, Key: "x"}, {Kind: tier.KindAssistant, ID: "y"}, {Kind: tier.KindSystem},
	})
	if d := l.Diff(tier.NewLedger()); len(d) != 0 {
		t.Errorf("messages changed the ledger: %v", d)
	}
}

// TestLedger_Apply_Zero: a zero Ledger is an empty one — Apply makes its
// maps when it first writes, and the result is what NewLedger's would be.
func TestLedger_Apply_Zero(t *testing.T) {
	evs := []tier.Event{
		{Kind: tier.KindUser, Text: "hi"},
		{Kind: tier.KindToolCall, ID: "c1", Name: "bash"},
		{Kind: tier.KindToolResult, ID: "c1", Failed: true, Key: "approach/1", Text: "boom"},
		{Kind: tier.KindConstraint, Key: "k", Text: "no"},
		{Kind: tier.KindRejected, Key: "approach/2", Text: "no"},
		{Kind: tier.KindArtifact, Key: "f.go"},
	}
	want, _ := replay(t, evs)
	for n := 0; n <= len(evs); n++ {
		var l tier.Ledger
		for i := range evs[:n] {
			e := evs[i]
			e.Seq = uint64(i + 1)
			if err := l.Apply(&e); err != nil {
				t.Fatalf("event %d: %v", i+1, err)
			}
		}
		if n == 1 && l.Open != nil {
			t.Fatal("a message made the ledger's maps")
		}
		if n == len(evs) && !reflect.DeepEqual(&l, want) {
			t.Fatalf("zero ledger after every event: %+v, want %+v", l, want)
		}
	}
}

func TestEvent_Refs(t *testing.T) {
	cases := []struct {
		e    tier.Event
		want []tier.Ref
	}{
		{tier.Event{Kind: tier.KindUser}, nil},
		{tier.Event{Kind: tier.KindToolCall, ID: "c"}, []tier.Ref{{Class: tier.ClassOpen, Name: "c"}}},
		{tier.Event{Kind: tier.KindOpen, ID: "h"}, []tier.Ref{{Class: tier.ClassOpen, Name: "h"}}},
		{tier.Event{Kind: tier.KindToolResult, ID: "c"}, []tier.Ref{{Class: tier.ClassOpen, Name: "c"}}},
		// A success with a key can clear the key's failure: it reads it.
		{tier.Event{Kind: tier.KindToolResult, ID: "c", Key: "k"}, []tier.Ref{{Class: tier.ClassOpen, Name: "c"}, {Class: tier.ClassDisposition, Name: "k"}}},
		{tier.Event{Kind: tier.KindToolResult, ID: "c", Key: "k", Failed: true}, []tier.Ref{{Class: tier.ClassOpen, Name: "c"}, {Class: tier.ClassDisposition, Name: "k"}}},
		{tier.Event{Kind: tier.KindClose, ID: "h", Failed: true}, []tier.Ref{{Class: tier.ClassOpen, Name: "h"}}},
		{tier.Event{Kind: tier.KindConstraint, Key: "k"}, []tier.Ref{{Class: tier.ClassConstraint, Name: "k"}}},
		{tier.Event{Kind: tier.KindWithdrawn, Key: "k"}, []tier.Ref{{Class: tier.ClassConstraint, Name: "k"}}},
		{tier.Event{Kind: tier.KindRejected, Key: "k"}, []tier.Ref{{Class: tier.ClassDisposition, Name: "k"}}},
		{tier.Event{Kind: tier.KindFailed, Key: "k"}, []tier.Ref{{Class: tier.ClassDisposition, Name: "k"}}},
		{tier.Event{Kind: tier.KindSuperseded, Key: "k"}, []tier.Ref{{Class: tier.ClassDisposition, Name: "k"}}},
		{tier.Event{Kind: tier.KindArtifact, Key: "k"}, []tier.Ref{{Class: tier.ClassArtifact, Name: "k"}}},
	}
	for _, tc := range cases {
		if got := tc.e.Refs(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: Refs = %+v, want %+v", tc.e, got, tc.want)
		}
	}
	// Applying an event to a ledger that holds just its Refs gives the
	// same result as applying it to the full ledger.
	_, evs := replay(t, allKindsEvents())
	l := tier.NewLedger()
	for i := range evs {
		part := tier.NewLedger()
		for _, r := range evs[i].Refs() {
			switch r.Class {
			case tier.ClassOpen:
				if v, ok := l.Open[r.Name]; ok {
					part.Open[r.Name] = v
				}
			case tier.ClassDisposition:
				if v, ok := l.Dispositions[r.Name]; ok {
					part.Dispositions[r.Name] = v
				}
			case tier.ClassConstraint:
				if v, ok := l.Constraints[r.Name]; ok {
					part.Constraints[r.Name] = v
				}
			case tier.ClassArtifact:
				if v, ok := l.Artifacts[r.Name]; ok {
					part.Artifacts[r.Name] = v
				}
			}
		}
		e1, e2 := evs[i], evs[i]
		err1, err2 := l.Apply(&e1), part.Apply(&e2)
		if (err1 == nil) != (err2 == nil) || e1 != e2 {
			t.Fatalf("event %d: full %v, partial %v", i+1, err1, err2)
		}
	}
}

func TestLedger_Diff(t *testing.T) {
	a, _ := replay(t, allKindsEvents())
	b, _ := replay(t, allKindsEvents())
	if d := a.Diff(b); len(d) != 0 {
		t.Fatalf("equal ledgers differ: %v", d)
	}
	b.Artifacts["migrations/003_down.sql"] = tier.Artifact{Key: "migrations/003_down.sql", Text: "changed", Seq: 12}
	delete(b.Dispositions, "approach/b")
	b.Open["zz"] = tier.Open{ID: "zz", Kind: tier.KindOpen}
	d := a.Diff(b)
	if len(d) != 3 {
		t.Fatalf("Diff = %v, want 3 lines", d)
	}
	for _, want := range []string{`artifact "migrations/003_down.sql"`, `disposition "approach/b": only in the first`, `open "zz": only in the second`} {
		found := false
		for _, line := range d {
			found = found || strings.Contains(line, want)
		}
		if !found {
			t.Errorf("Diff %v does not mention %s", d, want)
		}
	}
	if d2 := a.Diff(b); !reflect.DeepEqual(d, d2) {
		t.Errorf("Diff is not stable: %v vs %v", d, d2)
	}
}

// spanOf returns the open set before seq from (by replaying evs[:from-1])
// and the span evs[from-1:to] as the store holds it (Opener set).
func spanOf(t *testing.T, evs []tier.Event, from, to int) ([]tier.Open, []tier.Event) {
	t.Helper()
	before, _ := replay(t, evs[:from-1])
	_, all := replay(t, evs)
	return before.OpenList(), all[from-1 : to]
}

func TestComputeRequired_Closure(t *testing.T) {
	evs := []tier.Event{
		/* 1 */ {Kind: tier.KindToolCall, ID: "early", Name: "bash"}, // opened before the span, resolved inside
		/* 2 */ {Kind: tier.KindOpen, ID: "proc", Name: "process"}, // opened before, still open at the end
		/* 3 */ {Kind: tier.KindToolCall, ID: "reopened"}, // opened before, resolved and reopened inside
		/* 4 */ {Kind: tier.KindUser, Text: "span starts"},
		/* 5 */ {Kind: tier.KindToolResult, ID: "early"},
		/* 6 */ {Kind: tier.KindToolCall, ID: "inside"}, // opened and resolved inside: no claim
		/* 7 */ {Kind: tier.KindToolResult, ID: "inside"},
		/* 8 */ {Kind: tier.KindToolCall, ID: "dangling", Name: "grep"}, // opened inside, open at the end
		/* 9 */ {Kind: tier.KindToolResult, ID: "reopened"},
		/* 10 */ {Kind: tier.KindToolCall, ID: "reopened", Name: "again"},
		/* 11 */ {Kind: tier.KindAssistant, Text: "span ends"},
		/* 12 */ {Kind: tier.KindToolResult, ID: "dangling"}, // after the span: irrelevant
	}
	before, span := spanOf(t, evs, 4, 11)
	req, err := tier.ComputeRequired(before, span)
	if err != nil {
		t.Fatal(err)
	}
	if req.From != 4 || req.To != 11 {
		t.Errorf("span %d..%d, want 4..11", req.From, req.To)
	}
	wantOpen := []tier.Open{
		{ID: "dangling", Kind: tier.KindToolCall, Name: "grep", Seq: 8},
		{ID: "proc", Kind: tier.KindOpen, Name: "process", Seq: 2},
		{ID: "reopened", Kind: tier.KindToolCall, Name: "again", Seq: 10},
	}
	if !reflect.DeepEqual(req.Unresolved, wantOpen) {
		t.Errorf("unresolved:\n got %+v\nwant %+v", req.Unresolved, wantOpen)
	}
	// "reopened" is two invocations: the one opened at seq 3 is resolved,
	// the one opened at seq 10 is open.
	early := tier.Resolution{ID: "early", Kind: tier.KindToolCall, Name: "bash", Seq: 1, At: 5}
	reopened := tier.Resolution{ID: "reopened", Kind: tier.KindToolCall, Seq: 3, At: 9}
	if want := []tier.Resolution{early, reopened}; !reflect.DeepEqual(req.Resolved, want) {
		t.Errorf("resolved = %+v, want %+v", req.Resolved, want)
	}
	inside := tier.Resolution{ID: "inside", Kind: tier.KindToolCall, Seq: 6, At: 7}
	if want := []tier.Resolution{early, inside, reopened}; !reflect.DeepEqual(req.ResolvedInside, want) {
		t.Errorf("resolved inside = %+v, want %+v", req.ResolvedInside, want)
	}
	// The user's request at seq 4 is required state too.
	if want := []tier.Request{{Seq: 4, Text: "span starts"}}; !reflect.DeepEqual(req.Requests, want) {
		t.Errorf("requests = %+v, want %+v", req.Requests, want)
	}
	if req.Count() != 6 {
		t.Errorf("Count = %d, want 6", req.Count())
	}
	// The builder gives the same, one event at a time.
	b := tier.NewRequiredBuilder(before)
	for _, e := range span {
		if err := b.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Required(); !reflect.DeepEqual(got, req) {
		t.Errorf("builder:\n got %+v\nwant %+v", got, req)
	}
	if !reflect.DeepEqual(b.Open(), wantOpen) {
		t.Errorf("builder open = %+v", b.Open())
	}
	// Add does not modify the caller's events.
	if span[1].Opener != 1 {
		t.Errorf("span event's opener %d", span[1].Opener)
	}
}

func TestComputeRequired_Facts(t *testing.T) {
	evs := []tier.Event{
		/* 1 */ {Kind: tier.KindConstraint, Key: "old", Text: "stated before the span"},
		/* 2 */ {Kind: tier.KindConstraint, Key: "kept", Text: "stated before, untouched"},
		/* 3 */ {Kind: tier.KindRejected, Key: "before", Text: "decided before the span"},
		/* 4 */ {Kind: tier.KindArtifact, Key: "before.txt"},
		/* 5 */ {Kind: tier.KindUser, Text: "span starts"},
		/* 6 */ {Kind: tier.KindWithdrawn, Key: "old"}, // withdrawn inside
		/* 7 */ {Kind: tier.KindConstraint, Key: "new", Text: "v1"},
		/* 8 */ {Kind: tier.KindConstraint, Key: "new", Text: "v2"}, // final text
		/* 9 */ {Kind: tier.KindConstraint, Key: "gone", Text: "x"},
		/* 10 */ {Kind: tier.KindWithdrawn, Key: "gone"}, // stated and withdrawn inside
		/* 11 */ {Kind: tier.KindRejected, Key: "a", Text: "no"},
		/* 12 */ {Kind: tier.KindSuperseded, Key: "a", By: "b", Text: "replaced"}, // final: superseded
		/* 13 */ {Kind: tier.KindToolCall, ID: "c"},
		/* 14 */ {Kind: tier.KindToolResult, ID: "c", Failed: true, Key: "approach", Text: "timeout"},
		/* 15 */ {Kind: tier.KindArtifact, Key: "out.sql", Text: "v1"},
		/* 16 */ {Kind: tier.KindArtifact, Key: "out.sql", Text: "v2"},
		/* 17 */ {Kind: tier.KindFailed, Key: "before", Text: "and failed again"}, // changed inside
		/* 18 */ {Kind: tier.KindArtifact, Key: "after.txt"}, // after the span
	}
	before, span := spanOf(t, evs, 5, 17)
	req, err := tier.ComputeRequired(before, span)
	if err != nil {
		t.Fatal(err)
	}
	wantD := []tier.Disposition{
		{Key: "a", State: tier.KindSuperseded, Reason: "replaced", By: "b", Seq: 12},
		{Key: "approach", State: tier.KindFailed, Reason: "timeout", Seq: 14},
		{Key: "before", State: tier.KindFailed, Reason: "and failed again", Seq: 17},
	}
	if !reflect.DeepEqual(req.Dispositions, wantD) {
		t.Errorf("dispositions:\n got %+v\nwant %+v", req.Dispositions, wantD)
	}
	wantC := []tier.Constraint{
		{Key: "gone", Withdrawn: true},
		{Key: "new", Text: "v2", Seq: 8},
		{Key: "old", Withdrawn: true},
	}
	if !reflect.DeepEqual(req.Constraints, wantC) {
		t.Errorf("constraints:\n got %+v\nwant %+v", req.Constraints, wantC)
	}
	wantA := []tier.Artifact{{Key: "out.sql", Text: "v2", Seq: 16}}
	if !reflect.DeepEqual(req.Artifacts, wantA) {
		t.Errorf("artifacts:\n got %+v\nwant %+v", req.Artifacts, wantA)
	}
	if len(req.Unresolved) != 0 || len(req.Resolved) != 0 {
		t.Errorf("open claims: %+v %+v", req.Unresolved, req.Resolved)
	}
	// Claims carries Required exactly, normalized.
	c := req.Claims()
	if c.Count() != req.Count() || !reflect.DeepEqual(c.Dispositions, wantD) || !reflect.DeepEqual(c.Constraints, wantC) {
		t.Errorf("Claims() = %+v", c)
	}
}

func TestComputeRequired_Errors(t *testing.T) {
	if _, err := tier.ComputeRequired(nil, nil); err == nil {
		t.Error("empty span accepted")
	}
	_, evs := replay(t, []tier.Event{{Kind: tier.KindUser}, {Kind: tier.KindAssistant}, {Kind: tier.KindAssistant}})
	if _, err := tier.ComputeRequired(nil, []tier.Event{evs[0], evs[2]}); err == nil {
		t.Error("a span with a gap accepted")
	}
	// A result for a call the open set does not have: the store is inconsistent.
	span := []tier.Event{{Seq: 5, Kind: tier.KindToolResult, ID: "c", Opener: 2}}
	_, err := tier.ComputeRequired(nil, span)
	if !errors.Is(err, tier.ErrNotOpen) {
		t.Errorf("result without its call: %v, want ErrNotOpen", err)
	}
	if req, err := tier.ComputeRequired([]tier.Open{{ID: "c", Kind: tier.KindToolCall, Seq: 2}}, span); err != nil || !reflect.DeepEqual(req.Resolved, []tier.Resolution{{ID: "c", Kind: tier.KindToolCall, Seq: 2, At: 5}}) {
		t.Errorf("with its call open before: %+v, %v", req, err)
	}
}

func TestClaims_Normalize(t *testing.T) {
	c := tier.Claims{
		Resolved:     []tier.Resolution{{ID: "b", Seq: 2}, {ID: "a"}, {ID: "b", Seq: 1}, {ID: "b", Seq: 2}},
		Unresolved:   []tier.Open{{ID: "z"}, {ID: "a"}, {ID: "z"}},
		Dispositions: []tier.Disposition{{Key: "y"}, {Key: "x"}},
		Constraints:  []tier.Constraint{{Key: "2"}, {Key: "1"}, {Key: "1"}},
		Artifacts:    []tier.Artifact{{Key: "q"}, {Key: "p"}},
	}
	c.Normalize()
	want := tier.Claims{
		Resolved:     []tier.Resolution{{ID: "a"}, {ID: "b", Seq: 1}, {ID: "b", Seq: 2}},
		Unresolved:   []tier.Open{{ID: "a"}, {ID: "z"}},
		Dispositions: []tier.Disposition{{Key: "x"}, {Key: "y"}},
		Constraints:  []tier.Constraint{{Key: "1"}, {Key: "2"}},
		Artifacts:    []tier.Artifact{{Key: "p"}, {Key: "q"}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Normalize:\n got %+v\nwant %+v", c, want)
	}
	if c.Count() != 11 {
		t.Errorf("Count = %d", c.Count())
	}
	n := tier.Node{Depth: 2}
	if !n.IsRoot() || n.Depth.String() != "L2" {
		t.Errorf("node %+v", n)
	}
	n.Parent = 3
	if n.IsRoot() {
		t.Error("a node with a parent is a root")
	}
}

// TestComputeRequired_ResolvedTwiceInSpan: an id opened before the span,
// resolved in it, opened again and resolved again in it is Resolved — its
// last resolution closes an opening from inside the span, but the first
// closes one from before it, which an earlier node may have claimed
// UNRESOLVED.
func TestComputeRequired_ResolvedTwiceInSpan(t *testing.T) {
	evs := []tier.Event{
		/* 1 */ {Kind: tier.KindToolCall, ID: "c2", Name: "bash"},
		/* 2 */ {Kind: tier.KindUser, Text: "span starts"},
		/* 3 */ {Kind: tier.KindToolResult, ID: "c2"},
		/* 4 */ {Kind: tier.KindToolCall, ID: "c2", Name: "bash"},
		/* 5 */ {Kind: tier.KindToolResult, ID: "c2"},
	}
	before, span := spanOf(t, evs, 2, 5)
	req, err := tier.ComputeRequired(before, span)
	if err != nil {
		t.Fatal(err)
	}
	if want := []tier.Resolution{{ID: "c2", Kind: tier.KindToolCall, Name: "bash", Seq: 1, At: 3}}; !reflect.DeepEqual(req.Resolved, want) {
		t.Errorf("resolved %v, want %v", req.Resolved, want)
	}
	if len(req.Unresolved) != 0 {
		t.Errorf("unresolved %v, want none", req.Unresolved)
	}
}

// TestLedger_KeySucceedsAfterFailing: a key's failed tool_result makes it
// failed; a later successful one makes it succeeded, keeping the seq of the
// failure, and sets PriorFailure on the event; a success of a rejected key,
// or of a key that never failed, changes nothing.
func TestLedger_KeySucceedsAfterFailing(t *testing.T) {
	l := tier.NewLedger()
	evs := []tier.Event{
		{Seq: 1, Kind: tier.KindToolCall, ID: "c1", Name: "bash"},
		{Seq: 2, Kind: tier.KindToolResult, ID: "c1", Key: "deploy", Failed: true, Text: "timeout"},
		{Seq: 3, Kind: tier.KindToolCall, ID: "c1", Name: "bash"},
		{Seq: 4, Kind: tier.KindToolResult, ID: "c1", Key: "deploy", Text: "deployed"},
		{Seq: 5, Kind: tier.KindRejected, Key: "approach/x", Text: "no"},
		{Seq: 6, Kind: tier.KindToolCall, ID: "c2"},
		{Seq: 7, Kind: tier.KindToolResult, ID: "c2", Key: "approach/x", Text: "ran anyway"},
		{Seq: 8, Kind: tier.KindToolCall, ID: "c3"},
		{Seq: 9, Kind: tier.KindToolResult, ID: "c3", Key: "fresh", Text: "fine"},
	}
	for i := range evs {
		if err := l.Apply(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := l.Dispositions["deploy"], (tier.Disposition{Key: "deploy", State: tier.StateSucceeded, Reason: "deployed", Seq: 4, FailedAt: 2}); got != want {
		t.Errorf("deploy: %+v, want %+v", got, want)
	}
	if evs[3].PriorFailure != 2 {
		t.Errorf("the success's PriorFailure = %d, want 2", evs[3].PriorFailure)
	}
	if got := l.Dispositions["approach/x"]; got.State != tier.KindRejected || evs[6].PriorFailure != 0 {
		t.Errorf("a rejected key's success: %+v, PriorFailure %d", got, evs[6].PriorFailure)
	}
	if _, ok := l.Dispositions["fresh"]; ok {
		t.Error("a success of a key that never failed made a disposition")
	}
	if tier.StateName(tier.StateSucceeded) != "succeeded" || tier.StateName(tier.KindRejected) != "rejected" {
		t.Error("StateName")
	}

	// A span that starts after the failure knows it from PriorFailure
	// alone, and requires the key succeeded.
	req, err := tier.ComputeRequired(nil, evs[2:4])
	if err != nil {
		t.Fatal(err)
	}
	want := []tier.Disposition{{Key: "deploy", State: tier.StateSucceeded, Reason: "deployed", Seq: 4, FailedAt: 2}}
	if !reflect.DeepEqual(req.Dispositions, want) {
		t.Errorf("span 3..4 requires %+v, want %+v", req.Dispositions, want)
	}
}

// TestComputeRequired_FailuresAreFacts: every failed result in the span is
// a required failure — with or without a key, opened before the span or in
// it, with the result's text as its reason — and a failed resolution of a
// call opened before the span says it failed.
func TestComputeRequired_FailuresAreFacts(t *testing.T) {
	evs := []tier.Event{
		/* 1 */ {Kind: tier.KindToolCall, ID: "c1", Name: "deploy"},
		/* 2 */ {Kind: tier.KindUser, Text: "span starts"},
		/* 3 */ {Kind: tier.KindToolResult, ID: "c1", Failed: true, Text: "permission denied"},
		/* 4 */ {Kind: tier.KindToolCall, ID: "c2", Name: "bash"},
		/* 5 */ {Kind: tier.KindToolResult, ID: "c2", Failed: true, Text: "exit 1"},
		/* 6 */ {Kind: tier.KindOpen, ID: "p1", Name: "process"},
		/* 7 */ {Kind: tier.KindClose, ID: "p1", Failed: true, Text: "killed"},
		/* 8 */ {Kind: tier.KindToolCall, ID: "c3", Name: "ls"},
		/* 9 */ {Kind: tier.KindToolResult, ID: "c3", Text: "a b"},
	}
	before, span := spanOf(t, evs, 2, 9)
	req, err := tier.ComputeRequired(before, span)
	if err != nil {
		t.Fatal(err)
	}
	wantF := []tier.Resolution{
		{ID: "c1", Kind: tier.KindToolCall, Name: "deploy", Seq: 1, At: 3, Failed: true, Reason: "permission denied"},
		{ID: "c2", Kind: tier.KindToolCall, Name: "bash", Seq: 4, At: 5, Failed: true, Reason: "exit 1"},
		{ID: "p1", Kind: tier.KindOpen, Name: "process", Seq: 6, At: 7, Failed: true, Reason: "killed"},
	}
	if !reflect.DeepEqual(req.Failures, wantF) {
		t.Errorf("failures:\n got %+v\nwant %+v", req.Failures, wantF)
	}
	wantR := []tier.Resolution{{ID: "c1", Kind: tier.KindToolCall, Name: "deploy", Seq: 1, At: 3, Failed: true}}
	if !reflect.DeepEqual(req.Resolved, wantR) {
		t.Errorf("resolved:\n got %+v\nwant %+v", req.Resolved, wantR)
	}
	c := req.Claims()
	if len(c.Failures) != 3 || c.Count() != req.Count() {
		t.Errorf("Claims carries %d failures, %d claims of %d", len(c.Failures), c.Count(), req.Count())
	}
}
