package store_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// prefix is what an existing session holds before a bad append: a call and
// a handle open, a constraint active, an artifact, turn 2.
var prefix = []tier.Event{
	{Kind: tier.KindUser, Text: "start"},
	{Kind: tier.KindConstraint, Key: "active", Text: "stated"},
	{Kind: tier.KindToolCall, ID: "call-1", Name: "bash"},
	{Kind: tier.KindOpen, ID: "handle-1", Name: "file"},
	{Kind: tier.KindArtifact, Key: "a.txt"},
	{Kind: tier.KindUser, Text: "second turn"},
}

type badAppend struct {
	name string
	// existingOnly: the events are bad only against prefix.
	existingOnly bool
	// bad returns the refused events, given the session's head.
	bad   func(head uint64) []tier.Event
	opts  store.Options
	want  error
	index int
	// seq returns the seq the error must name, given the head; nil means
	// the event's own Seq (0 when it has none: a format error comes before
	// seqs are assigned).
	seq func(head uint64) uint64
}

func evs(es ...tier.Event) func(uint64) []tier.Event {
	return func(uint64) []tier.Event { return es }
}

// at says that the error names the seq of the index-th event of the append.
func at(index int) func(uint64) uint64 {
	return func(head uint64) uint64 { return head + uint64(index) + 1 }
}

var (
	user = tier.Event{Kind: tier.KindUser, Text: "a good event before the bad one"}
	asst = tier.Event{Kind: tier.KindAssistant, Text: "another good event"}
)

