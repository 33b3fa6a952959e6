// Package storetest is the conformance suite of strata's backends: every
// behaviour the store must have over a backend, stated once and run against
// each (in the manner of testing/fstest.TestFS). A backend's tests call Run
// with a way to make a fresh backend and to reopen one.
//
// The suite drives the store's protocol — append with the ledger, plan,
// commit with validation, invalidation, refusal, resume and verify — through
// package store's API only; what it checks holds whatever holds the bytes.
package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Harness makes the backends the suite runs on.
type Harness struct {
	// New returns a fresh, empty backend.
	New func(t *testing.T) backend.Backend
	// Reopen returns the same data as be in a new backend, as a process
	// that starts after be's process ended would find it; be is closed
	// already. Nil skips the tests that reopen.
	Reopen func(t *testing.T, be backend.Backend) backend.Backend
}

// Run runs every test of the suite as a subtest of t.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"AppendIsAtomic", appendIsAtomic},
		{"SeqsAreGapless", seqsAreGapless},
		{"LedgerRefusesOrphans", ledgerRefusesOrphans},
		{"ValidSummaryCommitsMarker", validSummaryCommitsMarker},
		{"InvalidSummaryIsRefused", invalidSummaryIsRefused},
		{"ChangedFrameConflicts", changedFrameConflicts},
		{"FoldInvalidatesChildren", foldInvalidatesChildren},
		{"ResumeGivesSameBytes", resumeGivesSameBytes},
		{"CommittedSurvivesReopen", committedSurvivesReopen},
		{"SessionsAreSeparate", sessionsAreSeparate},
		{"RefsRefuseARecordTwice", refsRefuseARecordTwice},
		{"RefsOfConcurrentAppends", refsOfConcurrentAppends},
		{"RefsSurviveReopen", refsSurviveReopen},
		{"VerifyChecksRefs", verifyChecksRefs},
		{"ForkResumesToParentBytes", forkResumesToParentBytes},
		{"ForkRefusesInvalidMarker", forkRefusesInvalidMarker},
		{"ForkAtFallback", forkAtFallback},
		{"CopyTakesAncestors", copyTakesAncestors},
		{"PruneKeepsWhatForksNeed", pruneKeepsWhatForksNeed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// open returns a DB over a fresh backend that is verified when the test
// ends.
func open(t *testing.T, h Harness) *store.DB {
	t.Helper()
	db, err := store.New(h.New(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mustVerify(t, db)
		_ = db.Close()
	})
	return db
}

func mustVerify(t *testing.T, db *store.DB) {
	t.Helper()
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Errorf("verify: %v", err)
		return
	}
	for _, p := range rep.Problems {
		t.Errorf("verify: %s", p)
	}
}

// turn returns the events of one turn: a user message, a tool call and its
// result, an assistant answer.
func turn(n int) []tier.Event {
	id := fmt.Sprintf("call-%d", n)
	return []tier.Event{
		{Kind: tier.KindUser, Text: fmt.Sprintf("step %d", n)},
		{Kind: tier.KindToolCall, ID: id, Name: "run"},
		{Kind: tier.KindToolResult, ID: id, Text: "ok"},
		{Kind: tier.KindAssistant, Text: fmt.Sprintf("done %d", n)},
	}
}

func mustAppend(t *testing.T, db *store.DB, session string, events ...tier.Event) store.AppendResult {
	t.Helper()
	res, err := db.Append(session, events...)
	if err != nil {
		t.Fatalf("append to %s: %v", session, err)
	}
	return res
}

// extractive is a summary carrying every claim the plan requires.
func extractive(p *store.Plan) store.Summary {
	return store.Summary{Narrative: fmt.Sprintf("seq %d..%d", p.From, p.To), Claims: p.Required.Claims(), Summarizer: "storetest"}
}

// planNext plans an L1 span over the next n uncompacted events.
func planNext(t *testing.T, db *store.DB, session string, n uint64) *store.Plan {
	t.Helper()
	info, err := db.Info(session)
	if err != nil {
		t.Fatal(err)
	}
	p, err := db.PlanSpan(session, info.CompactedTo+n, 4096)
	if err != nil {
		t.Fatalf("plan span: %v", err)
	}
	return p
}

