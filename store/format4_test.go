package store_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Format 4 (schema.go): events appended a few at a time go to the journal
// "j" (<g> → <n><seq> eventRec), the session's state and the key of its
// first journal entry to the hot bucket "h", and a commit that finds the
// journal at Options.JournalEvents folds it into the events bucket "e".

// open4 opens (creating it if needed) the format 4 file at path, NoSync,
// with the given journal size.
func open4(t *testing.T, path string, journal int) *store.DB {
	t.Helper()
	db, err := store.Open(path, store.Options{Format: 4, Create: true, NoSync: true, JournalEvents: journal})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func mustClose(t *testing.T, db *store.DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// gen4 is the seq-th event of session: a user message, a tool call, its
// result, an assistant message, again and again — every event with a text
// of its own.
func gen4(session string, seq uint64) tier.Event {
	text := fmt.Sprintf("%s/%d", session, seq)
	switch seq % 4 {
	case 1:
		return tier.Event{Kind: tier.KindUser, Text: text}
	case 2:
		return tier.Event{Kind: tier.KindToolCall, ID: fmt.Sprintf("call-%d", seq), Name: "bash", Text: text}
	case 3:
		return tier.Event{Kind: tier.KindToolResult, ID: fmt.Sprintf("call-%d", seq-1), Text: text}
	}
	return tier.Event{Kind: tier.KindAssistant, Text: text}
}

// model4 is what each session was given, in order, with seqs.
type model4 map[string][]tier.Event

// add appends evs to session and records them.
func (m model4) add(t *testing.T, db *store.DB, session string, evs ...tier.Event) {
	t.Helper()
	res := mustAppend(t, db, session, evs...)
	if want := uint64(len(m[session]) + 1); res.First != want {
		t.Fatalf("append to %q: first seq %d, want %d", session, res.First, want)
	}
	for i, e := range evs {
		e.Seq = res.First + uint64(i)
		m[session] = append(m[session], e)
	}
}

// gen appends session's next n events of gen4, in one append.
func (m model4) gen(t *testing.T, db *store.DB, session string, n int) {
	t.Helper()
	evs := make([]tier.Event, n)
	for i := range evs {
		evs[i] = gen4(session, uint64(len(m[session])+1+i))
	}
	m.add(t, db, session, evs...)
}

// sameEvents says how got differs from want (seq, kind, id, text), or "".
func sameEvents(got, want []tier.Event) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Kind != w.Kind || g.ID != w.ID || g.Text != w.Text {
			return fmt.Sprintf("event %d is seq %d %s %q %q, want seq %d %s %q %q", i, g.Seq, g.Kind, g.ID, g.Text, w.Seq, w.Kind, w.ID, w.Text)
		}
	}
	return ""
}

