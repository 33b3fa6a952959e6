package store_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// readJSONL reads every record of a JSONL stream.
func readJSONL(t testing.TB, r io.Reader, name string) []tier.Record {
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