// compactSpan plans and commits an L1 span over the next n events.
func compactSpan(t *testing.T, db *store.DB, session string, n uint64) store.CommitResult {
	t.Helper()
	p := planNext(t, db, session, n)
	res, err := db.Commit(p, extractive(p))
	if err != nil {
		t.Fatalf("commit span %d..%d: %v", p.From, p.To, err)
	}
	return res
}

// Events returns every event of session in db, in seq order, failing t on
// an error: a helper for tests of packages other than this one too.
func Events(t testing.TB, db *store.DB, session string) []tier.Event {
	t.Helper()
	var out []tier.Event
	err := db.View(func(s *store.Snapshot) error {
		return s.Events(session, 1, ^uint64(0), func(e tier.Event) error {
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func appendIsAtomic(t *testing.T, h Harness) {
	db := open(t, h)
	mustAppend(t, db, "s", turn(1)...)
	bad := append(turn(2), tier.Event{Kind: tier.KindToolResult, ID: "never-called", Text: "x"})
	_, err := db.Append("s", bad...)
	var ee *tier.EventError
	if !errors.As(err, &ee) || ee.Index != len(bad)-1 {
		t.Fatalf("append with an orphan result: %v, want an *tier.EventError at index %d", err, len(bad)-1)
	}
	if got := Events(t, db, "s"); len(got) != 4 {
		t.Fatalf("after a refused append: %d events stored, want the 4 before it", len(got))
	}
	info, err := db.Info("s")
	if err != nil || info.Head != 4 {
		t.Fatalf("info after a refused append: %+v, %v; want head 4", info, err)
	}
	// A refused first append makes no session.
	if _, err := db.Append("new", tier.Event{Kind: tier.KindToolResult, ID: "x"}); err == nil {
		t.Fatal("an orphan result as a session's first event was accepted")
	}
	if _, err := db.Info("new"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Fatalf("info of a session whose only append was refused: %v, want ErrSessionNotFound", err)
	}
}

func seqsAreGapless(t *testing.T, h Harness) {
	db := open(t, h)
	const writers, each = 8, 10
	var wg sync.WaitGroup
	results := make([][]store.AppendResult, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := db.Append("s", tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprintf("w%d-%d", w, i)},
					tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprintf("w%d-%d'", w, i)})
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				results[w] = append(results[w], res)
			}
		}()
	}
	wg.Wait()
	got := Events(t, db, "s")
	if len(got) != 2*writers*each {
		t.Fatalf("%d events stored, want %d", len(got), 2*writers*each)
	}
	for i, e := range got {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	// Each append's two events are adjacent, where it says they are.
	for _, rs := range results {
		for _, r := range rs {
			if r.Last != r.First+1 || got[r.First].Text != got[r.First-1].Text+"'" {
				t.Fatalf("append landed at %d..%d: %q, %q", r.First, r.Last, got[r.First-1].Text, got[r.First].Text)
			}
		}
	}
}

func ledgerRefusesOrphans(t *testing.T, h Harness) {
	db := open(t, h)
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "run"})
	_, err := db.Append("s", tier.Event{Kind: tier.KindToolCall, ID: "c1", Name: "run"})
	if err == nil {
		t.Fatal("a second call with an open call's id was accepted")
	}
	l, err := ledger(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Open["c1"]; !ok || len(l.Open) != 1 {
		t.Fatalf("ledger open calls %v, want c1 alone", l.Open)
	}
}

func ledger(db *store.DB, session string) (l *tier.Ledger, err error) {
	err = db.View(func(s *store.Snapshot) error {
		l, err = s.Ledger(session)
		return err
	})
	return l, err
}

func validSummaryCommitsMarker(t *testing.T, h Harness) {
	db := open(t, h)
	for i := range 3 {
		mustAppend(t, db, "s", turn(i)...)
	}
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindToolCall, ID: "open-call", Name: "wait"})
	res := compactSpan(t, db, "s", 13)
	if res.Node == nil || res.Marker == 0 || res.Refusal != nil {
		t.Fatalf("commit: %+v, want a node and its marker", res)
	}
	if !slices.ContainsFunc(res.Node.Claims.Unresolved, func(o tier.Open) bool { return o.ID == "open-call" }) {
		t.Fatalf("node claims %+v do not carry the open call", res.Node.Claims)
	}
	ctx, err := db.Resume("s", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Source != checkpoint.SourceMarker || ctx.Marker != res.Marker || len(ctx.Nodes) != 1 {
		t.Fatalf("resume: marker %d with %d nodes, want marker %d with its node", ctx.Marker, len(ctx.Nodes), res.Marker)
	}
}

