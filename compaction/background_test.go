package compaction_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// backgroundLoad (and backgroundLoadOf) is the incident's long session under three session ids,
// appended in runs of 7 events: interleaved (a, b, c, a, b, c, …), so that
// an Append must wait for its session's previous Run, or consecutive for
// the first half of each session (a, a, …, b, b, …), so that an Append
// goes on while its session's previous Run is still to come.
func backgroundLoad(t *testing.T) (order []string, runs [][]tier.Event) {
	return backgroundLoadOf(t, false)
}

func backgroundLoadOf(t *testing.T, consecutive bool) (order []string, runs [][]tier.Event) {
	_, evs := readIncident(t, "long_migration.jsonl")
	ids := []string{"a", "b", "c"}
	half := len(evs) / 2
	if consecutive {
		for _, id := range ids {
			for from := 0; from < half; from += 7 {
				order = append(order, id)
				runs = append(runs, evs[from:min(from+7, half)])
			}
		}
	}
	start := 0
	if consecutive {
		start = half
	}
	for from := start; from < len(evs); from += 7 {
		for _, id := range ids {
			order = append(order, id)
			runs = append(runs, evs[from:min(from+7, len(evs))])
		}
	}
	return order, runs
}

// TestBackground_SameAsSequential: compacting in the background gives the
// database, and the reports in the order, that appending and calling Run
// after each append on one goroutine gives — with a summarizer that is
// refused now and then, so that refusals are compared too.
func TestBackground_SameAsSequential(t *testing.T) {
	for _, consecutive := range []bool{false, true} {
		t.Run(fmt.Sprint("consecutive=", consecutive), func(t *testing.T) {
			order, runs := backgroundLoadOf(t, consecutive)
			sameAsSequential(t, order, runs)
		})
	}
}