func badAppends() []badAppend {
	return []badAppend{
		// Format rules (tier.Event.Check), refused before the transaction.
		{name: "unknown kind", bad: evs(user, tier.Event{Kind: 99, Text: "x"}), want: tier.ErrUnknownKind, index: 1},
		{name: "zero kind", bad: evs(tier.Event{Text: "x"}), want: tier.ErrUnknownKind, index: 0},
		{name: "tool_call without id", bad: evs(user, tier.Event{Kind: tier.KindToolCall, Name: "bash"}), want: tier.ErrMissingID, index: 1},
		{name: "tool_result without id", bad: evs(tier.Event{Kind: tier.KindToolResult}), want: tier.ErrMissingID},
		{name: "open without id", bad: evs(user, asst, tier.Event{Kind: tier.KindOpen, Name: "file"}), want: tier.ErrMissingID, index: 2},
		{name: "close without id", bad: evs(tier.Event{Kind: tier.KindClose}), want: tier.ErrMissingID},
		{name: "constraint without key", bad: evs(user, tier.Event{Kind: tier.KindConstraint, Text: "x"}), want: tier.ErrMissingKey, index: 1},
		{name: "withdrawn without key", bad: evs(tier.Event{Kind: tier.KindWithdrawn}), want: tier.ErrMissingKey},
		{name: "rejected without key", bad: evs(tier.Event{Kind: tier.KindRejected, Text: "no"}), want: tier.ErrMissingKey},
		{name: "failed without key", bad: evs(tier.Event{Kind: tier.KindFailed}), want: tier.ErrMissingKey},
		{name: "superseded without key", bad: evs(tier.Event{Kind: tier.KindSuperseded, By: "b"}), want: tier.ErrMissingKey},
		{name: "artifact without key", bad: evs(user, tier.Event{Kind: tier.KindArtifact}), want: tier.ErrMissingKey, index: 1},
		{name: "invalid UTF-8 in text", bad: evs(user, tier.Event{Kind: tier.KindAssistant, Text: "caf\xe9"}), want: tier.ErrInvalidUTF8, index: 1},
		{name: "invalid UTF-8 in id", bad: evs(tier.Event{Kind: tier.KindToolCall, ID: "c\xff"}), want: tier.ErrInvalidUTF8},
		{name: "invalid UTF-8 in key", bad: evs(tier.Event{Kind: tier.KindRejected, Key: "\xc3("}), want: tier.ErrInvalidUTF8},
		{name: "invalid UTF-8 in by", bad: evs(tier.Event{Kind: tier.KindSuperseded, Key: "k", By: "\x80"}), want: tier.ErrInvalidUTF8},
		{name: "control character in id", bad: evs(tier.Event{Kind: tier.KindToolCall, ID: "c\n1"}), want: tier.ErrBadField},
		{name: "control character in key", bad: evs(user, tier.Event{Kind: tier.KindArtifact, Key: "x\x00y"}), want: tier.ErrBadField, index: 1},
		{name: "control character in name", bad: evs(tier.Event{Kind: tier.KindOpen, ID: "h", Name: "\x1b[0m"}), want: tier.ErrBadField},
		{name: "by on rejected", bad: evs(tier.Event{Kind: tier.KindRejected, Key: "k", By: "other"}), want: tier.ErrBadField},
		{name: "by on assistant", bad: evs(user, tier.Event{Kind: tier.KindAssistant, By: "other"}), want: tier.ErrBadField, index: 1},
		{name: "ok=false on tool_call", bad: evs(tier.Event{Kind: tier.KindToolCall, ID: "c", Failed: true}), want: tier.ErrBadField},
		{name: "ok=false on failed", bad: evs(tier.Event{Kind: tier.KindFailed, Key: "k", Failed: true}), want: tier.ErrBadField},
		{name: "event over MaxEventBytes", opts: store.Options{MaxEventBytes: 1 << 10},
			bad:  evs(user, tier.Event{Kind: tier.KindAssistant, Text: strings.Repeat("x", 1<<10+1)}),
			want: tier.ErrTooLarge, index: 1},
		{name: "id over MaxIDBytes", opts: store.Options{MaxIDBytes: 16},
			bad:  evs(tier.Event{Kind: tier.KindToolCall, ID: strings.Repeat("i", 17)}),
			want: tier.ErrTooLarge},
		{name: "event over the default MaxEventBytes",
			bad:  evs(tier.Event{Kind: tier.KindUser, Text: strings.Repeat("x", tier.DefaultMaxEventBytes+1)}),
			want: tier.ErrTooLarge},

		// Ledger rules, refused inside the transaction with the seq the
		// event would have had.
		{name: "tool_result for an id not open", bad: evs(user, tier.Event{Kind: tier.KindToolResult, ID: "nope"}), want: tier.ErrNotOpen, index: 1, seq: at(1)},
		{name: "close for an id not open", bad: evs(tier.Event{Kind: tier.KindClose, ID: "nope"}), want: tier.ErrNotOpen, seq: at(0)},
		{name: "tool_result twice", bad: evs(tier.Event{Kind: tier.KindToolCall, ID: "c9"}, tier.Event{Kind: tier.KindToolResult, ID: "c9"}, tier.Event{Kind: tier.KindToolResult, ID: "c9"}), want: tier.ErrNotOpen, index: 2, seq: at(2)},
		{name: "tool_result for a handle", bad: evs(tier.Event{Kind: tier.KindOpen, ID: "h9", Name: "file"}, tier.Event{Kind: tier.KindToolResult, ID: "h9"}), want: tier.ErrWrongResource, index: 1, seq: at(1)},
		{name: "close of a tool call", bad: evs(tier.Event{Kind: tier.KindToolCall, ID: "c9"}, tier.Event{Kind: tier.KindClose, ID: "c9"}), want: tier.ErrWrongResource, index: 1, seq: at(1)},
		{name: "tool_result for a handle opened earlier", existingOnly: true, bad: evs(tier.Event{Kind: tier.KindToolResult, ID: "handle-1"}), want: tier.ErrWrongResource, seq: at(0)},
		{name: "close of a call opened earlier", existingOnly: true, bad: evs(user, tier.Event{Kind: tier.KindClose, ID: "call-1"}), want: tier.ErrWrongResource, index: 1, seq: at(1)},
		{name: "tool_call opened twice", bad: evs(tier.Event{Kind: tier.KindToolCall, ID: "c9"}, asst, tier.Event{Kind: tier.KindToolCall, ID: "c9"}), want: tier.ErrAlreadyOpen, index: 2, seq: at(2)},
		{name: "open of an id open as a call", bad: evs(tier.Event{Kind: tier.KindToolCall, ID: "x"}, tier.Event{Kind: tier.KindOpen, ID: "x"}), want: tier.ErrAlreadyOpen, index: 1, seq: at(1)},
		{name: "tool_call of a call open since earlier", existingOnly: true, bad: evs(tier.Event{Kind: tier.KindToolCall, ID: "call-1"}), want: tier.ErrAlreadyOpen, seq: at(0)},
		{name: "withdrawn of a constraint never stated", bad: evs(tier.Event{Kind: tier.KindWithdrawn, Key: "never"}), want: tier.ErrNotActive, seq: at(0)},
		{name: "withdrawn twice", bad: evs(tier.Event{Kind: tier.KindConstraint, Key: "k"}, tier.Event{Kind: tier.KindWithdrawn, Key: "k"}, tier.Event{Kind: tier.KindWithdrawn, Key: "k"}), want: tier.ErrNotActive, index: 2, seq: at(2)},
		{name: "withdrawn twice across appends", existingOnly: true, bad: evs(tier.Event{Kind: tier.KindWithdrawn, Key: "active"}, tier.Event{Kind: tier.KindWithdrawn, Key: "active"}), want: tier.ErrNotActive, index: 1, seq: at(1)},

		// Seq and turn rules.
		{name: "seq skips ahead", bad: func(h uint64) []tier.Event { return []tier.Event{{Kind: tier.KindUser, Seq: h + 2}} },
			want: tier.ErrSeqOrder, seq: func(h uint64) uint64 { return h + 2 }},
		{name: "seq repeats the head", existingOnly: true, bad: func(h uint64) []tier.Event { return []tier.Event{{Kind: tier.KindUser, Seq: h}} },
			want: tier.ErrSeqOrder, seq: func(h uint64) uint64 { return h }},
		{name: "seq out of order in a multi-event append", bad: func(h uint64) []tier.Event {
			return []tier.Event{{Kind: tier.KindUser, Seq: h + 1}, {Kind: tier.KindAssistant, Seq: h + 2}, {Kind: tier.KindAssistant, Seq: h + 4}}
		}, want: tier.ErrSeqOrder, index: 2, seq: func(h uint64) uint64 { return h + 4 }},
		{name: "seq of the first event given to the second", bad: func(h uint64) []tier.Event {
			return []tier.Event{{Kind: tier.KindUser}, {Kind: tier.KindAssistant, Seq: h + 1}}
		}, want: tier.ErrSeqOrder, index: 1, seq: func(h uint64) uint64 { return h + 1 }},
		{name: "turn goes backwards", bad: evs(tier.Event{Kind: tier.KindUser, Turn: 7}, tier.Event{Kind: tier.KindAssistant, Turn: 6}), want: tier.ErrTurnOrder, index: 1, seq: at(1)},
		{name: "turn below the session's", existingOnly: true, bad: evs(tier.Event{Kind: tier.KindAssistant, Turn: 1}), want: tier.ErrTurnOrder, seq: at(0)},
	}
}