func invalidSummaryIsRefused(t *testing.T, h Harness) {
	db := open(t, h)
	mustAppend(t, db, "s", turn(1)...)
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindRejected, Key: "plan-a", Text: "too slow"})
	mustAppend(t, db, "s", turn(2)...)
	p := planNext(t, db, "s", 9)
	sum := extractive(p)
	sum.Claims.Dispositions = nil // a summary that forgot the rejected plan
	res, err := db.Commit(p, sum)
	if !errors.Is(err, marker.ErrMarkerInvalid) {
		t.Fatalf("commit of a summary without the rejection: %v, want ErrMarkerInvalid", err)
	}
	if res.Node != nil || res.Refusal == nil || res.Checkpoint == 0 {
		t.Fatalf("refused commit: %+v, want no node, a refusal and its checkpoint", res)
	}
	var refusals []store.Refusal
	err = db.View(func(s *store.Snapshot) error {
		return s.Refusals("s", func(r store.Refusal) error { refusals = append(refusals, r); return nil })
	})
	if err != nil || len(refusals) != 1 || len(refusals[0].Failures) == 0 {
		t.Fatalf("audit: %+v, %v; want one refusal naming its failures", refusals, err)
	}
	ctx, err := db.Resume("s", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Source != checkpoint.SourceCheckpoint || ctx.Checkpoint != res.Checkpoint || len(ctx.Events) != 9 || ctx.Reason == "" {
		t.Fatalf("resume after a refusal: marker %d checkpoint %d, %d raw events, reason %q; want checkpoint %d with all 9 raw events and a reason",
			ctx.Marker, ctx.Checkpoint, len(ctx.Events), ctx.Reason, res.Checkpoint)
	}
}

func changedFrameConflicts(t *testing.T, h Harness) {
	db := open(t, h)
	for i := range 4 {
		mustAppend(t, db, "s", turn(i)...)
	}
	p1, p2 := planNext(t, db, "s", 8), planNext(t, db, "s", 8)
	if _, err := db.Commit(p1, extractive(p1)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p2, extractive(p2)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second commit of the same span: %v, want ErrConflict", err)
	}
	n := 0
	err := db.View(func(s *store.Snapshot) error {
		return s.Markers("s", func(marker.Marker) error { n++; return nil })
	})
	if err != nil || n != 1 {
		t.Fatalf("%d markers (%v), want exactly one", n, err)
	}
}

