package compaction_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/store/storetest"
	"github.com/strata-go/strata/tier"
)

// readJSONL reads a file of the event format and returns its events per
// session, in order of first appearance; def names the session of lines
// without one (and of the lines after them, as the CLI's --session does).
func readJSONL(t testing.TB, path, def string) (sessions []string, events map[string][]tier.Event) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events = map[string][]tier.Event{}
	rd := tier.NewReader(f, path, tier.Limits{})
	cur := def
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if rec.Session != "" {
			cur = rec.Session
		}
		if _, ok := events[cur]; !ok {
			sessions = append(sessions, cur)
		}
		events[cur] = append(events[cur], rec.Event)
	}
	return sessions, events
}

// readIncident reads a one-session fixture of testdata/incident.
func readIncident(t testing.TB, name string) (string, []tier.Event) {
	t.Helper()
	sessions, evs := readJSONL(t, "../testdata/incident/"+name, "")
	if len(sessions) != 1 {
		t.Fatalf("%s: %d sessions, want 1", name, len(sessions))
	}
	return sessions[0], evs[sessions[0]]
}

func newCompactor(t testing.TB, db *store.DB, opts compaction.Options) *compaction.Compactor {
	t.Helper()
	c, err := compaction.NewCompactor(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustLossy(t testing.TB, drop ...string) *compaction.Lossy {
	t.Helper()
	l, err := compaction.NewLossy(drop...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// agentLoop is what an embedding agent does: append each event as it
// happens and run the compactor after it.
func agentLoop(t testing.TB, db *store.DB, c *compaction.Compactor, session string, events []tier.Event) []compaction.Result {
	t.Helper()
	var out []compaction.Result
	for i := range events {
		if _, err := db.Append(session, events[i]); err != nil {
			t.Fatalf("append event %d: %v", i+1, err)
		}
		rs, err := c.Run(context.Background(), session)
		if err != nil {
			t.Fatalf("run after event %d: %v", i+1, err)
		}
		out = append(out, rs...)
	}
	return out
}

// summarizerFunc adapts a function to compaction.Summarizer.
type summarizerFunc struct {
	name string
	fn   func(in *compaction.Input) (compaction.Output, error)
}

func (s summarizerFunc) Name() string { return s.name }
func (s summarizerFunc) Summarize(_ context.Context, in *compaction.Input) (compaction.Output, error) {
	return s.fn(in)
}

func allEvents(t testing.TB, db *store.DB, session string) []tier.Event {
	t.Helper()
	out := storetest.Events(t, db, session)
	for i := range out {
		if out[i].Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, out[i].Seq)
		}
	}
	return out
}

func node(t testing.TB, db *store.DB, session string, id uint64) (n tier.Node) {
	t.Helper()
	err := db.View(func(s *store.Snapshot) (err error) {
		n, err = s.Node(session, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func getMarker(t testing.TB, db *store.DB, session string, id uint64) (m marker.Marker) {
	t.Helper()
	err := db.View(func(s *store.Snapshot) (err error) {
		m, err = s.Marker(session, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func markers(t testing.TB, db *store.DB, session string) []marker.Marker {
	t.Helper()
	var out []marker.Marker
	err := db.View(func(s *store.Snapshot) error {
		return s.Markers(session, func(m marker.Marker) error { out = append(out, m); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkpoints(t testing.TB, db *store.DB, session string) []checkpoint.Checkpoint {
	t.Helper()
	var out []checkpoint.Checkpoint
	err := db.View(func(s *store.Snapshot) error {
		return s.Checkpoints(session, func(c checkpoint.Checkpoint) error { out = append(out, c); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func refusals(t testing.TB, db *store.DB, session string) []store.Refusal {
	t.Helper()
	var out []store.Refusal
	err := db.View(func(s *store.Snapshot) error {
		return s.Refusals(session, func(r store.Refusal) error { out = append(out, r); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func roots(t testing.TB, db *store.DB, session string) []tier.Node {
	t.Helper()
	var out []tier.Node
	err := db.View(func(s *store.Snapshot) (err error) {
		out, err = s.Roots(session)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func resume(t testing.TB, db *store.DB, session string, markerID uint64) *checkpoint.Context {
	t.Helper()
	ctx, err := db.Resume(session, markerID)
	if err != nil {
		t.Fatalf("Resume(%s, %d): %v", session, markerID, err)
	}
	return ctx
}

// reopen closes db and opens its database again read-only, closed at the
// end of the test.
func reopen(t testing.TB, db *store.DB) *store.DB {
	t.Helper()
	return dbtest.Reopen(t, db, store.Options{ReadOnly: true})
}

func verifyClean(t testing.TB, db *store.DB) {
	t.Helper()
	if !dbtest.Verify(t, db) {
		t.FailNow()
	}
}

func failureStrings(fs []marker.Failure) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}

func isRefused(err error) bool { return errors.Is(err, marker.ErrMarkerInvalid) }

// ---- An independent model of what a span implies ----
//
// spanFacts is computed by a naive full replay of the raw log from seq 1,
// written here without tier's Ledger or RequiredBuilder, so that the tests
// check the store's validation against a second, simpler implementation.

type dispFact struct {
	State tier.Kind
	By    string
}

type spanFacts struct {
	From, To  uint64
	Open      map[string]tier.Kind // open at To: call or resource
	Resolved  map[string]bool      // "id@opener": opened before From, resolved in the span
	Failed    map[string]bool      // "id@opener": failed in the span
	Disp      map[string]dispFact  // final disposition of keys changed in the span
	Withdrawn map[string]bool      // constraints stated or withdrawn in the span → withdrawn at To?
	Artifacts map[string]bool      // recorded in the span
	// ResolvedIn is every "id@opener" resolved in the span: a resolved claim
	// for one of them is true even when not required.
	ResolvedIn map[string]bool
}

// naiveFacts replays events (the whole log from seq 1) up to to.
func naiveFacts(events []tier.Event, from, to uint64) spanFacts {
	f := spanFacts{From: from, To: to, Open: map[string]tier.Kind{}, Resolved: map[string]bool{}, Failed: map[string]bool{},
		Disp: map[string]dispFact{}, Withdrawn: map[string]bool{}, Artifacts: map[string]bool{}, ResolvedIn: map[string]bool{}}
	openedAt := map[string]uint64{}
	failedAt := map[string]uint64{} // key → seq of its failure, while failed
	active := map[string]bool{}
	touched := map[string]bool{}
	for _, e := range events {
		if e.Seq > to {
			break
		}
		in := e.Seq >= from
		switch e.Kind {
		case tier.KindToolCall, tier.KindOpen:
			openedAt[e.ID] = e.Seq
			f.Open[e.ID] = e.Kind
		case tier.KindToolResult, tier.KindClose:
			inv := fmt.Sprintf("%s@%d", e.ID, openedAt[e.ID])
			if in {
				f.ResolvedIn[inv] = true
				if openedAt[e.ID] < from {
					f.Resolved[inv] = true
				}
				if e.Failed {
					f.Failed[inv] = true
				}
			}
			if e.Kind == tier.KindToolResult && e.Key != "" {
				switch {
				case e.Failed:
					failedAt[e.Key] = e.Seq
					if in {
						f.Disp[e.Key] = dispFact{State: tier.KindFailed}
					}
				case failedAt[e.Key] != 0:
					delete(failedAt, e.Key)
					if in {
						f.Disp[e.Key] = dispFact{State: tier.StateSucceeded}
					}
				}
			}
			delete(openedAt, e.ID)
			delete(f.Open, e.ID)
		case tier.KindConstraint:
			active[e.Key] = true
			if in {
				touched[e.Key] = true
			}
		case tier.KindWithdrawn:
			delete(active, e.Key)
			if in {
				touched[e.Key] = true
			}
		case tier.KindRejected, tier.KindFailed, tier.KindSuperseded:
			delete(failedAt, e.Key)
			if e.Kind == tier.KindFailed {
				failedAt[e.Key] = e.Seq
			}
			if in {
				f.Disp[e.Key] = dispFact{State: e.Kind, By: e.By}
			}
		case tier.KindArtifact:
			if in {
				f.Artifacts[e.Key] = true
			}
		}
	}
	for k := range touched {
		f.Withdrawn[k] = !active[k]
	}
	return f
}

// diff lists, in a stable order, every way claims differ from what the
// span implies: a missing fact, a fact with the wrong state, or a claim the
// span does not imply.
func (f *spanFacts) diff(c *tier.Claims) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	claimedOpen := map[string]tier.Kind{}
	for _, o := range c.Unresolved {
		claimedOpen[o.ID] = o.Kind
	}
	for id, k := range f.Open {
		if got, ok := claimedOpen[id]; !ok {
			add("open %s not claimed UNRESOLVED", id)
		} else if got != k {
			add("open %s claimed as a %s, opened by %s", id, got, k)
		}
	}
	for id := range claimedOpen {
		if _, ok := f.Open[id]; !ok {
			add("%s claimed UNRESOLVED, not open at %d", id, f.To)
		}
	}
	invocations := func(rs []tier.Resolution) map[string]bool {
		m := map[string]bool{}
		for _, r := range rs {
			m[fmt.Sprintf("%s@%d", r.ID, r.Seq)] = true
		}
		return m
	}
	claimedResolved, claimedFailed := invocations(c.Resolved), invocations(c.Failures)
	for inv := range f.Resolved {
		if !claimedResolved[inv] {
			add("%s resolved in the span, not claimed resolved", inv)
		}
	}
	for inv := range claimedResolved {
		if !f.ResolvedIn[inv] {
			add("%s claimed resolved, not resolved in the span", inv)
		}
	}
	for inv := range f.Failed {
		if !claimedFailed[inv] {
			add("%s failed in the span, not claimed failed", inv)
		}
	}
	for inv := range claimedFailed {
		if !f.Failed[inv] {
			add("%s claimed failed, did not fail in the span", inv)
		}
	}
	claimedDisp := map[string]tier.Disposition{}
	for _, d := range c.Dispositions {
		claimedDisp[d.Key] = d
	}
	for k, want := range f.Disp {
		got, ok := claimedDisp[k]
		switch {
		case !ok:
			add("disposition %s (%s) not claimed", k, want.State)
		case got.State != want.State || got.By != want.By:
			add("disposition %s claimed %v by %q, the span ends %s by %q", k, got.State, got.By, want.State, want.By)
		}
	}
	for k := range claimedDisp {
		if _, ok := f.Disp[k]; !ok {
			add("disposition %s claimed, not changed in the span", k)
		}
	}
	claimedConstr := map[string]bool{}
	for _, x := range c.Constraints {
		claimedConstr[x.Key] = x.Withdrawn
	}
	for k, w := range f.Withdrawn {
		got, ok := claimedConstr[k]
		switch {
		case !ok:
			add("constraint %s not claimed", k)
		case got != w:
			add("constraint %s claimed withdrawn=%v, is withdrawn=%v", k, got, w)
		}
	}
	for k := range claimedConstr {
		if _, ok := f.Withdrawn[k]; !ok {
			add("constraint %s claimed, not stated or withdrawn in the span", k)
		}
	}
	claimedArt := map[string]bool{}
	for _, a := range c.Artifacts {
		claimedArt[a.Key] = true
	}
	for k := range f.Artifacts {
		if !claimedArt[k] {
			add("artifact %s not claimed", k)
		}
	}
	for k := range claimedArt {
		if !f.Artifacts[k] {
			add("artifact %s claimed, not recorded in the span", k)
		}
	}
	sort.Strings(out)
	return out
}

// checkValidMarkers checks, independently of marker.Validate, that every
// valid marker's node carries exactly what its raw span implies, and is a
// root; and that every invalid marker says why.
func checkValidMarkers(t testing.TB, db *store.DB, session string) (valid int) {
	t.Helper()
	return checkValidMarkersOf(t, db, session, allEvents(t, db, session))
}

// checkValidMarkersOf is checkValidMarkers given the session's events.
func checkValidMarkersOf(t testing.TB, db *store.DB, session string, events []tier.Event) (valid int) {
	t.Helper()
	rs := map[uint64]bool{}
	for _, r := range roots(t, db, session) {
		rs[r.ID] = true
	}
	for _, m := range markers(t, db, session) {
		if m.Status != marker.StatusValid {
			if m.Reason == "" {
				t.Errorf("marker %d: %s without a reason", m.ID, m.Status)
			}
			continue
		}
		valid++
		n := node(t, db, session, m.Node)
		if !rs[n.ID] {
			t.Errorf("marker %d is valid but node %d is not a root", m.ID, n.ID)
		}
		if n.To != m.Boundary || n.Depth != m.Depth {
			t.Errorf("marker %d: boundary %d depth %s, node %d..%d %s", m.ID, m.Boundary, m.Depth, n.From, n.To, n.Depth)
		}
		f := naiveFacts(events, n.From, n.To)
		for _, d := range f.diff(&n.Claims) {
			t.Errorf("VALID marker %d (%s node %d, seq %d..%d): %s", m.ID, n.Depth, n.ID, n.From, n.To, d)
		}
	}
	return valid
}

// checkContextHoldsFacts checks that a resumed context is whole: nodes
// covering seq 1..Boundary in order, the raw events Boundary+1..Head, and
// every fact at head — each open call or resource, the final disposition of
// every key, every constraint's state and every artifact — either claimed
// by the node whose span last changed it or present in the raw tail.
func checkContextHoldsFacts(t testing.TB, db *store.DB, session string, ctx *checkpoint.Context) {
	t.Helper()
	checkContextHoldsFactsOf(t, allEvents(t, db, session), ctx)
}

// checkContextHoldsFactsOf is checkContextHoldsFacts given the session's
// events.
func checkContextHoldsFactsOf(t testing.TB, events []tier.Event, ctx *checkpoint.Context) {
	t.Helper()
	head := uint64(len(events))
	if ctx.Head != head {
		t.Errorf("context head %d, the log ends at %d", ctx.Head, head)
	}
	next := uint64(1)
	for _, n := range ctx.Nodes {
		if n.From != next {
			t.Errorf("context node %d starts at %d, want %d", n.ID, n.From, next)
		}
		next = n.To + 1
	}
	if next-1 != ctx.Boundary {
		t.Errorf("context nodes cover 1..%d, boundary %d", next-1, ctx.Boundary)
	}
	for i, e := range ctx.Events {
		if e.Seq != ctx.Boundary+1+uint64(i) {
			t.Fatalf("context raw event %d has seq %d, want %d", i, e.Seq, ctx.Boundary+1+uint64(i))
		}
	}
	if uint64(len(ctx.Events)) != head-ctx.Boundary {
		t.Fatalf("context has %d raw events, want %d..%d", len(ctx.Events), ctx.Boundary+1, head)
	}
	covering := func(seq uint64) *tier.Node {
		for i := range ctx.Nodes {
			if ctx.Nodes[i].From <= seq && seq <= ctx.Nodes[i].To {
				return &ctx.Nodes[i]
			}
		}
		return nil
	}
	type last struct {
		seq uint64
		e   tier.Event
	}
	open := map[string]last{}
	disp := map[string]last{}
	constr := map[string]last{}
	art := map[string]last{}
	var failures []last // every failed result, as a fact of its own
	for _, e := range events {
		switch {
		case e.Kind.Opens():
			open[e.ID] = last{e.Seq, e}
		case e.Kind.Resolves():
			if e.Failed {
				failures = append(failures, last{open[e.ID].seq, e})
			}
			delete(open, e.ID)
			switch {
			case e.Kind != tier.KindToolResult || e.Key == "":
			case e.Failed:
				disp[e.Key] = last{e.Seq, tier.Event{Kind: tier.KindFailed, Key: e.Key}}
			case disp[e.Key].e.Kind == tier.KindFailed:
				disp[e.Key] = last{e.Seq, tier.Event{Kind: tier.StateSucceeded, Key: e.Key}}
			}
		case e.Kind.IsDisposition():
			disp[e.Key] = last{e.Seq, e}
		case e.Kind == tier.KindConstraint || e.Kind == tier.KindWithdrawn:
			constr[e.Key] = last{e.Seq, e}
		case e.Kind == tier.KindArtifact:
			art[e.Key] = last{e.Seq, e}
		}
	}
	for _, id := range sortedKeys(open) {
		l := open[id]
		if l.seq > ctx.Boundary {
			continue // its opening event is in the raw tail
		}
		last := ctx.Nodes[len(ctx.Nodes)-1]
		if !slices.ContainsFunc(last.Claims.Unresolved, func(o tier.Open) bool { return o.ID == id }) {
			t.Errorf("open %s (seq %d) is neither in the raw tail nor claimed UNRESOLVED by node %d (seq %d..%d)", id, l.seq, last.ID, last.From, last.To)
		}
	}
	for _, k := range sortedKeys(disp) {
		l := disp[k]
		if l.seq > ctx.Boundary {
			continue
		}
		n := covering(l.seq)
		if n == nil || !slices.ContainsFunc(n.Claims.Dispositions, func(d tier.Disposition) bool {
			return d.Key == k && d.State == l.e.Kind && d.By == l.e.By
		}) {
			t.Errorf("disposition %s %s (seq %d) is not claimed by the node covering it", l.e.Kind, k, l.seq)
		}
	}
	for _, l := range failures {
		if l.e.Seq > ctx.Boundary {
			continue
		}
		n := covering(l.e.Seq)
		if n == nil || !slices.ContainsFunc(n.Claims.Failures, func(r tier.Resolution) bool {
			return r.ID == l.e.ID && r.Seq == l.seq && r.At == l.e.Seq
		}) {
			t.Errorf("failed call %s@%d (seq %d) is not claimed by the node covering it", l.e.ID, l.seq, l.e.Seq)
		}
	}
	for _, k := range sortedKeys(constr) {
		l := constr[k]
		if l.seq > ctx.Boundary {
			continue
		}
		withdrawn := l.e.Kind == tier.KindWithdrawn
		n := covering(l.seq)
		if n == nil || !slices.ContainsFunc(n.Claims.Constraints, func(c tier.Constraint) bool {
			return c.Key == k && c.Withdrawn == withdrawn
		}) {
			t.Errorf("constraint %s (withdrawn=%v, seq %d) is not claimed by the node covering it", k, withdrawn, l.seq)
		}
	}
	for _, k := range sortedKeys(art) {
		l := art[k]
		if l.seq > ctx.Boundary {
			continue
		}
		n := covering(l.seq)
		if n == nil || !slices.ContainsFunc(n.Claims.Artifacts, func(a tier.Artifact) bool { return a.Key == k }) {
			t.Errorf("artifact %s (seq %d) is not claimed by the node covering it", k, l.seq)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