func TestAppend_BadInput(t *testing.T) {
	for _, tc := range badAppends() {
		for _, existing := range []bool{true, false} {
			if !existing && tc.existingOnly {
				continue
			}
			name := tc.name + "/new session"
			if existing {
				name = tc.name + "/existing session"
			}
			t.Run(name, func(t *testing.T) {
				opts := tc.opts
				opts.Clock = testClock()
				db := dbtest.Open(t, opts)
				const session = "s"
				if existing {
					mustAppend(t, db, session, prefix...)
					// Another session in the same database stays untouched too.
					mustAppend(t, db, "other", prefix...)
				}
				before := state(t, db, session)
				other := state(t, db, "other")
				head := before.Info.Head
				bad := tc.bad(head)

				res, err := db.Append(session, bad...)
				var ee *tier.EventError
				if !errors.As(err, &ee) {
					t.Fatalf("Append = %v (%T), want a *tier.EventError", err, err)
				}
				if !errors.Is(err, tc.want) {
					t.Errorf("Append = %v, want errors.Is %v", err, tc.want)
				}
				if ee.Index != tc.index {
					t.Errorf("error names index %d, want %d (%v)", ee.Index, tc.index, err)
				}
				wantSeq := bad[tc.index].Seq
				if tc.seq != nil {
					wantSeq = tc.seq(head)
				}
				if ee.Seq != wantSeq {
					t.Errorf("error names seq %d, want %d (%v)", ee.Seq, wantSeq, err)
				}
				if wantSeq != 0 && !strings.Contains(err.Error(), fmt.Sprintf("seq %d", wantSeq)) {
					t.Errorf("message %q does not name seq %d", err, wantSeq)
				}
				if ee.Kind != bad[tc.index].Kind.String() {
					t.Errorf("error names kind %q, want %q", ee.Kind, bad[tc.index].Kind)
				}
				if res != (store.AppendResult{}) {
					t.Errorf("a refused append returned %+v", res)
				}

				// Nothing of the append is stored.
				after := state(t, db, session)
				if d := sameState(before, after); len(d) != 0 {
					t.Errorf("the refused append changed the session: %v", d)
				}
				if d := sameState(other, state(t, db, "other")); len(d) != 0 {
					t.Errorf("the refused append changed another session: %v", d)
				}
				if !existing {
					if after.Exists {
						t.Errorf("the session exists after its first append was refused")
					}
					ids, err := db.Sessions()
					if err != nil || len(ids) != 0 {
						t.Errorf("Sessions() = %v, %v; want none", ids, err)
					}
				}
				// The seq the refused append would have used is still free.
				res = mustAppend(t, db, session, tier.Event{Kind: tier.KindAssistant, Text: "after"})
				if res.First != head+1 || res.Last != head+1 {
					t.Errorf("the next append got seqs %d..%d, want %d", res.First, res.Last, head+1)
				}
			})
		}
	}
}

