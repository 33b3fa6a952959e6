package companion

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/store/storetest"
	"github.com/strata-go/strata/tier"
)

// fixture is the Claude Code session of transcript/testdata: a failed
// call, a rejected edit, an artifact, a duplicate record, sidechain
// records, a compact_boundary and its summary, a renamed call, a result
// for no call, an unknown record type.
const fixture = "../transcript/testdata/claude-code/session.jsonl"

const fixtureSession = "7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41"

// realTranscript returns the path of the real Claude Code transcript with
// a compaction, skipping t when the project's data is absent.
func realTranscript(t testing.TB) string {
	t.Helper()
	p := filepath.Join("..", "..", "shared", "data", "claude-code", "fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is absent: real-transcript test skipped", p)
	}
	return p
}

// lines returns the lines of the file at path, each with its newline.
func lines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// grow appends ls to the file at path, creating it.
func grow(t testing.TB, path string, ls [][]byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range ls {
		if _, err := f.Write(l); err != nil {
			t.Fatal(err)
		}
	}
}

// importFile imports the transcript at path into session.
func importFile(t testing.TB, db *store.DB, session, path string, whole bool) Import {
	t.Helper()
	tf, err := OpenTranscriptFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	im, _, err := importTranscript(db, testAgent{}, session, tf, "", whole)
	if err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
	return im
}

// TestImport_Incremental: a transcript imported as it grows gives the
// events of one import of the whole file, each read starting after the
// record imported last; imported again, nothing.
func TestImport_Incremental(t *testing.T) {
	for _, c := range []struct {
		name string
		path string
		cuts []int // the line counts the file grows to
	}{
		{"fixture", fixture, []int{3, 6, 11, 19, 22, 30}},
		{"real", "", []int{200, 777, 1583, 1584, 1585, 1700}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.path
			if path == "" {
				path = realTranscript(t)
			}
			ls := lines(t, path)
			cuts := append(c.cuts, len(ls))
			session := "s"
			grown := filepath.Join(t.TempDir(), "t.jsonl")
			db := dbtest.Open(t, store.Options{NoSync: true})
			prev := 0
			for i, n := range cuts {
				grow(t, grown, ls[prev:n])
				prev = n
				im := importFile(t, db, session, grown, false)
				if i > 0 && (im.Full || im.From == 0) {
					t.Fatalf("at line %d: read %d..%d whole=%v anchor %q: want a read after the record imported last", n, im.From, im.To, im.Full, im.Anchor)
				}
				// Again: from the line after the record stored last (the
				// records after it made no event), nothing stored.
				if again := importFile(t, db, session, grown, false); again.Events != 0 || again.Full || again.From == 0 {
					t.Fatalf("at line %d, imported again: %+v after %+v; want nothing stored", n, again, im)
				}
			}
			whole := dbtest.Open(t, store.Options{NoSync: true})
			importFile(t, whole, session, path, false)
			got, want := storetest.Events(t, db, session), storetest.Events(t, whole, session)
			if !slices.EqualFunc(got, want, eventsEqual) {
				t.Fatalf("grown import: %d events; whole import: %d; first difference at %d", len(got), len(want), firstDiff(got, want))
			}
			// The whole file read again (what a rewritten file gets): every
			// record known, nothing stored.
			if im := importFile(t, db, session, grown, true); im.Events != 0 || im.Report.Known == 0 {
				t.Fatalf("whole file again: %+v; want nothing stored, records known", im)
			}
		})
	}
}

func eventsEqual(a, b tier.Event) bool { return a == b }

func firstDiff(a, b []tier.Event) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestImport_UnfinishedLine: a last line Claude Code has not finished is
// left for the next run, which imports it whole.
func TestImport_UnfinishedLine(t *testing.T) {
	ls := lines(t, fixture)
	path := filepath.Join(t.TempDir(), "t.jsonl")
	last := ls[6] // a4: the Bash call
	grow(t, path, ls[:6])
	grow(t, path, [][]byte{last[:len(last)/2]})
	db := dbtest.Open(t, store.Options{NoSync: true})
	first := importFile(t, db, fixtureSession, path, false)
	grow(t, path, [][]byte{last[len(last)/2:]})
	second := importFile(t, db, fixtureSession, path, false)
	if first.Report.Calls != 1 || second.Report.Calls != 1 || second.From != first.To {
		t.Fatalf("first %+v, second %+v: want the Read call, then the Bash call from where the first stopped", first, second)
	}
	// A last line without a newline that is whole JSON is read.
	path2 := filepath.Join(t.TempDir(), "t.jsonl")
	grow(t, path2, ls[:6])
	grow(t, path2, [][]byte{bytes.TrimSuffix(last, []byte("\n"))})
	if im := importFile(t, dbtest.Open(t, store.Options{NoSync: true}), fixtureSession, path2, false); im.Report.Calls != 2 {
		t.Fatalf("a whole last line without a newline: %+v, want both calls", im)
	}
}