func sameAsSequential(t *testing.T, order []string, runs [][]tier.Event) {
	opts := compaction.Options{
		Summarizer: mustLossy(t, compaction.DropOpen),
		Policy:     compaction.Policy{EveryEvents: 6, Fold: 2},
	}
	open := func() *store.DB {
		return dbtest.Open(t, store.Options{Clock: func() time.Time { return time.Unix(1_700_000_000, 0) }})
	}

	seqDB := open()
	seq := newCompactor(t, seqDB, opts)
	var want []string
	for i, id := range order {
		if _, err := seqDB.Append(id, runs[i]...); err != nil {
			t.Fatal(err)
		}
		rs, err := seq.Run(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			want = append(want, fmt.Sprintf("%s %+v", id, r))
		}
	}

	bgDB := open()
	var got []string
	bg := newCompactor(t, bgDB, opts).Background(context.Background(), func(id string, rs []compaction.Result) {
		for _, r := range rs {
			got = append(got, fmt.Sprintf("%s %+v", id, r))
		}
	})
	for i, id := range order {
		if _, err := bg.Append(id, runs[i]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := bg.Close(); err != nil {
		t.Fatal(err)
	}

	if len(want) < 10 {
		t.Fatalf("only %d compactions: the load does not exercise the queue", len(want))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reports differ:\nbackground %q\nsequential %q", got, want)
	}
	for _, id := range []string{"a", "b", "c"} {
		if g, w := resume(t, bgDB, id, store.Latest).SHA256(), resume(t, seqDB, id, store.Latest).SHA256(); g != w {
			t.Errorf("session %s resumes to %s in the background, %s sequentially", id, g, w)
		}
		if g, w := markers(t, bgDB, id), markers(t, seqDB, id); !reflect.DeepEqual(g, w) {
			t.Errorf("session %s: markers differ", id)
		}
		if g, w := checkpoints(t, bgDB, id), checkpoints(t, seqDB, id); !reflect.DeepEqual(g, w) {
			t.Errorf("session %s: checkpoints differ", id)
		}
		if g, w := refusals(t, bgDB, id), refusals(t, seqDB, id); !reflect.DeepEqual(g, w) {
			t.Errorf("session %s: refusals differ", id)
		}
	}
	verifyClean(t, bgDB)
}

// TestBackground_ErrorStops: a Run's error stops the Background. The
// Append after it appends nothing and returns it (marked ErrStopped), and
// Close returns it; a Run being made beside the failed one is made and
// reported, and a Run queued and not begun is not made.
func TestBackground_ErrorStops(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	boom := errors.New("model down")
	entered := make(chan string, 4)
	hold := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	failing := summarizerFunc{name: "flaky", fn: func(in *compaction.Input) (compaction.Output, error) {
		if h := hold[in.Session]; h != nil {
			entered <- in.Session
			<-h
		}
		if in.Session == "b" {
			return compaction.Output{}, boom
		}
		return compaction.Extractive{}.Summarize(context.Background(), in)
	}}
	c := newCompactor(t, db, compaction.Options{Summarizer: failing, Policy: compaction.Policy{EveryEvents: 2}, BackgroundRuns: 2})
	reported := map[string]int{}
	bg := c.Background(context.Background(), func(id string, rs []compaction.Result) {
		reported[id] += len(rs)
	})
	evs := func() []tier.Event {
		return []tier.Event{{Kind: tier.KindUser, Text: "u"}, {Kind: tier.KindAssistant, Text: "a"}}
	}
	for _, id := range []string{"a", "b"} {
		if _, err := bg.Append(id, evs()...); err != nil {
			t.Fatal(err)
		}
	}
	<-entered
	<-entered // a's and b's Runs are both being made: c's waits
	if _, err := bg.Append("c", evs()...); err != nil {
		t.Fatal(err)
	}
	close(hold["b"])
	// "b" failed: appending to it again waits for its Run, then refuses.
	_, err := bg.Append("b", evs()...)
	if !errors.Is(err, compaction.ErrStopped) || !errors.Is(err, boom) {
		t.Fatalf("Append after the failure = %v, want ErrStopped and the summarizer's error", err)
	}
	close(hold["a"])
	if err := bg.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want the summarizer's error", err)
	}
	if got := len(allEvents(t, db, "b")); got != 2 {
		t.Errorf("session b holds %d events, want the 2 appended before the failure", got)
	}
	if reported["a"] != 1 || reported["c"] != 0 {
		t.Errorf("reported %v, want a's compaction and nothing of c (not begun when b failed)", reported)
	}
	if r := roots(t, db, "c"); len(r) != 0 {
		t.Errorf("session c was compacted after the Background stopped: %v", r)
	}
}

// TestBackground_SessionsAtOnce: Runs of different sessions are made at
// once, a session's one at a time, and the reports come in the order the
// Runs were queued whichever finishes first.
func TestBackground_SessionsAtOnce(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	entered := make(chan string, 16)
	hold := map[string]chan struct{}{"x": make(chan struct{}), "y": make(chan struct{})}
	var inX atomic.Int32
	blocking := summarizerFunc{name: "blocking", fn: func(in *compaction.Input) (compaction.Output, error) {
		if in.Session == "x" && inX.Add(1) > 1 {
			return compaction.Output{}, errors.New("two Runs of x at once")
		}
		defer func() {
			if in.Session == "x" {
				inX.Add(-1)
			}
		}()
		entered <- in.Session
		<-hold[in.Session]
		return compaction.Extractive{}.Summarize(context.Background(), in)
	}}
	c := newCompactor(t, db, compaction.Options{Summarizer: blocking, Policy: compaction.Policy{EveryEvents: 2}})
	var order []string
	bg := c.Background(context.Background(), func(id string, rs []compaction.Result) {
		for _, r := range rs {
			order = append(order, fmt.Sprintf("%s %d..%d", id, r.From, r.To))
		}
	})
	two := func() []tier.Event {
		return []tier.Event{{Kind: tier.KindUser, Text: "u"}, {Kind: tier.KindAssistant, Text: "a"}}
	}
	for _, id := range []string{"x", "x", "y"} {
		if _, err := bg.Append(id, two()...); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{<-entered: true, <-entered: true} // x's and y's Runs, both held
	if !got["x"] || !got["y"] {
		t.Fatalf("Runs entered %v, want x's and y's at once", got)
	}
	close(hold["y"]) // y's Run finishes first; its report waits for x's
	close(hold["x"])
	if err := bg.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"x 1..2", "x 3..4", "y 1..2"}; !reflect.DeepEqual(order, want) {
		t.Errorf("reports %q, want %q", order, want)
	}
}

// TestBackground_RunsAtMost: with BackgroundRuns 2, the Runs of three
// sessions are made two at a time: while two are held in the summarizer,
// the third begins only after one of them is let go.
func TestBackground_RunsAtMost(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	entered := make(chan string, 3)
	release := make(chan struct{}, 3)
	var in, most atomic.Int32
	held := summarizerFunc{name: "held", fn: func(x *compaction.Input) (compaction.Output, error) {
		n := in.Add(1)
		defer in.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		entered <- x.Session
		<-release
		return compaction.Extractive{}.Summarize(context.Background(), x)
	}}
	c := newCompactor(t, db, compaction.Options{Summarizer: held, Policy: compaction.Policy{EveryEvents: 2}, BackgroundRuns: 2})
	bg := c.Background(context.Background(), nil)
	for _, id := range []string{"a", "b", "c"} {
		if _, err := bg.Append(id, tier.Event{Kind: tier.KindUser, Text: "u"}, tier.Event{Kind: tier.KindAssistant, Text: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	<-entered
	<-entered // two Runs held
	release <- struct{}{}
	<-entered // the third, once one is let go
	release <- struct{}{}
	release <- struct{}{}
	if err := bg.Close(); err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m != 2 {
		t.Errorf("at most %d Runs at once, want 2", m)
	}
}

// TestBackground_CloseWaitsForAppends: Close waits for an Append in
// progress and makes its Run; an Append after Close appends nothing.
func TestBackground_CloseWaitsForAppends(t *testing.T) {
	var block atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: func() time.Time {
		if block.Load() {
			block.Store(false)
			close(entered)
			<-release
		}
		return time.Unix(1_700_000_000, 0)
	}})
	c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.Policy{EveryEvents: 2}})
	bg := c.Background(context.Background(), nil)
	block.Store(true)
	appended := make(chan error, 1)
	go func() {
		_, err := bg.Append("s", tier.Event{Kind: tier.KindUser, Text: "a"}, tier.Event{Kind: tier.KindAssistant, Text: "b"})
		appended <- err
	}()
	<-entered // inside the store's Append, past Background's checks
	closed := make(chan error, 1)
	go func() { closed <- bg.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an Append was in progress", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := len(roots(t, db, "s")); n != 1 {
		t.Errorf("%d roots after Close, want the appended events compacted", n)
	}
	if _, err := bg.Append("s", tier.Event{Kind: tier.KindUser, Text: "c"}); err == nil {
		t.Error("Append after Close: no error")
	}
	if got := len(allEvents(t, db, "s")); got != 2 {
		t.Errorf("%d events stored, want the 2 appended before Close", got)
	}
}