func TestAppend_BadSession(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "good", tier.Event{Kind: tier.KindUser})
	cases := map[string]string{
		"empty":          "",
		"too long":       strings.Repeat("s", store.MaxSessionBytes+1),
		"newline":        "a\nb",
		"NUL":            "a\x00",
		"DEL":            "\x7f",
		"C1 control":     "a\u0085",
		"escape":         "\x1b[31mred",
		"invalid UTF-8":  "s\xff",
		"lone surrogate": "\xed\xa0\x80",
	}
	for name, id := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := db.Append(id, tier.Event{Kind: tier.KindUser, Text: "x"})
			if !errors.Is(err, store.ErrBadSession) {
				t.Fatalf("Append(%q) = %v, want ErrBadSession", id, err)
			}
			if err := store.CheckSession(id); !errors.Is(err, store.ErrBadSession) {
				t.Errorf("CheckSession(%q) = %v", id, err)
			}
			// Even an empty append refuses a bad session id.
			if _, err := db.Append(id); !errors.Is(err, store.ErrBadSession) {
				t.Errorf("empty Append(%q) = %v", id, err)
			}
			ids, err := db.Sessions()
			if err != nil || !reflect.DeepEqual(ids, []string{"good"}) {
				t.Errorf("Sessions() = %q, %v", ids, err)
			}
		})
	}
	// The limits themselves are fine.
	for _, id := range []string{strings.Repeat("é", store.MaxSessionBytes/2), "x", "with space/and:punct ✓"} {
		if _, err := db.Append(id, tier.Event{Kind: tier.KindUser}); err != nil {
			t.Errorf("Append(%q): %v", id, err)
		}
	}
}

func TestAppend_Empty(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	res, err := db.Append("s")
	if err != nil || res != (store.AppendResult{}) {
		t.Fatalf("empty Append = %+v, %v", res, err)
	}
	if ids, _ := db.Sessions(); len(ids) != 0 {
		t.Errorf("an empty append created sessions %q", ids)
	}
	if _, err := db.Info("s"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("Info = %v, want ErrSessionNotFound", err)
	}
}

// kindsLog is a valid log with one event of every kind and none of seq, turn
// or time set, except where noted.
func kindsLog() [][]tier.Event {
	explicit := time.Date(2024, 8, 6, 8, 47, 10, 123456789, time.UTC).UnixNano()
	return [][]tier.Event{
		{
			{Kind: tier.KindSystem, Text: "you are an agent"},
			{Kind: tier.KindUser, Text: "Migrate users.email to citext. It must be reversible. ✓"},
			{Kind: tier.KindConstraint, Key: "reversible", Text: "the schema migration must be reversible"},
		},
		{
			{Kind: tier.KindToolCall, ID: "c1", Name: "bash", Text: "psql -f up.sql --dry-run"},
			{Kind: tier.KindToolResult, ID: "c1", Failed: true, Key: "approach/add-column", Text: "lock timeout"},
			{Kind: tier.KindOpen, ID: "h1", Name: "file", Text: "migrations/003_up.sql", Time: explicit},
		},
		{{Kind: tier.KindAssistant, Text: "multi\nline\ttext with \"quotes\" and NUL \x00"}},
		{
			{Kind: tier.KindUser, Text: "No — don't add a column."},
			{Kind: tier.KindRejected, Key: "approach/add-column", Text: "user rejected it"},
			{Kind: tier.KindFailed, Key: "approach/b", Text: "did not work"},
			{Kind: tier.KindSuperseded, Key: "approach/b", By: "approach/c", Text: "replaced"},
			{Kind: tier.KindClose, ID: "h1"},
			{Kind: tier.KindArtifact, Key: "migrations/003_down.sql", Text: "rollback script"},
		},
		{
			{Kind: tier.KindWithdrawn, Key: "reversible"},
			{Kind: tier.KindToolCall, ID: "c2", Name: "edit"},
			{Kind: tier.KindUser, Text: "third turn", Turn: 9}, // an explicit turn
			{Kind: tier.KindAssistant},                         // takes turn 9
			{Kind: tier.KindToolCall, ID: "c3"},                // left open
			{Kind: tier.KindToolResult, ID: "c2", Text: "ok"},
			{Kind: tier.KindOpen, ID: "p1", Name: "process"},
			{Kind: tier.KindClose, ID: "p1", Failed: true},
		},
	}
}