// checkReads4 reads, in one snapshot, every session of m over every range
// from..to around its events (0 ≤ from ≤ head+1, from-1 ≤ to ≤ head+2;
// past 40 events, from and to go by steps, and one by one near the ends):
// each read gives exactly the events appended in the range, in order. It
// also checks that Resume at Latest gives the events after its boundary.
func checkReads4(t *testing.T, db *store.DB, m model4) {
	t.Helper()
	err := db.View(func(s *store.Snapshot) error {
		for _, id := range slices.Sorted(maps.Keys(m)) {
			want := m[id]
			head := uint64(len(want))
			info, err := s.Info(id)
			if err != nil {
				return err
			}
			if info.Head != head {
				t.Errorf("session %q: head %d, want %d", id, info.Head, head)
				continue
			}
			// Every seq of a short session; of a long one, every few
			// and those near its ends.
			step := max(1, head/20)
			near := func(i uint64) bool { return i%step == 0 || i <= 2 || i+2 >= head }
		ranges:
			for from := uint64(0); from <= head+1; from++ {
				for to := max(from, 1) - 1; to <= head+2 && near(from); to++ {
					if !near(to) {
						continue
					}
					var got []tier.Event
					if err := s.Events(id, from, to, func(e tier.Event) error {
						got = append(got, e)
						return nil
					}); err != nil {
						t.Errorf("session %q: Events(%d, %d): %v", id, from, to, err)
						break ranges
					}
					lo, hi := max(from, 1), min(to, head)
					var w []tier.Event
					if lo <= hi {
						w = want[lo-1 : hi]
					}
					if d := sameEvents(got, w); d != "" {
						t.Errorf("session %q: Events(%d, %d): %s", id, from, to, d)
						break ranges
					}
				}
			}
			ctx, err := s.Resume(id, store.Latest)
			if err != nil {
				t.Errorf("session %q: Resume: %v", id, err)
				continue
			}
			if ctx.Head != head || ctx.Boundary > head {
				t.Errorf("session %q: Resume head %d boundary %d, want head %d", id, ctx.Head, ctx.Boundary, head)
				continue
			}
			if d := sameEvents(ctx.Events, want[ctx.Boundary:]); d != "" {
				t.Errorf("session %q: Resume's events after %d: %s", id, ctx.Boundary, d)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// entry4 is one journal entry as the file holds it.
type entry4 struct {
	g   uint64
	n   uint32
	seq uint64
	rec []byte
}

// layout4 is format 4's buckets as the file holds them.
type layout4 struct {
	journal  []entry4            // in key order
	bad      int                 // journal keys not 8 bytes, or entries of at most 12
	jseq     uint64              // the journal's sequence
	events   map[uint32][]uint64 // e: each session number's event seqs, in key order
	eventRec map[[2]uint64][]byte
	ids      map[uint32]string // e: <n> 0xFF 0x00
	hot      []string          // h's keys
	first    map[uint32]uint64 // h: <n> 0x01
}

// readLayout4 reads format 4's buckets of the closed file at path through
// bbolt.
func readLayout4(t *testing.T, path string) layout4 {
	t.Helper()
	l := layout4{events: map[uint32][]uint64{}, eventRec: map[[2]uint64][]byte{}, ids: map[uint32]string{}, first: map[uint32]uint64{}}
	viewBolt(t, path, func(tx *bolt.Tx) error {
		j, h, e := tx.Bucket([]byte("j")), tx.Bucket([]byte("h")), tx.Bucket([]byte("e"))
		if j == nil || h == nil || e == nil {
			t.Fatalf("a format 4 file without j, h or e")
		}
		l.jseq = j.Sequence()
		_ = j.ForEach(func(k, v []byte) error {
			if len(k) != 8 || len(v) <= 12 {
				l.bad++ // damage a test made
				return nil
			}
			l.journal = append(l.journal, entry4{binary.BigEndian.Uint64(k), binary.BigEndian.Uint32(v), binary.BigEndian.Uint64(v[4:]), bytes.Clone(v[12:])})
			return nil
		})
		_ = e.ForEach(func(k, v []byte) error {
			n := binary.BigEndian.Uint32(k)
			switch {
			case len(k) == 13 && k[4] == 0xFE:
				seq := binary.BigEndian.Uint64(k[5:])
				l.events[n] = append(l.events[n], seq)
				l.eventRec[[2]uint64{uint64(n), seq}] = bytes.Clone(v)
			case len(k) == 6 && k[4] == 0xFF && k[5] == 0:
				l.ids[n] = string(v)
			default:
				t.Errorf("events bucket: key %x", k)
			}
			return nil
		})
		l.hot = keysOf(h)
		_ = h.ForEach(func(k, v []byte) error {
			if len(k) == 5 && k[4] == 0x01 {
				if len(v) != 8 {
					l.bad++ // damage a test made
					return nil
				}
				l.first[binary.BigEndian.Uint32(k)] = binary.BigEndian.Uint64(v)
			}
			return nil
		})
		return nil
	})
	return l
}

// seqRange returns lo, lo+1, ..., hi.
func seqRange(lo, hi uint64) []uint64 {
	var out []uint64
	for s := lo; s <= hi; s++ {
		out = append(out, s)
	}
	return out
}

// journalOf lists session number n's entries of l's journal as g → seq.
func (l layout4) journalOf(n uint32) (gs, seqs []uint64) {
	for _, en := range l.journal {
		if en.n == n {
			gs, seqs = append(gs, en.g), append(seqs, en.seq)
		}
	}
	return gs, seqs
}

// TestFormat4_Layout appends to three sessions in turn, one event at a
// time, with a journal of 10 events, and reads the file through bbolt:
// nine appends are nine journal entries 1..9 (each naming its session's
// number and seq) and leave "e" with the sessions' ids only, "h" with each
// session's state, the key of its first entry and its open call; the tenth
// append folds the journal — every event at its key in "e" with the bytes
// the journal held, the journal empty with its sequence restarted, the
// pointers gone. After it, an append of 8 events or of one 5 KiB event to
// a session with nothing in the journal goes straight to "e"; one of fewer
// small events goes to the journal; and a session with events in the
// journal appends there whatever the size, the journal's keys going on
// from 1.
func TestFormat4_Layout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db := open4(t, path, 10)
	m := model4{}
	m.add(t, db, "a", tier.Event{Kind: tier.KindToolCall, ID: "call-a", Name: "bash"}) // left open
	m.add(t, db, "b", tier.Event{Kind: tier.KindUser, Text: "b/1"})
	m.add(t, db, "c", tier.Event{Kind: tier.KindUser, Text: "c/1"})
	for i := 2; i <= 3; i++ {
		for _, id := range []string{"a", "b", "c"} {
			m.add(t, db, id, tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprintf("%s/%d", id, i)})
		}
	}
	mustClose(t, db)

	l := readLayout4(t, path)
	if l.jseq != 9 || len(l.journal) != 9 {
		t.Fatalf("journal of %d entries, sequence %d; want 9, 9", len(l.journal), l.jseq)
	}
	recs := map[[2]uint64][]byte{}
	for i, en := range l.journal {
		if want := (entry4{g: uint64(i + 1), n: uint32(i % 3), seq: uint64(i/3 + 1)}); en.g != want.g || en.n != want.n || en.seq != want.seq {
			t.Errorf("journal entry %d: key %d, session %d seq %d; want key %d, session %d seq %d", i, en.g, en.n, en.seq, want.g, want.n, want.seq)
		}
		recs[[2]uint64{uint64(en.n), en.seq}] = en.rec
	}
	if len(l.events) != 0 {
		t.Errorf("events in e before a fold: %v", l.events)
	}
	if want := map[uint32]string{0: "a", 1: "b", 2: "c"}; !maps.Equal(l.ids, want) {
		t.Errorf("e's session ids %v, want %v", l.ids, want)
	}
	var hot []string
	for n := uint32(0); n < 3; n++ {
		hot = append(hot, string(key3(n, []byte{0x00})), string(key3(n, []byte{0x01})))
		if n == 0 {
			hot = append(hot, string(key3(n, []byte("ocall-a"))))
		}
	}
	if !slices.Equal(l.hot, hot) {
		t.Errorf("h's keys\n%x\nwant\n%x", l.hot, hot)
	}
	if want := map[uint32]uint64{0: 1, 1: 2, 2: 3}; !maps.Equal(l.first, want) {
		t.Errorf("h's first journal keys %v, want %v", l.first, want)
	}

	// The tenth append folds.
	db = open4(t, path, 10)
	m.add(t, db, "a", tier.Event{Kind: tier.KindAssistant, Text: "a/4"})
	mustClose(t, db)
	l = readLayout4(t, path)
	if len(l.journal) != 0 || l.jseq != 0 {
		t.Errorf("after the fold, a journal of %d entries, sequence %d", len(l.journal), l.jseq)
	}
	for n, head := range map[uint32]uint64{0: 4, 1: 3, 2: 3} {
		if got := l.events[n]; !slices.Equal(got, seqRange(1, head)) {
			t.Errorf("after the fold, session %d's events in e are %v, want 1..%d", n, got, head)
		}
	}
	for k, rec := range recs {
		if !bytes.Equal(l.eventRec[k], rec) {
			t.Errorf("session %d seq %d: e holds other bytes than the journal did", k[0], k[1])
		}
	}
	hot = []string{string(key3(0, []byte{0})), string(key3(0, []byte("ocall-a"))), string(key3(1, []byte{0})), string(key3(2, []byte{0}))}
	if !slices.Equal(l.hot, hot) {
		t.Errorf("after the fold, h's keys\n%x\nwant\n%x", l.hot, hot)
	}

	// Where appends go after the fold (a journal of 20: no fold).
	db = open4(t, path, 20)
	m.gen(t, db, "a", 8) // nothing in the journal: e
	m.add(t, db, "b", tier.Event{Kind: tier.KindUser, Text: "b/4"})
	m.gen(t, db, "b", 8) // b is in the journal: j
	m.add(t, db, "c", tier.Event{Kind: tier.KindUser, Text: strings.Repeat("x", 5<<10)})
	m.gen(t, db, "c", 7) // few and small: j
	m.add(t, db, "b", tier.Event{Kind: tier.KindUser, Text: strings.Repeat("y", 5<<10)})
	checkReads4(t, db, m)
	mustClose(t, db)
	l = readLayout4(t, path)
	for n, head := range map[uint32]uint64{0: 12, 1: 3, 2: 4} {
		if got := l.events[n]; !slices.Equal(got, seqRange(1, head)) {
			t.Errorf("session %d's events in e are %v, want 1..%d", n, got, head)
		}
	}
	if gs, seqs := l.journalOf(1); !slices.Equal(gs, append(seqRange(1, 9), 17)) || !slices.Equal(seqs, seqRange(4, 13)) {
		t.Errorf("session b's journal entries %v seqs %v; want keys 1..9 and 17, seqs 4..13", gs, seqs)
	}
	if gs, seqs := l.journalOf(2); !slices.Equal(gs, seqRange(10, 16)) || !slices.Equal(seqs, seqRange(5, 11)) {
		t.Errorf("session c's journal entries %v seqs %v; want keys 10..16, seqs 5..11", gs, seqs)
	}
	if gs, _ := l.journalOf(0); len(gs) != 0 || l.jseq != 17 {
		t.Errorf("session a has journal entries %v; journal sequence %d, want 17", gs, l.jseq)
	}
	if want := map[uint32]uint64{1: 1, 2: 10}; !maps.Equal(l.first, want) {
		t.Errorf("h's first journal keys %v, want %v", l.first, want)
	}
	if ps := verifyPath(t, path); len(ps) != 0 {
		t.Errorf("Verify: %v", ps)
	}
}

// TestFormat4_ReadsMerge reads every range of every session (Snapshot.Events,
// and Resume's tail) while their events lie in e, in j, and across the two:
// before a fold, after it, and after a reopen with entries in the journal.
// The fold that the reopened handle makes goes through the journal entries
// of sessions it has not read (whose pages of e it has not walked): every
// event reads back all the same, and the file verifies.
func TestFormat4_ReadsMerge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db := open4(t, path, 16)
	m := model4{}
	m.gen(t, db, "a", 8) // e: a 1..8
	checkReads4(t, db, m)
	m.gen(t, db, "b", 3) // j 1..3
	m.gen(t, db, "a", 2) // j 4..5: a 9..10
	checkReads4(t, db, m)
	m.gen(t, db, "c", 1) // j 6
	m.gen(t, db, "b", 1) // j 7
	m.gen(t, db, "a", 1) // j 8: a 11
	m.gen(t, db, "a", 2) // j 9..10: a 12..13
	checkReads4(t, db, m)
	m.gen(t, db, "b", 8) // j 11..18: folds
	checkReads4(t, db, m)
	m.gen(t, db, "a", 1) // j 1: a 14
	m.gen(t, db, "c", 9) // e: c 2..10
	m.gen(t, db, "b", 1) // j 2: b 13
	checkReads4(t, db, m)
	mustClose(t, db)
	l := readLayout4(t, path)
	if l.jseq != 2 || !slices.Equal(l.events[0], seqRange(1, 13)) || !slices.Equal(l.events[2], seqRange(1, 10)) {
		t.Fatalf("journal sequence %d, a's events in e %v, c's %v; want 2, 1..13, 1..10", l.jseq, l.events[0], l.events[2])
	}

	// Reopened, with a and b in the journal: c appends until the journal
	// folds, before anything reads a or b.
	db = open4(t, path, 16)
	m.gen(t, db, "c", 1)  // j 3
	m.gen(t, db, "c", 13) // j 4..16: folds a, b and c
	checkReads4(t, db, m)
	m.gen(t, db, "b", 2) // j 1..2
	m.gen(t, db, "a", 3) // j 3..5
	mustClose(t, db)
	l = readLayout4(t, path)
	if l.jseq != 5 || len(l.events[2]) != 24 {
		t.Fatalf("after the reopened handle's fold: journal sequence %d, c's events in e %d; want 5, 24", l.jseq, len(l.events[2]))
	}

	// Reopened read-only, and read-write, with entries in the journal.
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkReads4(t, ro, m)
	mustClose(t, ro)
	db = open4(t, path, 16)
	checkReads4(t, db, m)
	m.gen(t, db, "d", 4) // a new session, in the journal
	checkReads4(t, db, m)
	mustVerify(t, db)
	mustClose(t, db)
	if ps := verifyPath(t, path); len(ps) != 0 {
		t.Errorf("Verify: %v", ps)
	}
}

// TestFormat4_CompactionAcrossFold plans a span whose events are in the
// journal, folds the journal before the commit (the span's bytes move to
// e), and commits: the span hash is the same, the commit is accepted.
// Then more events and compactions with events on both sides, and Resume
// serves each session's newest marker with the raw events after it —
// also after a reopen.
func TestFormat4_CompactionAcrossFold(t *testing.T) {
	db := dbtest.Open(t, store.Options{Format: 4, NoSync: true, JournalEvents: 12})
	m := model4{}
	for range 4 {
		m.gen(t, db, "s", 1) // j 1..4
	}
	p, err := db.PlanSpan("s", store.SpanPolicy{Events: 4}, 1000)
	if err != nil || p.From != 1 || p.To != 4 {
		t.Fatalf("PlanSpan: %v %v", p, err)
	}
	for range 8 {
		m.gen(t, db, "t", 1) // j 5..12: folds
	}
	if _, err := db.Commit(p, store.Summary{Narrative: "n", Claims: p.Required.Claims(), Summarizer: "t"}); err != nil {
		t.Fatalf("Commit of a span folded since its plan: %v", err)
	}
	m.gen(t, db, "s", 9) // e: s 5..13
	m.gen(t, db, "s", 2) // j 1..2: s 14..15
	m.gen(t, db, "t", 3) // j 3..5
	compactHonestly(t, db, "s", 2)
	compactHonestly(t, db, "t", 2)
	for _, id := range []string{"s", "t"} {
		ctx, err := db.Resume(id, store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if ctx.Source != checkpoint.SourceMarker || ctx.Boundary == 0 {
			t.Errorf("session %q resumes from %v at %d, want a marker", id, ctx.Source, ctx.Boundary)
		}
	}
	info, err := db.Info("s")
	if err != nil || info.CompactedTo != 12 {
		t.Errorf("s compacted to %d (%v), want 12", info.CompactedTo, err)
	}
	checkReads4(t, db, m)
	mustVerify(t, db)
	path := db.Path()
	mustClose(t, db)
	db, err = store.Open(path, store.Options{NoSync: true, JournalEvents: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m.gen(t, db, "s", 1)
	compactHonestly(t, db, "s", 2)
	checkReads4(t, db, m)
}

// TestFormat4_ConcurrentAppends: many sessions appending at once, in group
// commits, with a small journal that folds in the middle of them: every
// event reads back in order, and the file verifies (dbtest).
func TestFormat4_ConcurrentAppends(t *testing.T) {
	db := dbtest.Open(t, store.Options{Format: 4, NoSync: true, JournalEvents: 7})
	m := model4{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 6 {
		id := fmt.Sprintf("w%d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []tier.Event
			for i := 0; i < 14; i++ {
				n := 1 + i%3
				if i%7 == 6 {
					n = 9 // straight to e, or to j when it has entries
				}
				evs := make([]tier.Event, n)
				for k := range evs {
					evs[k] = gen4(id, uint64(len(mine)+1+k))
				}
				res, err := db.Append(id, evs...)
				if err != nil {
					t.Errorf("Append(%q): %v", id, err)
					return
				}
				for k, e := range evs {
					e.Seq = res.First + uint64(k)
					mine = append(mine, e)
				}
			}
			mu.Lock()
			m[id] = mine
			mu.Unlock()
		}()
	}
	wg.Wait()
	checkReads4(t, db, m)
}

// fixture4 makes a format 4 file, closed: session a (number 0) with events
// 1..8 in e and 9, 10 in the journal (keys 2 and 4), b (1) with 1..3 in
// the journal (keys 1, 3, 5), c (2) with 1..8 in e. The journal's sequence
// is 5; no fold (a journal of 100).
func fixture4(t *testing.T) (string, model4) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "strata.db")
	db := open4(t, path, 100)
	m := model4{}
	m.gen(t, db, "a", 8)
	m.gen(t, db, "b", 1)
	m.gen(t, db, "a", 1)
	m.gen(t, db, "b", 1)
	m.gen(t, db, "a", 1)
	m.gen(t, db, "b", 1)
	m.gen(t, db, "c", 8)
	mustClose(t, db)
	l := readLayout4(t, path)
	if l.jseq != 5 || !maps.Equal(l.first, map[uint32]uint64{0: 2, 1: 1}) || len(l.events[0]) != 8 || len(l.events[2]) != 8 {
		t.Fatalf("fixture: journal sequence %d, first keys %v, events in e %v", l.jseq, l.first, l.events)
	}
	return path, m
}

// readOrCorrupt reads session id of m whole: it must give exactly what was
// appended, or fail with ErrCorrupt — and no panic (which guard would
// turn into ErrCorrupt "bbolt panicked").
func readOrCorrupt(t *testing.T, db *store.DB, m model4, id string) error {
	t.Helper()
	var got []tier.Event
	err := db.View(func(s *store.Snapshot) error {
		return s.Events(id, 1, uint64(len(m[id])), func(e tier.Event) error {
			got = append(got, e)
			return nil
		})
	})
	switch {
	case err == nil:
		if d := sameEvents(got, m[id]); d != "" {
			t.Errorf("session %q reads back wrong: %s", id, d)
		}
	case !errors.Is(err, store.ErrCorrupt) || strings.Contains(err.Error(), "panicked"):
		t.Errorf("session %q: %v, want its events or ErrCorrupt", id, err)
	}
	return err
}

// TestFormat4_VerifyFindsJournalDamage damages the hot bucket and the
// journal through bbolt, one fresh file per case: Verify reports each with
// the problem's own words (and nothing panics). The damaged file then
// takes an append to every session, each with a journal of 4 so that every
// commit tries to fold; reads give the appended events or ErrCorrupt. An
// append to the journal fails alone with ErrCorrupt where what it must
// write is damaged (a journal key that is not 8 bytes; its session's
// pointer: TestFormat4_DamagedPointerFailsItsAppendAlone); a sequence
// below the last key is raised to it. A fold goes through only when every
// entry is in its session's run (canFold): then the journal's damage and
// the pointers are gone with it; otherwise it folds nothing and the damage
// stays for Verify.
func TestFormat4_VerifyFindsJournalDamage(t *testing.T) {
	h := func(fn func(h *bolt.Bucket) error) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error { return fn(tx.Bucket([]byte("h"))) }
	}
	// putJ puts v at journal key g, raising the sequence to g.
	putJ := func(g uint64, v func(tx *bolt.Tx) []byte) func(*bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			j := tx.Bucket([]byte("j"))
			if err := j.SetSequence(g); err != nil {
				return err
			}
			return j.Put(seqKey(g), v(tx))
		}
	}
	entry := func(n uint32, seq uint64, rec func(tx *bolt.Tx) []byte) func(tx *bolt.Tx) []byte {
		return func(tx *bolt.Tx) []byte {
			return append(binary.BigEndian.AppendUint64(key3(n), seq), rec(tx)...)
		}
	}
	recA5 := func(tx *bolt.Tx) []byte {
		return bytes.Clone(tx.Bucket([]byte("e")).Get(key3(0, []byte{0xFE}, seqKey(5))))
	}
	cases := []struct {
		name    string
		edit    func(*bolt.Tx) error
		want    string
		session string // whose problem it is ("": the file's)
		stuck   bool   // the journal cannot fold: the damage stays
		// refuses: the appends to the journal of these sessions fail
		// with ErrCorrupt naming refusal ("*": every session's).
		refuses, refusal string
	}{
		// A pointer that is not its session's first entry: reads of the
		// session miss events, and the next fold — its entries are in
		// their run — moves them to e and drops the pointer.
		{"a pointer deleted", h(func(h *bolt.Bucket) error { return h.Delete(key3(0, []byte{1})) }),
			`hot bucket: session "a"'s first journal entry is 2, its record says `, "", false, "", ""},
		{"a pointer to a later entry", h(func(h *bolt.Bucket) error { return h.Put(key3(0, []byte{1}), seqKey(4)) }),
			`hot bucket: session "a"'s first journal entry is 2, its record says 0000000000000004`, "", false, "", ""},
		{"a pointer to another session's entry", h(func(h *bolt.Bucket) error { return h.Put(key3(1, []byte{1}), seqKey(2)) }),
			`hot bucket: session "b"'s first journal entry is 1, its record says 0000000000000002`, "", false, "", ""},
		{"a pointer of a session with no entries", h(func(h *bolt.Bucket) error { return h.Put(key3(2, []byte{1}), seqKey(3)) }),
			`hot bucket: session "c" records journal entry 0000000000000003, and has none`, "", false, "", ""},
		// a's append folds the journal before b's comes: b appends after
		// the fold dropped its damaged pointer.
		{"a pointer of 4 bytes", h(func(h *bolt.Bucket) error { return h.Put(key3(1, []byte{1}), []byte{0, 0, 0, 1}) }),
			`hot bucket: key 0000000101 holds a journal key of 4 bytes`, "", false, "", ""},
		// The next append raises the sequence to the last key: nothing
		// is written over, and the fold puts every entry in its place.
		{"a journal key past the sequence", func(tx *bolt.Tx) error {
			j := tx.Bucket([]byte("j"))
			v := bytes.Clone(j.Get(seqKey(5)))
			if err := j.Delete(seqKey(5)); err != nil {
				return err
			}
			return j.Put(seqKey(9), v)
		}, "journal: key 9 is past the journal's sequence 5", "", false, "", ""},
		{"a short journal entry past the sequence", func(tx *bolt.Tx) error {
			// Both checks apply, and the short value is not read as an entry.
			return tx.Bucket([]byte("j")).Put(seqKey(9), []byte{1, 2})
		}, "journal: key 9 is past the journal's sequence 5", "", true, "", ""},
		{"a journal key 0", func(tx *bolt.Tx) error {
			j := tx.Bucket([]byte("j"))
			v := bytes.Clone(j.Get(seqKey(1)))
			if err := j.Delete(seqKey(1)); err != nil {
				return err
			}
			if err := j.Put(seqKey(0), v); err != nil {
				return err
			}
			return tx.Bucket([]byte("h")).Put(key3(1, []byte{1}), seqKey(0))
		}, "journal: key 0 is past the journal's sequence 5", "", false, "", ""},
		{"a journal entry of an unknown number", putJ(6, entry(7, 1, recA5)),
			"journal: entry 6 of session number 7, which no session has", "", true, "", ""},
		{"a short journal entry", putJ(6, func(*bolt.Tx) []byte { return []byte{0, 0, 0, 1, 9} }),
			"journal: entry 6 holds 5 bytes", "", true, "", ""},
		{"a journal key of 4 bytes", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("j")).Put([]byte{0, 0, 0, 6}, entry(1, 4, recA5)(tx))
		}, "journal: key 00000006 is not 8 bytes", "", true, "*", "last key of 4 bytes"},
		// Not a's next seq: the fold would write it over a's event 5.
		{"a journal entry repeating a seq of e", putJ(6, entry(0, 5, recA5)),
			"where seq 11 was expected", "a", true, "", ""},
		{"an unexpected key in h", h(func(h *bolt.Bucket) error { return h.Put(key3(1, []byte{0x02}), []byte("x")) }),
			"hot bucket: key 0000000102 is neither a state, a journal key nor an open call", "", false, "", ""},
		{"a key in h of an unknown number", h(func(h *bolt.Bucket) error { return h.Put(key3(9, []byte{0}), []byte("x")) }),
			"hot bucket: key 0000000900 of session number 9, which no session has", "", false, "", ""},
		{"a bucket in h", h(func(h *bolt.Bucket) error { _, err := h.CreateBucket(key3(1, []byte("onested"))); return err }),
			"hot bucket: key 000000016f6e6573746564 holds a bucket", "", false, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path, m := fixture4(t)
			if ps := verifyPath(t, path); len(ps) != 0 {
				t.Fatalf("before the damage: %v", ps)
			}
			editBolt(t, path, tc.edit)
			ps := verifyPath(t, path)
			found := false
			for _, p := range ps {
				found = found || p.Session == tc.session && strings.Contains(p.What, tc.want)
				if strings.Contains(p.What, "panicked") {
					t.Errorf("Verify: %s", p)
				}
			}
			if !found {
				t.Errorf("Verify did not report %q (session %q): %v", tc.want, tc.session, ps)
			}

			db := open4(t, path, 4)
			for _, id := range []string{"a", "b", "c"} {
				readOrCorrupt(t, db, m, id)
			}
			// An append to every session: the first commit finds the
			// journal past 4 and folds, unless it cannot. A journal whose
			// last key is not below its sequence refuses every append
			// (the next entry would be written over it).
			for _, a := range []struct {
				id string
				n  int
			}{{"a", 1}, {"b", 1}, {"c", 8}} {
				if tc.refuses != "*" && tc.refuses != a.id || a.n >= 8 && tc.refuses == "*" {
					// c's 8 events go straight to e: no journal key.
					m.gen(t, db, a.id, a.n)
					continue
				}
				evs := make([]tier.Event, a.n)
				for i := range evs {
					evs[i] = gen4(a.id, uint64(len(m[a.id])+1+i))
				}
				_, err := db.Append(a.id, evs...)
				if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), tc.refusal) {
					t.Errorf("Append(%q) = %v, want ErrCorrupt naming %q", a.id, err, tc.refusal)
				}
			}
			for _, id := range []string{"a", "b", "c"} {
				readOrCorrupt(t, db, m, id)
			}
			mustClose(t, db)
			l := readLayout4(t, path)
			if folded := l.jseq < 5; folded == tc.stuck {
				t.Errorf("journal sequence %d, %d entries: folded %v, want %v", l.jseq, len(l.journal), folded, !tc.stuck)
			}
			ps = verifyPath(t, path)
			// A fold leaves no trace of damage to the journal; the hot
			// bucket's stray keys stay.
			clean := !tc.stuck && !strings.Contains(tc.name, " in h")
			if clean && len(ps) != 0 {
				t.Errorf("Verify after the fold: %v", ps)
			}
			if !clean && len(ps) == 0 {
				t.Errorf("Verify is clean after the appends; the damage stays")
			}
		})
	}
}

