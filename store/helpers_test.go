package store_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// t0 is the time of the test clock's first tick.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// testClock returns a clock that advances one millisecond per call, so that
// the time recorded on an event tells which Append read the clock.
func testClock() func() time.Time {
	var n atomic.Int64
	return func() time.Time { return t0.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

// setClock is a clock that reads what the test set.
type setClock struct{ ns atomic.Int64 }

func (c *setClock) set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (c *setClock) now() time.Time  { return time.Unix(0, c.ns.Load()) }

func mustAppend(t testing.TB, db *store.DB, session string, evs ...tier.Event) store.AppendResult {
	t.Helper()
	res, err := db.Append(session, evs...)
	if err != nil {
		t.Fatalf("Append(%q, %d events): %v", session, len(evs), err)
	}
	return res
}

// sessionState is everything a reader can see of one session.
type sessionState struct {
	Exists bool
	Info   store.Info
	Events []tier.Event
	Ledger *tier.Ledger
}

func readSession(t testing.TB, s *store.Snapshot, session string) sessionState {
	t.Helper()
	info, err := s.Info(session)
	if errors.Is(err, store.ErrSessionNotFound) {
		return sessionState{}
	}
	if err != nil {
		t.Fatalf("Info(%q): %v", session, err)
	}
	st := sessionState{Exists: true, Info: info}
	if err := s.Events(session, 1, info.Head, func(e tier.Event) error {
		st.Events = append(st.Events, e)
		return nil
	}); err != nil {
		t.Fatalf("Events(%q): %v", session, err)
	}
	if st.Ledger, err = s.Ledger(session); err != nil {
		t.Fatalf("Ledger(%q): %v", session, err)
	}
	return st
}

func state(t testing.TB, db *store.DB, session string) (st sessionState) {
	t.Helper()
	if err := db.View(func(s *store.Snapshot) error {
		st = readSession(t, s, session)
		return nil
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	return st
}

// allStates reads every session in one snapshot.
func allStates(t testing.TB, db *store.DB) map[string]sessionState {
	t.Helper()
	out := map[string]sessionState{}
	if err := db.View(func(s *store.Snapshot) error {
		ids, err := s.Sessions()
		if err != nil {
			return err
		}
		for _, id := range ids {
			out[id] = readSession(t, s, id)
		}
		return nil
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	return out
}

// sameState reports how a and b differ; none means equal.
func sameState(a, b sessionState) []string {
	var out []string
	if a.Exists != b.Exists || a.Info != b.Info {
		out = append(out, "info differs")
	}
	if len(a.Events) != len(b.Events) {
		out = append(out, "event count differs")
	} else if !reflect.DeepEqual(a.Events, b.Events) {
		out = append(out, "events differ")
	}
	switch {
	case a.Ledger == nil && b.Ledger == nil:
	case a.Ledger == nil || b.Ledger == nil:
		out = append(out, "ledger present in one only")
	default:
		out = append(out, a.Ledger.Diff(b.Ledger)...)
	}
	return out
}

// replayLedger applies the stored events to a fresh ledger, checking that
// each event's stored opener is the one the replay assigns.
func replayLedger(t testing.TB, evs []tier.Event) *tier.Ledger {
	t.Helper()
	l := tier.NewLedger()
	for _, e := range evs {
		stored := e.Opener
		if err := l.Apply(&e); err != nil {
			t.Fatalf("seq %d does not replay: %v", e.Seq, err)
		}
		if e.Opener != stored {
			t.Errorf("seq %d: stored opener %d, replay %d", e.Seq, stored, e.Opener)
		}
	}
	return l
}

// killChild runs the test binary's test child — a helper process, which
// skips unless env names its work — with env added, waits for its "ready"
// line, kills it with SIGKILL after the given time and returns every line
// it printed. It fails t when the child ended before the kill (its last
// lines say why). Each kill loop (crash, fork, backup) runs its children
// through it.
func killChild(t *testing.T, child string, env []string, after time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var out []string
	for l := range lines {
		out = append(out, l)
		if l == "ready" {
			break
		}
	}
	time.Sleep(after)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	for l := range lines {
		out = append(out, l)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("%s exited before it was killed (%v): %q", child, err, out[max(0, len(out)-3):])
	}
	return out
}

// digestTurn is turn i of a session that opens a call and resolves the one
// before it, rejects an approach, restates a constraint and records an
// artifact now and then: 4 events.
func digestTurn(i int) []tier.Event {
	evs := []tier.Event{
		{Kind: tier.KindUser, Text: fmt.Sprintf("turn %d", i)},
		{Kind: tier.KindToolCall, ID: fmt.Sprintf("c%d", i), Name: "bash"},
	}
	if i > 0 {
		evs = append(evs, tier.Event{Kind: tier.KindToolResult, ID: fmt.Sprintf("c%d", i-1), Failed: i%3 == 0, Key: keyIf(i%3 == 0, fmt.Sprintf("approach/%d", i%4))})
	} else {
		evs = append(evs, tier.Event{Kind: tier.KindAssistant, Text: "start"})
	}
	switch i % 4 {
	case 0:
		evs = append(evs, tier.Event{Kind: tier.KindRejected, Key: fmt.Sprintf("approach/%d", i%5), Text: fmt.Sprint("no, turn ", i)})
	case 1:
		evs = append(evs, tier.Event{Kind: tier.KindConstraint, Key: fmt.Sprintf("rule/%d", i%3), Text: fmt.Sprint("as of turn ", i)})
	case 2:
		evs = append(evs, tier.Event{Kind: tier.KindArtifact, Key: fmt.Sprintf("out/%d.txt", i%3), Text: fmt.Sprint("v", i)})
	default:
		evs = append(evs, tier.Event{Kind: tier.KindAssistant, Text: "ok"})
	}
	return evs
}

func keyIf(ok bool, k string) string {
	if ok {
		return k
	}
	return ""
}

// digestFixture is session "s" of turns digestTurns, compacted into L1
// roots of 4 events each, with no digest yet, in a database that is
// verified when the test ends.
func digestFixture(t *testing.T, turns int) *store.DB {
	t.Helper()
	return digestFixtureIn(t, dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()}), turns)
}

// digestFixtureIn is digestFixture in db.
func digestFixtureIn(t *testing.T, db *store.DB, turns int) *store.DB {
	t.Helper()
	for i := 0; i < turns; i++ {
		mustAppend(t, db, "s", digestTurn(i)...)
	}
	compactHonestly(t, db, "s", 100)
	return db
}

// compactHonestly commits L1 nodes over every due span of every 4 events,
// then digests while the frame holds more than maxRoots, each with a
// summary that carries exactly what its plan requires.
func compactHonestly(t *testing.T, db *store.DB, session string, maxRoots int) (digests []*store.Plan) {
	t.Helper()
	commit := func(p *store.Plan) {
		t.Helper()
		if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
			t.Fatalf("commit %s %d..%d: %v", p.Kind, p.From, p.To, err)
		}
	}
	for {
		p, err := compaction.Policy{EveryEvents: 4, Budget: 1000}.PlanSpan(db, session)
		if errors.Is(err, store.ErrNothingToCompact) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		commit(p)
		for {
			d, err := compaction.Policy{MaxRoots: maxRoots, Budget: 1000}.PlanDigest(db, session)
			if errors.Is(err, store.ErrNothingToCompact) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			commit(d)
			digests = append(digests, d)
		}
	}
	return digests
}

func ev(text string) tier.Event {
	return tier.Event{Kind: tier.KindUser, Text: text, Time: t0.UnixNano()}
}

func mustRoots(t *testing.T, db *store.DB, session string) (roots []tier.Node) {
	t.Helper()
	if err := db.View(func(s *store.Snapshot) (err error) {
		roots, err = s.Roots(session)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return roots
}

func mustVerify(t *testing.T, db *store.DB) {
	t.Helper()
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Error(p)
	}
}