func TestAppend_RoundTripEveryKind(t *testing.T) {
	var clk setClock
	db := dbtest.Open(t, store.Options{Clock: clk.now})
	const session = "roundtrip"
	var want []tier.Event
	turn, seq := uint64(0), uint64(0)
	openers := map[string]uint64{}
	for call, batch := range kindsLog() {
		clock := t0.Add(time.Duration(call) * time.Second)
		clk.set(clock)
		res := mustAppend(t, db, session, batch...)
		if res.First != seq+1 || res.Last != seq+uint64(len(batch)) {
			t.Errorf("append %d: seqs %d..%d, want %d..%d", call, res.First, res.Last, seq+1, seq+uint64(len(batch)))
		}
		for _, e := range batch {
			seq++
			e.Seq = seq
			switch {
			case e.Turn != 0:
			case e.Kind == tier.KindUser:
				e.Turn = turn + 1
			default:
				e.Turn = turn
			}
			turn = e.Turn
			if e.Time == 0 {
				e.Time = clock.UnixNano()
			}
			switch {
			case e.Kind.Opens():
				openers[e.ID] = e.Seq
			case e.Kind.Resolves():
				e.Opener = openers[e.ID]
			}
			want = append(want, e)
		}
		if res.Turn != turn {
			t.Errorf("append %d: turn %d, want %d", call, res.Turn, turn)
		}
	}
	kinds := map[tier.Kind]bool{}
	for _, e := range want {
		kinds[e.Kind] = true
	}
	if len(kinds) != len(tier.Kinds()) {
		t.Fatalf("the log has %d kinds, want all %d", len(kinds), len(tier.Kinds()))
	}

	got := state(t, db, session)
	if len(got.Events) != len(want) {
		t.Fatalf("%d events stored, want %d", len(got.Events), len(want))
	}
	for i := range want {
		if got.Events[i] != want[i] {
			t.Errorf("seq %d:\n got %+v\nwant %+v", i+1, got.Events[i], want[i])
		}
	}
	if got.Info.Head != seq || got.Info.Turn != turn {
		t.Errorf("info %+v, want head %d turn %d", got.Info, seq, turn)
	}
	// The stored ledger is the replay of the stored events.
	replayed := replayLedger(t, got.Events)
	if d := got.Ledger.Diff(replayed); len(d) != 0 {
		t.Errorf("stored ledger differs from a replay: %v", d)
	}
	wantOpen := []tier.Open{{ID: "c3", Kind: tier.KindToolCall, Seq: want[len(want)-4].Seq}}
	if !reflect.DeepEqual(got.Ledger.OpenList(), wantOpen) {
		t.Errorf("open = %+v, want %+v", got.Ledger.OpenList(), wantOpen)
	}
	if len(got.Ledger.Dispositions) != 2 || len(got.Ledger.Constraints) != 0 || len(got.Ledger.Artifacts) != 1 {
		t.Errorf("ledger %+v", got.Ledger)
	}

	// ToJSON → JSON → Reader gives every event back (but the opener, which
	// is the store's).
	var buf bytes.Buffer
	for _, e := range got.Events {
		b, err := json.Marshal(e.ToJSON(session))
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	rd := tier.NewReader(&buf, "dump.jsonl", tier.Limits{})
	var back []tier.Event
	for {
		r, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Session != session {
			t.Errorf("line %d: session %q", r.Line, r.Session)
		}
		back = append(back, r.Event)
		e := got.Events[len(back)-1]
		e.Opener = 0
		if r.Event != e {
			t.Errorf("line %d:\n got %+v\nwant %+v", r.Line, r.Event, e)
		}
	}
	// Replayed into another database, the log gives the same session: every
	// event carries its time, so that database's clock is not used.
	db2 := dbtest.Open(t, store.Options{Clock: func() time.Time { return time.Unix(0, 1) }})
	mustAppend(t, db2, session, back...)
	if d := sameState(got, state(t, db2, session)); len(d) != 0 {
		t.Errorf("replayed session differs: %v", d)
	}
}

func TestAppend_OneAtATimeEqualsOneCall(t *testing.T) {
	var all []tier.Event
	for _, b := range kindsLog() {
		all = append(all, b...)
	}
	clock := func() time.Time { return t0 }
	one := dbtest.Open(t, store.Options{Clock: clock})
	many := dbtest.Open(t, store.Options{Clock: clock})
	mustAppend(t, one, "s", all...)
	for i, e := range all {
		res := mustAppend(t, many, "s", e)
		if res.First != uint64(i+1) || res.Last != res.First {
			t.Fatalf("event %d: %+v", i, res)
		}
	}
	if d := sameState(state(t, one, "s"), state(t, many, "s")); len(d) != 0 {
		t.Errorf("one append and many differ: %v", d)
	}
}

func TestAppend_ExplicitSeqsAndTurns(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s",
		tier.Event{Seq: 1, Kind: tier.KindUser},
		tier.Event{Seq: 2, Kind: tier.KindUser, Turn: 1}, // a user event may stay in the turn
		tier.Event{Kind: tier.KindAssistant, Turn: 1},
	)
	res := mustAppend(t, db, "s", tier.Event{Seq: 4, Kind: tier.KindAssistant, Turn: 5}, tier.Event{Kind: tier.KindUser})
	if res.First != 4 || res.Last != 5 || res.Turn != 6 {
		t.Errorf("res %+v, want 4..5 turn 6", res)
	}
	st := state(t, db, "s")
	var turns []uint64
	for _, e := range st.Events {
		turns = append(turns, e.Turn)
	}
	if !reflect.DeepEqual(turns, []uint64{1, 1, 1, 5, 6}) {
		t.Errorf("turns %v", turns)
	}
	// An Opener given by the caller is ignored: the store sets it.
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindToolCall, ID: "c"}, tier.Event{Kind: tier.KindToolResult, ID: "c", Opener: 1})
	st = state(t, db, "s")
	if last := st.Events[len(st.Events)-1]; last.Opener != 6 {
		t.Errorf("opener %d, want 6", last.Opener)
	}
	if e := st.Events[0]; e.Time == 0 {
		t.Errorf("no time recorded")
	}
}