// TestBackground_CommitsNeverWaitForAnAppendThatWaitsForThem: with a
// CommitWait of a minute, a load whose appends wait for their session's
// Run, and a Close, finish at once: a compaction's commit never waits for
// an append that is itself waiting for that compaction, nor for one after
// the last.
func TestBackground_CommitsNeverWaitForAnAppendThatWaitsForThem(t *testing.T) {
	order, runs := backgroundLoadOf(t, false)
	db := dbtest.Open(t, store.Options{NoSync: true, CommitWait: time.Minute, Clock: func() time.Time { return time.Unix(1_700_000_000, 0) }})
	c := newCompactor(t, db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.Policy{EveryEvents: 6, Fold: 2}})
	done := make(chan error, 1)
	go func() {
		bg := c.Background(context.Background(), nil)
		for i, id := range order {
			if _, err := bg.Append(id, runs[i]...); err != nil {
				done <- err
				return
			}
		}
		done <- bg.Close()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a commit waited for an append that could not come (CommitWait is a minute)")
	}
	if n := len(roots(t, db, "a")); n == 0 {
		t.Error("nothing compacted")
	}
}

// TestBackground_AppendGoesOnWhileItsSessionCompacts: an Append to the
// session whose Run was queued last does not wait for that Run (the Run
// may see its events too: the reports come in the same order), while an
// Append to a session whose Run has another session's queued after it
// does.
func TestBackground_AppendGoesOnWhileItsSessionCompacts(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	entered, release := make(chan string, 16), make(chan struct{})
	blocking := summarizerFunc{name: "blocking", fn: func(in *compaction.Input) (compaction.Output, error) {
		entered <- in.Session
		<-release
		return compaction.Extractive{}.Summarize(context.Background(), in)
	}}
	c := newCompactor(t, db, compaction.Options{Summarizer: blocking, Policy: compaction.Policy{EveryEvents: 2}})
	bg := c.Background(context.Background(), nil)
	two := func() []tier.Event {
		return []tier.Event{{Kind: tier.KindUser, Text: "u"}, {Kind: tier.KindAssistant, Text: "a"}}
	}
	if _, err := bg.Append("x", two()...); err != nil {
		t.Fatal(err)
	}
	<-entered // x's Run is summarizing, held
	appended := make(chan error, 1)
	go func() {
		_, err := bg.Append("x", two()...)
		appended <- err
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an Append to the session queued last waited for its Run")
	}
	// Now y is queued after x: another Append to x must wait for x's Runs.
	if _, err := bg.Append("y", two()...); err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := bg.Append("x", two()...)
		appended <- err
	}()
	select {
	case err := <-appended:
		t.Fatalf("an Append to x went on while x's Run, with y's after it, was held (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if err := bg.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(allEvents(t, db, "x")); got != 6 {
		t.Errorf("x holds %d events, want 6", got)
	}
}