func foldInvalidatesChildren(t *testing.T, h Harness) {
	db := open(t, h)
	for i := range 8 {
		mustAppend(t, db, "s", turn(i)...)
	}
	var children []uint64
	for range 4 {
		children = append(children, compactSpan(t, db, "s", 8).Marker)
	}
	p, err := db.PlanFold("s", children[0], 4, 4096)
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Commit(p, extractive(p))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.InvalidatedMarkers, children) {
		t.Fatalf("fold invalidated markers %v, want its children's %v", res.InvalidatedMarkers, children)
	}
	err = db.View(func(s *store.Snapshot) error {
		for _, id := range children {
			m, err := s.Marker("s", id)
			if err != nil {
				return err
			}
			if m.Status != marker.StatusInvalid || m.Reason == "" {
				return errors.Newf("marker %d after the fold: status %v reason %q", id, m.Status, m.Reason)
			}
		}
		roots, err := s.Roots("s")
		if err != nil {
			return err
		}
		if len(roots) != 1 || roots[0].Depth != 2 {
			return errors.Newf("roots after the fold: %d, want one L2", len(roots))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := db.Resume("s", children[1])
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Source != checkpoint.SourceCheckpoint || ctx.Reason == "" {
		t.Fatalf("resume from an invalidated marker: source %s, reason %q; want a checkpoint with the reason", ctx.Source, ctx.Reason)
	}
}

func resumeGivesSameBytes(t *testing.T, h Harness) {
	db := open(t, h)
	for i := range 5 {
		mustAppend(t, db, "s", turn(i)...)
	}
	compactSpan(t, db, "s", 8)
	a, err := db.Resume("s", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.Resume("s", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Text(), b.Text()) {
		t.Fatal("two resumes of the same database differ")
	}
}

func committedSurvivesReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen a backend")
	}
	be := h.New(t)
	db, err := store.New(be, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		mustAppend(t, db, "s", turn(i)...)
	}
	compactSpan(t, db, "s", 8)
	before, err := db.Resume("s", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	db = reopen(t, h, be, db)
	defer db.Close()
	mustVerify(t, db)
	after, err := db.Resume("s", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.Text(), before.Text()) {
		t.Fatal("the resumed context differs after a reopen")
	}
	if res := mustAppend(t, db, "s", turn(9)...); res.First != 21 {
		t.Fatalf("append after a reopen landed at %d, want 21", res.First)
	}
}

func sessionsAreSeparate(t *testing.T, h Harness) {
	db := open(t, h)
	mustAppend(t, db, "b", turn(1)...)
	mustAppend(t, db, "a", turn(2)...)
	mustAppend(t, db, "a", tier.Event{Kind: tier.KindToolCall, ID: "call-1", Name: "run"}) // b's id, open in a only
	ids, err := db.Sessions()
	if err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("sessions %v, %v; want [a b]", ids, err)
	}
	la, err := ledger(db, "a")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := ledger(db, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(la.Open) != 1 || len(lb.Open) != 0 {
		t.Fatalf("open calls: a %v, b %v; want one in a, none in b", la.Open, lb.Open)
	}
}

// recorded returns the events of turn(n) as made from two source records:
// the user's message, and the call with its result and the answer.
func recorded(n int) []tier.Event {
	evs := turn(n)
	evs[0].Ref = fmt.Sprintf("u%d", n)
	for i := 1; i < len(evs); i++ {
		evs[i].Ref = fmt.Sprintf("a%d", n)
	}
	return evs
}

// refSpan returns where the events of ref are in session.
func refSpan(t *testing.T, db *store.DB, session, ref string) (span store.RefSpan, ok bool) {
	t.Helper()
	err := db.View(func(s *store.Snapshot) (err error) {
		span, ok, err = s.Ref(session, ref)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return span, ok
}

// wantRefError checks that err is an append refused at event index for
// ref, stored at first..last of session.
func wantRefError(t *testing.T, err error, index int, session, ref string, first, last uint64) {
	t.Helper()
	var ee *tier.EventError
	var re *store.RefError
	switch {
	case !errors.As(err, &ee) || !errors.As(err, &re) || !errors.Is(err, store.ErrRefStored):
		t.Fatalf("append = %v, want a *tier.EventError with a *store.RefError", err)
	case ee.Index != index || re.Session != session || re.Ref != ref || re.First != first || re.Last != last:
		t.Fatalf("append refused at index %d, %+v; want index %d, %s %q at %d..%d", ee.Index, re, index, session, ref, first, last)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("%q", ref)) || !strings.Contains(msg, fmt.Sprintf("seq %d", first)) {
		t.Errorf("message %q does not name the ref and its seq", msg)
	}
}

func refsRefuseARecordTwice(t *testing.T, h Harness) {
	db := open(t, h)
	mustAppend(t, db, "s", recorded(1)...)
	if span, ok := refSpan(t, db, "s", "a1"); !ok || span != (store.RefSpan{First: 2, Last: 4}) {
		t.Fatalf("ref a1 at %+v (found %v), want seq 2..4", span, ok)
	}
	if span, ok := refSpan(t, db, "s", "u1"); !ok || span != (store.RefSpan{First: 1, Last: 1}) {
		t.Fatalf("ref u1 at %+v (found %v), want seq 1", span, ok)
	}
	if _, ok := refSpan(t, db, "s", "u2"); ok {
		t.Fatal("ref u2 found before it was appended")
	}
	if _, ok := refSpan(t, db, "other", "u1"); ok {
		t.Fatal("ref u1 found in a session that does not exist")
	}
	// The same records again, after a new one: refused whole.
	again := append(recorded(2), recorded(1)...)
	_, err := db.Append("s", again...)
	wantRefError(t, err, 4, "s", "u1", 1, 1)
	if got := Events(t, db, "s"); len(got) != 4 {
		t.Fatalf("after a refused append: %d events, want 4", len(got))
	}
	if _, ok := refSpan(t, db, "s", "u2"); ok {
		t.Fatal("ref u2 of the refused append is indexed")
	}
	// A record's events apart from each other in one append: refused.
	split := recorded(3)
	split[2].Ref = "other"
	_, err = db.Append("s", split...)
	wantRefError(t, err, 3, "s", "a3", 6, 6)
	// A ref is a session's: another session takes the same records.
	mustAppend(t, db, "t", recorded(1)...)
	// Events without a ref are never refused for it.
	mustAppend(t, db, "s", turn(4)...)
	mustAppend(t, db, "s", recorded(2)...)
	if span, ok := refSpan(t, db, "s", "a2"); !ok || span != (store.RefSpan{First: 10, Last: 12}) {
		t.Fatalf("ref a2 at %+v (found %v), want seq 10..12", span, ok)
	}
}

func refsOfConcurrentAppends(t *testing.T, h Harness) {
	db := open(t, h)
	mustAppend(t, db, "s", recorded(0)...)
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[w] = db.Append("s", append(recorded(1), recorded(2)...)...)
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrRefStored):
			t.Errorf("append: %v, want nil or ErrRefStored", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d appends of the same records stored them, want 1", ok, writers)
	}
	if got := Events(t, db, "s"); len(got) != 12 {
		t.Fatalf("%d events, want 12: the records once", len(got))
	}
}

// reopen closes db, a DB over be, and returns a DB over be reopened by h.
func reopen(t *testing.T, h Harness, be backend.Backend, db *store.DB) *store.DB {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := store.New(h.Reopen(t, be), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func refsSurviveReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("the harness cannot reopen a backend")
	}
	be := h.New(t)
	db, err := store.New(be, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, "s", recorded(1)...)
	db = reopen(t, h, be, db)
	defer db.Close()
	mustVerify(t, db)
	_, err = db.Append("s", recorded(1)...)
	wantRefError(t, err, 0, "s", "u1", 1, 1)
	// dump --raw --json gives events with their refs: replayed into
	// another session, they index the same records.
	mustAppend(t, db, "copy", Events(t, db, "s")...)
	if span, ok := refSpan(t, db, "copy", "a1"); !ok || span != (store.RefSpan{First: 2, Last: 4}) {
		t.Fatalf("the copy's ref a1 at %+v (found %v), want seq 2..4", span, ok)
	}
	mustVerify(t, db)
}

// damageRefs changes the Refs table of session through the backend, as
// damage (or another program) would, with valid records.
func damageRefs(t *testing.T, be backend.Backend, session string, fn func(backend.Session) error) {
	t.Helper()
	err := be.Update(func(tx backend.Tx) error {
		s, err := tx.Session(session)
		if err != nil || s == nil {
			return errors.Newf("session %s: %v", session, err)
		}
		return fn(s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func verifyChecksRefs(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name   string
		damage func(s backend.Session) error
		want   string
	}{
		{"an event whose ref is not indexed", func(s backend.Session) error {
			return s.Delete(backend.Refs, []byte("a1"))
		}, `l0: seq 2..4 carry ref "a1", which refs does not index`},
		{"an entry with no event", func(s backend.Session) error {
			v, err := s.Get(backend.Refs, []byte("a1"))
			if err != nil || v == nil {
				return errors.Newf("entry a1: %v", err)
			}
			return s.Put(backend.Refs, []byte("ghost"), append([]byte(nil), v...))
		}, `refs: ref "ghost" indexes seq 2..4, whose first event carries ref "a1"`},
		{"an entry of other seqs", func(s backend.Session) error {
			v, err := s.Get(backend.Refs, []byte("a1"))
			if err != nil || v == nil {
				return errors.Newf("entry a1: %v", err)
			}
			return s.Put(backend.Refs, []byte("u1"), append([]byte(nil), v...))
		}, `refs: ref "u1" indexes seq 2..4, but seq 1..1 carry it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := h.New(t)
			db, err := store.New(be, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			mustAppend(t, db, "s", recorded(1)...)
			mustVerify(t, db)
			damageRefs(t, be, "s", tc.damage)
			rep, err := db.Verify(store.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range rep.Problems {
				found = found || p.Session == "s" && strings.Contains(p.What, tc.want)
			}
			if !found {
				t.Fatalf("verify found %v, want %q", rep.Problems, tc.want)
			}
		})
	}
}