// TestAppend_TurnLimit: the turn limit is the seq limit wherever a turn
// comes from — a turn of 2^53 given is stored, and the user's turn after it,
// which the store would count to 2^53+1, is refused as a seq past 2^53 is,
// naming the event's kind; nothing of that append is stored.
func TestAppend_TurnLimit(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser, Turn: tier.MaxTurn}, tier.Event{Kind: tier.KindAssistant})
	_, err := db.Append("s", tier.Event{Kind: tier.KindAssistant, Text: "still the turn"}, tier.Event{Kind: tier.KindUser, Text: "next"})
	var ee *tier.EventError
	if !errors.As(err, &ee) || !errors.Is(err, tier.ErrBadField) || ee.Index != 1 || ee.Kind != "user" {
		t.Fatalf("the user's turn past 2^53: %v, want an ErrBadField *tier.EventError of event 1, kind user", err)
	}
	if st := state(t, db, "s"); len(st.Events) != 2 {
		t.Errorf("session holds %d events, want 2: the refused append stored some", len(st.Events))
	}
}

// TestAppend_BadInputFromJSONL feeds a JSONL log through tier.Reader and one
// Append: a ledger error's Index leads back to the line.
func TestAppend_BadInputFromJSONL(t *testing.T) {
	cases := []struct {
		name string
		log  string
		want error
		line int
	}{
		{"result for a call never made", `{"kind":"user","text":"hi"}
{"kind":"tool_call","id":"c1"}

{"kind":"tool_result","id":"c2"}`, tier.ErrNotOpen, 4},
		{"close of a call", `{"kind":"tool_call","id":"c1"}
{"kind":"close","id":"c1"}`, tier.ErrWrongResource, 2},
		{"result for a handle", `{"kind":"open","id":"f","name":"file"}
{"kind":"tool_result","id":"f","ok":true}`, tier.ErrWrongResource, 2},
		{"opened twice", `{"kind":"open","id":"f"}
{"kind":"user"}
{"kind":"open","id":"f"}`, tier.ErrAlreadyOpen, 3},
		{"withdrawn, inactive", `{"kind":"constraint","key":"k"}
{"kind":"withdrawn","key":"k"}
{"kind":"withdrawn","key":"k"}`, tier.ErrNotActive, 3},
		{"seq out of order", `{"seq":1,"kind":"user"}
{"seq":3,"kind":"user"}`, tier.ErrSeqOrder, 2},
		{"turn backwards", `{"kind":"user","turn":3}
{"kind":"user","turn":2}`, tier.ErrTurnOrder, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.Open(t, store.Options{})
			rd := tier.NewReader(strings.NewReader(tc.log), "log.jsonl", tier.Limits{})
			var recs []tier.Record
			var events []tier.Event
			for {
				r, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("the reader refused a line the format allows: %v", err)
				}
				recs = append(recs, r)
				events = append(events, r.Event)
			}
			_, err := db.Append("s", events...)
			var ee *tier.EventError
			if !errors.As(err, &ee) || !errors.Is(err, tc.want) {
				t.Fatalf("Append = %v, want an EventError Is %v", err, tc.want)
			}
			if recs[ee.Index].Line != tc.line {
				t.Errorf("error at index %d = line %d, want line %d", ee.Index, recs[ee.Index].Line, tc.line)
			}
			if ids, _ := db.Sessions(); len(ids) != 0 {
				t.Errorf("sessions %q exist after a refused log", ids)
			}
		})
	}
}