// TestBackground_GoesOnPastAnOversizeNode: a span whose raw log's claims are
// over the size limit is refused with its reason, however small the
// summary that names them; the Background compactor reports the refusal
// and goes on: it takes the session's next appends, asks again past the
// refusal (a span from the same start, refused for the same reason), and
// compacts another session meanwhile; Close reports no error.
func TestBackground_GoesOnPastAnOversizeNode(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true, MaxEventBytes: 1000})
	keysOnly := summarizerFunc{name: "keys", fn: func(in *compaction.Input) (compaction.Output, error) {
		c := in.Required.Claims()
		for i := range c.Artifacts {
			c.Artifacts[i].Text = ""
		}
		return compaction.Output{Narrative: "a span", Claims: c}, nil
	}}
	comp := newCompactor(t, db, compaction.Options{Summarizer: keysOnly, Policy: compaction.Policy{EveryEvents: 4, Budget: 1000}})
	var reports []compaction.Result
	bg := comp.Background(context.Background(), func(_ string, rs []compaction.Result) { reports = append(reports, rs...) })
	big := strings.Repeat("x", 400)
	var artifacts, users []tier.Event
	for _, k := range []string{"a", "b", "c", "d"} {
		artifacts = append(artifacts, tier.Event{Kind: tier.KindArtifact, Key: "file/" + k, Text: big})
		users = append(users, tier.Event{Kind: tier.KindUser, Text: "next " + k})
	}
	for _, w := range []struct {
		session string
		events  []tier.Event
	}{{"s", artifacts}, {"other", users}, {"s", users}} {
		if _, err := bg.Append(w.session, w.events...); err != nil {
			t.Fatalf("append to %s: %v", w.session, err)
		}
	}
	if err := bg.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var refusals, other int
	for _, r := range reports {
		switch {
		case r.Session == "other" && r.Committed():
			other++
		case r.Session == "s" && r.Refused != nil:
			if f := r.Refused.Failures; len(f) != 1 || f[0].Class != marker.ClassSize || f[0].Item != "the raw log's claims" {
				t.Errorf("span %d..%d refused for %v, want the raw log's claims' size", r.From, r.To, f)
			}
			refusals++
		default:
			t.Errorf("report %+v", r)
		}
	}
	// s's second Run may come after both of its appends, its first Run
	// then refusing 1..8 at once.
	if refusals == 0 || other != 1 {
		t.Errorf("%d refusals of s and %d nodes of other, want some and 1", refusals, other)
	}
}