// TestImport_RewrittenFile: when the record imported last is no longer in
// the file, the whole file is read, the records known left out.
func TestImport_RewrittenFile(t *testing.T) {
	ls := lines(t, fixture)
	path := filepath.Join(t.TempDir(), "t.jsonl")
	grow(t, path, ls[:12])
	db := dbtest.Open(t, store.Options{NoSync: true})
	importFile(t, db, fixtureSession, path, false)
	// The file again, without the line of the record imported last (a5,
	// the edit the user refuses), and more after it.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	grow(t, path, ls[:11])
	grow(t, path, ls[12:18])
	im := importFile(t, db, fixtureSession, path, false)
	if !im.Full || !im.NotFound || im.Anchor != "a5" || im.From != 0 || im.Report.Known == 0 || im.Events == 0 || im.Report.OrphanResults != 0 {
		t.Fatalf("%+v: want the whole file read (a5 not found), the known records left out, the new ones stored, the refusal resolving the call the store holds open", im)
	}
	r := Result{Input: Input{HookEventName: "PreCompact", Action: ActionCompact}, Agent: testAgent{}, Import: im}
	if !strings.Contains(r.Line(), " whole_file (record a5 not found) ") {
		t.Errorf("the log line %q does not say the record was not found", r.Line())
	}
	// Read whole on purpose, nothing was searched for: the log says so.
	im = importFile(t, db, fixtureSession, path, true)
	r.Import = im
	if !im.Full || im.NotFound || strings.Contains(r.Line(), "not found") {
		t.Errorf("%+v, %q: a whole read asked for searches for no record", im, r.Line())
	}
}

// TestImport_SessionState: the session as an import leaves it — what
// PreCompact compacts and SessionStart walks back from, without reading
// the session again — is the store's: its head, its compacted prefix, and
// whether the head is the hook's own event.
func TestImport_SessionState(t *testing.T) {
	ls := lines(t, fixture)
	path := filepath.Join(t.TempDir(), "t.jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	h, err := New(db, testAgent{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, want func(st sessionState) bool) sessionState {
		t.Helper()
		tf, err := OpenTranscriptFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer tf.Close()
		_, st, err := importTranscript(db, testAgent{}, fixtureSession, tf, "", false)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		info, err := db.Info(fixtureSession)
		switch {
		case errors.Is(err, store.ErrSessionNotFound):
			if st.exists {
				t.Fatalf("%s: %+v; the store holds no session", what, st)
			}
		case err != nil:
			t.Fatal(err)
		case !st.exists || st.head != info.Head || st.compactedTo != info.CompactedTo:
			t.Fatalf("%s: %+v; the store says head %d, compacted to %d", what, st, info.Head, info.CompactedTo)
		}
		if !want(st) {
			t.Fatalf("%s: %+v", what, st)
		}
		return st
	}
	grow(t, path, ls[:1]) // a summary record: nothing to store
	check("nothing stored", func(st sessionState) bool { return !st.exists })
	grow(t, path, ls[1:12])
	st := check("records stored", func(st sessionState) bool { return st.head > 0 && !st.ownHead && st.compactedTo == 0 })
	if _, err := h.comp.CompactTo(context.Background(), fixtureSession, st.head); err != nil {
		t.Fatal(err)
	}
	check("nothing new after a compaction", func(s sessionState) bool { return s.head == st.head && s.compactedTo == st.head && !s.ownHead })
	if _, err := db.Append(fixtureSession, tier.Event{Kind: tier.KindSystem, Text: "strata's own", Ref: strataRefPrefix + "x"}); err != nil {
		t.Fatal(err)
	}
	check("the hook's own event at the head", func(s sessionState) bool { return s.head == st.head+1 && s.ownHead })
	grow(t, path, ls[12:])
	check("records after the hook's own event", func(s sessionState) bool { return s.head > st.head+1 && !s.ownHead && s.compactedTo == st.head })
}

// TestImport_Batches: an import of more events than one append takes
// stores them in batches, the same events as one append; a batch ends
// between records (the fixture's edit result and its artifacts share a
// ref, which the store takes in one append only).
func TestImport_Batches(t *testing.T) {
	one := dbtest.Open(t, store.Options{NoSync: true})
	importFile(t, one, "s", fixture, false)
	defer func(n int) { appendBatch = n }(appendBatch)
	appendBatch = 3
	batched := dbtest.Open(t, store.Options{NoSync: true})
	im := importFile(t, batched, "s", fixture, false)
	want := storetest.Events(t, one, "s")
	if got := storetest.Events(t, batched, "s"); im.Events != len(want) || im.First != 1 || im.Last != uint64(len(want)) || !slices.EqualFunc(got, want, eventsEqual) {
		t.Fatalf("batches of 3: %+v, %d events; one append: %d", im, len(got), len(want))
	}
	if im := importFile(t, batched, "s", fixture, true); im.Events != 0 {
		t.Fatalf("again: %+v; want nothing stored", im)
	}
}