func TestAppend_ReadOnly(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindUser})
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	before := state(t, ro, "s")
	for _, session := range []string{"s", "new"} {
		if _, err := ro.Append(session, tier.Event{Kind: tier.KindUser}); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("Append(%q) on a read-only DB = %v, want ErrReadOnly", session, err)
		}
	}
	if d := sameState(before, state(t, ro, "s")); len(d) != 0 {
		t.Errorf("read-only append changed the session: %v", d)
	}
	if ids, _ := ro.Sessions(); !reflect.DeepEqual(ids, []string{"s"}) {
		t.Errorf("sessions %q", ids)
	}
}

func TestAppend_AfterClose(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := db.Append("s", tier.Event{Kind: tier.KindUser}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	if err := db.View(func(*store.Snapshot) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close = %v, want ErrClosed", err)
	}
}

// An Append of more than MaxAppendEvents events is refused whole, before
// anything is written: the session is not created.
func TestAppend_TooManyEventsRefused(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	evs := make([]tier.Event, store.MaxAppendEvents+1)
	for i := range evs {
		evs[i] = tier.Event{Kind: tier.KindUser, Text: "m"}
	}
	_, err := db.Append("s", evs...)
	if !errors.Is(err, store.ErrTooManyEvents) || !strings.Contains(err.Error(), "100001 events, limit 100000") {
		t.Fatalf("Append of %d events: %v, want ErrTooManyEvents naming the count and the limit", len(evs), err)
	}
	if _, err := db.Info("s"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("Info after the refusal: %v, want ErrSessionNotFound", err)
	}
	if _, err := db.Append("s", evs[:store.MaxAppendEvents]...); err != nil {
		t.Errorf("Append of MaxAppendEvents events: %v", err)
	}
}

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

// readJSONL reads every record of a JSONL stream.
func readJSONL(t *testing.T, r io.Reader, name string) []tier.Record {
	t.Helper()
	rd := tier.NewReader(r, name, tier.Limits{})
	var out []tier.Record
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%v", err)
		}
		out = append(out, rec)
	}
}