// TestFormat4_StuckJournalKeepsWorking: with a journal entry of a number
// nobody has, or a short one, the journal cannot fold: appends still
// succeed, far past Options.JournalEvents; a session whose events are in
// e reads whole, and so does one in the journal while its reads stay
// before the short entry (an unknown number is passed); Verify reports the
// damage and nothing else panics.
func TestFormat4_StuckJournalKeepsWorking(t *testing.T) {
	for _, short := range []bool{false, true} {
		t.Run(fmt.Sprint("short=", short), func(t *testing.T) {
			path, m := fixture4(t)
			editBolt(t, path, func(tx *bolt.Tx) error {
				j := tx.Bucket([]byte("j"))
				v := []byte{0, 0, 0, 1, 2}
				if !short {
					v = binary.BigEndian.AppendUint64(key3(7), 1)
					v = append(v, j.Get(seqKey(1))[12:]...)
				}
				if err := j.SetSequence(6); err != nil {
					return err
				}
				return j.Put(seqKey(6), v)
			})
			db := open4(t, path, 4)
			for range 10 {
				m.gen(t, db, "a", 1)
				m.gen(t, db, "b", 2)
				m.gen(t, db, "c", 8) // c has nothing in the journal: e
			}
			m.gen(t, db, "d", 8) // a new session, in e
			if short {
				// a's and b's newest events are past the short entry.
				for _, id := range []string{"a", "b"} {
					if err := readOrCorrupt(t, db, m, id); !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "entry of 5 bytes") {
						t.Errorf("session %q: %v, want ErrCorrupt naming the short entry", id, err)
					}
				}
				err := db.View(func(s *store.Snapshot) error {
					// a's events before the damage: 1..8 in e, 9..10 before it.
					return s.Events("a", 1, 10, func(tier.Event) error { return nil })
				})
				if err != nil {
					t.Errorf("a's events 1..10: %v", err)
				}
				m = model4{"c": m["c"], "d": m["d"]}
			}
			checkReads4(t, db, m)
			mustClose(t, db)
			if l := readLayout4(t, path); l.jseq != 6+10*3 {
				t.Errorf("journal sequence %d, want %d: no fold", l.jseq, 6+10*3)
			}
			var problems []string
			for _, p := range verifyPath(t, path) {
				problems = append(problems, p.String())
			}
			want := "journal: entry 6 of session number 7, which no session has"
			if short {
				want = "journal: entry 6 holds 5 bytes"
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, want) }) {
				t.Errorf("Verify did not report %q: %q", want, problems)
			}
			for _, p := range problems {
				if strings.Contains(p, "panicked") {
					t.Errorf("Verify: %s", p)
				}
			}
		})
	}
}

