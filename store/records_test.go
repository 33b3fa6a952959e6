package store_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// The texts of the ledger — a disposition's reason, a constraint's or an
// artifact's text — are kept only in the event that made the entry: the
// record names that event by seq.

// policyText is a constraint of kilobytes, as the policy a tau-bench
// session starts with.
var policyText = strings.Repeat("Before any action that changes a booking, list it and ask. ", 90)

// ledgerEvents make one entry of every class that carries a text.
func ledgerEvents() []tier.Event {
	return []tier.Event{
		{Kind: tier.KindConstraint, Key: "policy", Text: policyText},                                 // 1
		{Kind: tier.KindToolCall, ID: "c1", Name: "bash"},                                            // 2
		{Kind: tier.KindToolResult, ID: "c1", Failed: true, Key: "approach/a", Text: "exit 1: boom"}, // 3
		{Kind: tier.KindRejected, Key: "approach/b", Text: "too slow"},                               // 4
		{Kind: tier.KindArtifact, Key: "main.go", Text: "package main"},                              // 5
		{Kind: tier.KindSuperseded, Key: "approach/c", By: "approach/d", Text: "replaced"},           // 6
		{Kind: tier.KindUser, Text: "go on"},                                                         // 7
	}
}

// ledgerIn reads session's ledger in one read transaction.
func ledgerIn(db *store.DB, session string) (l *tier.Ledger, err error) {
	err = db.View(func(s *store.Snapshot) error {
		l, err = s.Ledger(session)
		return err
	})
	return l, err
}

// TestLedger_TextsLiveInTheirEvents: the ledger's records hold no text and
// name their event; the ledger read back is a replay of the raw log, texts
// included, and the resumed context carries them.
func TestLedger_TextsLiveInTheirEvents(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{NoSync: true, Clock: testClock()})
	mustAppend(t, db, "s", ledgerEvents()...)
	l, err := ledgerIn(db, "s")
	if err != nil {
		t.Fatal(err)
	}
	if d := l.Diff(replayLedger(t, state(t, db, "s").Events)); len(d) != 0 {
		t.Errorf("the ledger differs from a replay of the raw log: %v", d)
	}
	if l.Constraints["policy"].Text != policyText || l.Dispositions["approach/a"].Reason != "exit 1: boom" ||
		l.Dispositions["approach/c"].By != "approach/d" || l.Artifacts["main.go"].Text != "package main" {
		t.Errorf("ledger: %+v", l)
	}
	ctx, err := db.Resume("s", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ctx.Text()), policyText[:120]) {
		t.Errorf("the resumed context lacks the policy:\n%s", ctx.Text())
	}
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	var c tier.Constraint
	if err := store.DecodeLedgerRecord(valueOf(t, path, "s", "constr", []byte("policy")), &c); err != nil {
		t.Fatal(err)
	}
	var d tier.Disposition
	if err := store.DecodeLedgerRecord(valueOf(t, path, "s", "disp", []byte("approach/a")), &d); err != nil {
		t.Fatal(err)
	}
	var a tier.Artifact
	if err := store.DecodeLedgerRecord(valueOf(t, path, "s", "art", []byte("main.go")), &a); err != nil {
		t.Fatal(err)
	}
	if c.Seq != 1 || d.Seq != 3 || a.Seq != 5 {
		t.Errorf("records name events %d, %d, %d; want 1, 3, 5", c.Seq, d.Seq, a.Seq)
	}
	if c.Text != "" || d.Reason != "" || a.Text != "" {
		t.Errorf("records hold texts (constraint of %d bytes, reason %q, artifact %q), want none", len(c.Text), d.Reason, a.Text)
	}
}