// TestRealSessions_RoundTrip loads every real session (../shared/data/real)
// into a database, dumps it back to JSONL with ToJSON, replays the dump into
// a second database, and checks that both hold the same events and ledgers,
// that the events are the ones in the files, and that each stored ledger is
// the replay of its raw log.
func TestRealSessions_RoundTrip(t *testing.T) {
	files := dbtest.RealSessions(t)
	clk := func() time.Time { return t0 }
	first := dbtest.Open(t, store.Options{NoSync: true, Clock: clk})
	second := dbtest.Open(t, store.Options{NoSync: true, Clock: func() time.Time { return t0.Add(time.Hour) }})

	source := map[string][]tier.Record{}
	total := 0
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		recs := readJSONL(t, f, filepath.Base(name))
		f.Close()
		if len(recs) == 0 {
			t.Errorf("%s: no events", name)
			continue
		}
		session := recs[0].Session
		if session == "" {
			session = strings.TrimSuffix(filepath.Base(name), ".jsonl")
		}
		evs := make([]tier.Event, len(recs))
		for i, r := range recs {
			if r.Session != "" && r.Session != session {
				t.Fatalf("%s:%d: session %q in a file of %q", name, r.Line, r.Session, session)
			}
			evs[i] = r.Event
		}
		if _, dup := source[session]; dup {
			t.Fatalf("session %q in two files", session)
		}
		res, err := first.Append(session, evs...)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if res.First != 1 || res.Last != uint64(len(evs)) {
			t.Errorf("%s: appended at %d..%d, want 1..%d", name, res.First, res.Last, len(evs))
		}
		source[session] = recs
		total += len(evs)
	}
	if t.Failed() {
		return
	}

	states := allStates(t, first)
	if len(states) != len(source) {
		t.Fatalf("%d sessions stored, %d files", len(states), len(source))
	}
	for session, st := range states {
		recs := source[session]
		// The stored events are the file's, with seq, turn and time filled.
		turn := uint64(0)
		for i, e := range st.Events {
			in := recs[i].Event
			if in.Kind == tier.KindUser && in.Turn == 0 {
				turn++
			} else if in.Turn != 0 {
				turn = in.Turn
			}
			want := in
			want.Seq, want.Turn, want.Time, want.Opener = uint64(i+1), turn, t0.UnixNano(), e.Opener
			if e != want {
				t.Fatalf("%s seq %d:\n got %+v\nwant %+v", session, i+1, e, want)
			}
		}
		if d := st.Ledger.Diff(replayLedger(t, st.Events)); len(d) != 0 {
			t.Errorf("%s: stored ledger differs from a replay: %v", session, d)
		}

		// Dump with ToJSON, read back, replay into the second database.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, e := range st.Events {
			if err := enc.Encode(e.ToJSON(session)); err != nil {
				t.Fatal(err)
			}
		}
		back := readJSONL(t, &buf, session+".dump.jsonl")
		evs := make([]tier.Event, len(back))
		for i, r := range back {
			if r.Session != session {
				t.Fatalf("dump of %s line %d: session %q", session, r.Line, r.Session)
			}
			evs[i] = r.Event
		}
		if _, err := second.Append(session, evs...); err != nil {
			t.Fatalf("replaying the dump of %s: %v", session, err)
		}
	}
	compareStates(t, "replayed dump", allStates(t, second), states)

	// Stats agree with what was loaded.
	stats, err := first.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Total.Events != uint64(total) || len(stats.Sessions) != len(source) {
		t.Errorf("stats: %d events in %d sessions, loaded %d in %d", stats.Total.Events, len(stats.Sessions), total, len(source))
	}
}

// TestAppend_DamagedSessionDoesNotFailOthers appends concurrently to a
// session whose state record is damaged and to healthy ones: the damaged
// session's appends fail with ErrCorrupt, every other append succeeds, even
// when they share a group commit.
func TestAppend_DamagedSessionDoesNotFailOthers(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "bad", prefix...)
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	restore := damage(t, path, "bad", "state", nil, flipAt(-1))
	db2, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	const writers, appends = 16, 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	var goodFailed, badOK int
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < appends; i++ {
				session := fmt.Sprintf("good-%d", g)
				if g%4 == 0 {
					session = "bad"
				}
				_, err := db2.Append(session, tier.Event{Kind: tier.KindAssistant, Text: "x"})
				mu.Lock()
				switch {
				case session == "bad" && err == nil:
					badOK++
				case session == "bad" && !errors.Is(err, store.ErrCorrupt):
					t.Errorf("append to the damaged session: %v, want ErrCorrupt", err)
				case session != "bad" && err != nil:
					goodFailed++
					if goodFailed == 1 {
						t.Errorf("append to a healthy session failed: %v", err)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if goodFailed > 0 || badOK > 0 {
		t.Errorf("%d appends to healthy sessions failed, %d to the damaged one succeeded", goodFailed, badOK)
	}
	for g := 0; g < writers; g++ {
		if g%4 == 0 {
			continue
		}
		if info, err := db2.Info(fmt.Sprintf("good-%d", g)); err != nil || info.Head != appends {
			t.Errorf("good-%d: %+v %v", g, info, err)
		}
	}
	if err := db2.Close(); err != nil {
		t.Fatal(err)
	}
	restore()
}