// TestFormat4_FormatsReopen: a format 4 file reopened with Options.Format 2
// (or 3) stays format 4 and appends to its journal; a format 3 file
// reopened with Format 4 stays format 3, without h or j; a file created
// without a format has DefaultFormat.
func TestFormat4_FormatsReopen(t *testing.T) {
	path, m := fixture4(t)
	for _, f := range []int{2, 3} {
		db, err := store.Open(path, store.Options{Format: f, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := formatOf(t, db); got != 4 {
			t.Errorf("a format 4 file reopened with Format %d: format %d", f, got)
		}
		m.gen(t, db, "b", 1)
		checkReads4(t, db, m)
		mustClose(t, db)
	}
	if l := readLayout4(t, path); l.jseq != 7 || l.first[1] != 1 {
		t.Errorf("journal sequence %d, b's first key %d; want 7, 1", l.jseq, l.first[1])
	}
	if ps := verifyPath(t, path); len(ps) != 0 {
		t.Errorf("Verify: %v", ps)
	}

	path3 := twoSessions3(t)
	db, err := store.Open(path3, store.Options{Format: 4, NoSync: true, JournalEvents: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := formatOf(t, db); got != 3 {
		t.Errorf("a format 3 file reopened with Format 4: format %d", got)
	}
	mustAppend(t, db, "a", tier.Event{Kind: tier.KindUser})
	mustClose(t, db)
	viewBolt(t, path3, func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("h")) != nil || tx.Bucket([]byte("j")) != nil {
			t.Errorf("a format 3 file with format 4's buckets")
		}
		return nil
	})
	if ps := verifyPath(t, path3); len(ps) != 0 {
		t.Errorf("Verify of the format 3 file: %v", ps)
	}

	db = dbtest.Open(t, store.Options{NoSync: true})
	if got := formatOf(t, db); got != store.DefaultFormat {
		t.Errorf("a file created without a format: format %d, want %d", got, store.DefaultFormat)
	}
}

func formatOf(t *testing.T, db *store.DB) (f int) {
	t.Helper()
	if err := db.View(func(s *store.Snapshot) (err error) {
		f, err = s.FormatVersion()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return f
}