// TestLedger_RecordDamage: a ledger record that names the wrong event, no
// event, or holds a text is damage: the ledger read fails with ErrCorrupt
// naming the table and key, and Verify reports it.
func TestLedger_RecordDamage(t *testing.T) {
	cases := []struct {
		name, table, key string
		rec              any
	}{
		{"constraint naming a tool call", "constr", "policy", &tier.Constraint{Key: "policy", Seq: 2}},
		{"constraint naming another key's constraint", "constr", "other", &tier.Constraint{Key: "other", Seq: 1}},
		{"constraint naming no event", "constr", "policy", &tier.Constraint{Key: "policy"}},
		{"constraint naming an event past the head", "constr", "policy", &tier.Constraint{Key: "policy", Seq: 99}},
		{"constraint holding its text", "constr", "policy", &tier.Constraint{Key: "policy", Seq: 1, Text: "forged"}},
		{"rejection naming the superseding event", "disp", "approach/b", &tier.Disposition{Key: "approach/b", State: tier.KindRejected, Seq: 6}},
		{"supersession with another successor", "disp", "approach/c", &tier.Disposition{Key: "approach/c", State: tier.KindSuperseded, By: "approach/x", Seq: 6}},
		{"failure naming a rejection", "disp", "approach/a", &tier.Disposition{Key: "approach/a", State: tier.KindFailed, Seq: 4}},
		{"artifact naming the constraint", "art", "main.go", &tier.Artifact{Key: "main.go", Seq: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.OpenUnverified(t, store.Options{NoSync: true, Clock: testClock()})
			mustAppend(t, db, "s", ledgerEvents()...)
			raw, err := store.EncodeLedgerRecord(tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.PutRecord(db, "s", tc.table, []byte(tc.key), raw); err != nil {
				t.Fatal(err)
			}
			_, err = ledgerIn(db, "s")
			var ce *store.CorruptError
			if !errors.As(err, &ce) || ce.Session != "s" || ce.Bucket != tc.table || ce.Key != strconv.Quote(tc.key) {
				t.Fatalf("ledger read: %v, want a CorruptError naming %s key %q", err, tc.table, tc.key)
			}
			rep, err := db.Verify(store.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range rep.Problems {
				found = found || p.Session == "s" && strings.Contains(p.What, strconv.Quote(tc.key))
			}
			if !found {
				t.Errorf("Verify does not name %s key %q: %v", tc.table, tc.key, rep.Problems)
			}
		})
	}
}

// TestLedger_AppendOverADamagedRecordIsRefused: an append whose events
// read a ledger record — a tool_result that succeeds on a key takes the
// failure its disposition records as the event's prior failure — refuses
// a record that names the wrong event, or an event past the head, with
// ErrCorrupt naming the table and key, and stores nothing: the raw log
// never takes a seq from a damaged record.
func TestLedger_AppendOverADamagedRecordIsRefused(t *testing.T) {
	cases := []struct {
		name string
		rec  tier.Disposition
	}{
		{"failure naming a rejection", tier.Disposition{Key: "approach/a", State: tier.KindFailed, Seq: 4}},
		{"failure naming an event past the head", tier.Disposition{Key: "approach/a", State: tier.KindFailed, Seq: 99}},
		{"rejection naming the failure", tier.Disposition{Key: "approach/a", State: tier.KindRejected, Seq: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := dbtest.OpenUnverified(t, store.Options{NoSync: true, Clock: testClock()})
			mustAppend(t, db, "s", ledgerEvents()...)
			raw, err := store.EncodeLedgerRecord(&tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.PutRecord(db, "s", "disp", []byte(tc.rec.Key), raw); err != nil {
				t.Fatal(err)
			}
			res, err := db.Append("s",
				tier.Event{Kind: tier.KindToolCall, ID: "c2", Name: "bash"},
				tier.Event{Kind: tier.KindToolResult, ID: "c2", Key: "approach/a", Text: "ok"})
			var ce *store.CorruptError
			if !errors.As(err, &ce) || ce.Session != "s" || ce.Bucket != "disp" || ce.Key != strconv.Quote(tc.rec.Key) {
				t.Fatalf("append: %+v, %v; want a CorruptError naming disp key %q", res, err, tc.rec.Key)
			}
			var info store.Info
			if err := db.View(func(s *store.Snapshot) (err error) { info, err = s.Info("s"); return err }); err != nil {
				t.Fatal(err)
			}
			if info.Head != 7 {
				t.Errorf("head %d after the refused append, want 7", info.Head)
			}
		})
	}
}

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
