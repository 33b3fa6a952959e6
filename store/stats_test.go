package store_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

func TestStats_Counts(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	empty, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(empty.Sessions) != 0 || empty.Total.Events != 0 || empty.BytesPerEvent != 0 {
		t.Errorf("stats of an empty database: %+v", empty)
	}

	// Session a: every kind (kindsLog); session b: prefix; session c: calls
	// only, all resolved but one.
	var all []tier.Event
	for _, b := range kindsLog() {
		all = append(all, b...)
	}
	mustAppend(t, db, "a", all...)
	mustAppend(t, db, "b", prefix...)
	mustAppend(t, db, "c",
		tier.Event{Kind: tier.KindToolCall, ID: "1"}, tier.Event{Kind: tier.KindToolResult, ID: "1"},
		tier.Event{Kind: tier.KindToolCall, ID: "2"}, tier.Event{Kind: tier.KindToolCall, ID: "3"},
		tier.Event{Kind: tier.KindToolResult, ID: "3", Failed: true, Key: "k3"},
	)
	// A refused append counts nowhere.
	if _, err := db.Append("c", tier.Event{Kind: tier.KindClose, ID: "2"}); err == nil {
		t.Fatal("close of a call accepted")
	}

	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.SessionStats{
		// a: 21 events, turn 9; open c3; dispositions approach/add-column
		// (rejected) and approach/b (superseded); the constraint was
		// withdrawn; one artifact.
		"a": {ID: "a", Counts: store.Counts{Events: uint64(len(all)), Turns: 9, Open: 1, Dispositions: 2, Constraints: 0, Artifacts: 1}},
		"b": {ID: "b", Counts: store.Counts{Events: 6, Turns: 2, Open: 2, Dispositions: 0, Constraints: 1, Artifacts: 1}},
		"c": {ID: "c", Counts: store.Counts{Events: 5, Turns: 0, Open: 1, Dispositions: 1}},
	}
	if len(st.Sessions) != len(want) {
		t.Fatalf("%d sessions, want %d", len(st.Sessions), len(want))
	}
	var total store.Counts
	for i, s := range st.Sessions {
		w := want[s.ID]
		if i > 0 && st.Sessions[i-1].ID >= s.ID {
			t.Errorf("sessions not in id order: %q after %q", s.ID, st.Sessions[i-1].ID)
		}
		if s.Events != w.Events || s.Turns != w.Turns || s.Open != w.Open || s.Dispositions != w.Dispositions ||
			s.Constraints != w.Constraints || s.Artifacts != w.Artifacts {
			t.Errorf("session %q:\n got %+v\nwant %+v", s.ID, s, w)
		}
		// No compaction yet: one usable checkpoint (seq 0), nothing else.
		if s.CheckpointsValid != 1 || s.CheckpointsInvalid != 0 || s.MarkersValid != 0 || s.MarkersInvalid != 0 ||
			s.Refusals != 0 || len(s.NodesByDepth) != 0 || s.Roots != 0 || s.FrameVersion != 0 {
			t.Errorf("session %q: compaction counts %+v", s.ID, s)
		}
		if len(s.RefusalsByClass) != len(marker.Classes) {
			t.Errorf("session %q: refusal classes %v, want every class of %v at 0", s.ID, s.RefusalsByClass, marker.Classes)
		}
		total.Events += s.Events
		total.Open += s.Open
		total.Dispositions += s.Dispositions
		total.Constraints += s.Constraints
		total.Artifacts += s.Artifacts
	}
	if st.Total.Events != total.Events || st.Total.Open != total.Open || st.Total.Dispositions != total.Dispositions ||
		st.Total.Constraints != total.Constraints || st.Total.Artifacts != total.Artifacts || st.Total.CheckpointsValid != 3 {
		t.Errorf("total %+v, sum of sessions %+v", st.Total, total)
	}
	if !dbtest.Postgres() { // PostgreSQL's tables are not one file
		fi, err := os.Stat(db.Path())
		if err != nil {
			t.Fatal(err)
		}
		if st.FileBytes != fi.Size() || st.FileBytesPerEvent != float64(fi.Size())/float64(total.Events) {
			t.Errorf("file bytes %d (file %d), per event %v", st.FileBytes, fi.Size(), st.FileBytesPerEvent)
		}
		if st.TableBytes != 0 || st.TableBytesPerEvent != 0 {
			t.Errorf("a file's table bytes %d, per event %v", st.TableBytes, st.TableBytesPerEvent)
		}
	} else if st.FileBytes != 0 || st.TableBytes <= 0 || st.TableBytesPerEvent != float64(st.TableBytes)/float64(total.Events) {
		t.Errorf("PostgreSQL: file bytes %d, table bytes %d, per event %v", st.FileBytes, st.TableBytes, st.TableBytesPerEvent)
	}
	var raw uint64
	for _, s := range st.Sessions {
		raw += s.RawBytes
		if s.RawBytes == 0 || s.BytesPerEvent != float64(s.RawBytes)/float64(s.Events) || s.LastTime.IsZero() {
			t.Errorf("session %q: raw bytes %d, per event %v, last time %v", s.ID, s.RawBytes, s.BytesPerEvent, s.LastTime)
		}
	}
	if st.Total.RawBytes != raw || st.BytesPerEvent != float64(raw)/float64(total.Events) {
		t.Errorf("total raw bytes %d (sum %d), per event %v", st.Total.RawBytes, raw, st.BytesPerEvent)
	}

	// Snapshot.SessionStats gives the same per session, and refuses an
	// unknown session.
	err = db.View(func(s *store.Snapshot) error {
		one, err := s.SessionStats("b")
		if err != nil {
			return err
		}
		if one.Events != 6 || one.Open != 2 {
			t.Errorf("SessionStats(b) = %+v", one)
		}
		if _, err := s.SessionStats("nope"); err == nil {
			t.Error("SessionStats of an unknown session succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Verify's counts agree, and it reports progress once per session.
	var progress []int
	rep, err := db.Verify(store.VerifyOptions{Progress: func(done, total int) {
		if total != 3 {
			t.Errorf("progress total %d, want 3", total)
		}
		progress = append(progress, done)
	}})
	if err != nil || !rep.OK() || rep.Sessions != 3 || rep.Events != total.Events || rep.Nodes != 0 {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
	if fmt.Sprint(progress) != "[1 2 3]" {
		t.Errorf("progress %v, want [1 2 3]", progress)
	}
}

// RawBytes counts the stored raw events: an event with a text of n bytes
// adds at least n. LastTime is the newest event's time. Stats of named
// sessions counts those alone, and an unknown one is ErrSessionNotFound.
func TestStats_RawBytesLastTimeAndNamedSessions(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	mustAppend(t, db, "a", tier.Event{Kind: tier.KindUser, Text: "short", Time: t0.UnixNano()})
	mustAppend(t, db, "b", tier.Event{Kind: tier.KindUser, Text: "other", Time: t0.UnixNano()})
	before, err := db.Stats("a")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 10000)
	t1 := t0.Add(time.Hour)
	mustAppend(t, db, "a", tier.Event{Kind: tier.KindAssistant, Text: long, Time: t1.UnixNano()})
	after, err := db.Stats("a")
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Sessions) != 1 || after.Sessions[0].ID != "a" || after.Total.Events != 2 {
		t.Fatalf("Stats(a) = %+v", after)
	}
	a := after.Sessions[0]
	if a.RawBytes < before.Sessions[0].RawBytes+uint64(len(long)) {
		t.Errorf("raw bytes %d after a %d-byte event, %d before", a.RawBytes, len(long), before.Sessions[0].RawBytes)
	}
	if !a.LastTime.Equal(t1) || !before.Sessions[0].LastTime.Equal(t0) {
		t.Errorf("last time %v (before %v), want %v (%v)", a.LastTime, before.Sessions[0].LastTime, t1, t0)
	}
	if after.Total.RawBytes != a.RawBytes || after.BytesPerEvent != float64(a.RawBytes)/2 {
		t.Errorf("total %+v", after.Total)
	}
	if _, err := db.Stats("a", "nope"); !errors.Is(err, store.ErrSessionNotFound) {
		t.Errorf("Stats of an unknown session: %v", err)
	}
}

// The database's size is not a session's: Stats of named sessions gives
// it (the file's, or the tables'), whole, without its bytes per event,
// which the sessions counted do not account for. The total has no id,
// frame version or newest event's time: in JSON those fields are absent,
// not 0, while a session's frame version 0 is given.
func TestStats_NamedSessionsAndTotal(t *testing.T) {
	db := dbtest.Open(t, store.Options{})
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC).UnixNano()
	mustAppend(t, db, "a", tier.Event{Kind: tier.KindUser, Text: "one", Time: at})
	mustAppend(t, db, "b", tier.Event{Kind: tier.KindUser, Text: strings.Repeat("two ", 1000), Time: at},
		tier.Event{Kind: tier.KindAssistant, Text: "three", Time: at})
	all, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	one, err := db.Stats("a")
	if err != nil {
		t.Fatal(err)
	}
	size := func(st store.Stats) (int64, float64) {
		if dbtest.Postgres() {
			return st.TableBytes, st.TableBytesPerEvent
		}
		return st.FileBytes, st.FileBytesPerEvent
	}
	n, per := size(all)
	if n <= 0 || all.Total.Events != 3 || per != float64(n)/3 {
		t.Errorf("every session: %d bytes, %v per event, %d events", n, per, all.Total.Events)
	}
	if m, per := size(one); m != n || per != 0 || one.Total.Events != 1 {
		t.Errorf("session a: %d bytes (the database's %d), %v per event, %d events", m, n, per, one.Total.Events)
	}
	if one.BytesPerEvent != float64(one.Sessions[0].RawBytes) || one.Total.RawBytes != one.Sessions[0].RawBytes {
		t.Errorf("session a: raw bytes per event %v, raw bytes %d, the session's %d", one.BytesPerEvent, one.Total.RawBytes, one.Sessions[0].RawBytes)
	}

	type fields map[string]json.RawMessage
	decode := func(st store.Stats) (doc fields, total fields, sessions []fields) {
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(doc["total"], &total); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(doc["sessions"], &sessions); err != nil {
			t.Fatal(err)
		}
		return doc, total, sessions
	}
	perKey, sizeKey := "file_bytes_per_event", "file_bytes"
	if dbtest.Postgres() {
		perKey, sizeKey = "table_bytes_per_event", "table_bytes"
	}
	for name, st := range map[string]store.Stats{"every session": all, "session a": one} {
		doc, total, sessions := decode(st)
		for _, k := range []string{"id", "frame_version", "last_time"} {
			if _, ok := total[k]; ok {
				t.Errorf("%s: the total has %q", name, k)
			}
		}
		if _, ok := total["events"]; !ok {
			t.Errorf("%s: the total has no events", name)
		}
		for _, s := range sessions {
			if string(s["frame_version"]) != "0" || s["id"] == nil || s["last_time"] == nil {
				t.Errorf("%s: a session's id %s, frame_version %s, last_time %s", name, s["id"], s["frame_version"], s["last_time"])
			}
		}
		if _, ok := doc[sizeKey]; !ok {
			t.Errorf("%s: no %s", name, sizeKey)
		}
		if _, ok := doc[perKey]; ok != (name == "every session") {
			t.Errorf("%s: %s given %v", name, perKey, ok)
		}
	}
}

// SessionSummary reads no raw event but the newest: a damaged event inside
// the log leaves a listing of the sessions working, while SessionStats,
// which reads the log whole, names the damage. Undamaged, the two agree
// but for the raw log's size.
func TestSessionSummary_ReadsNoRawLog(t *testing.T) {
	dbtest.FileOnly(t)
	db := dbtest.Open(t, store.Options{})
	mustAppend(t, db, "s", prefix...)
	mustAppend(t, db, "s", tier.Event{Kind: tier.KindAssistant, Text: "after"})
	var full, sum store.SessionStats
	if err := db.View(func(s *store.Snapshot) (err error) {
		if full, err = s.SessionStats("s"); err != nil {
			return err
		}
		sum, err = s.SessionSummary("s")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if full.RawBytes == 0 || sum.RawBytes != 0 || sum.BytesPerEvent != 0 {
		t.Fatalf("raw bytes: stats %d, summary %d (per event %v)", full.RawBytes, sum.RawBytes, sum.BytesPerEvent)
	}
	full.RawBytes, full.BytesPerEvent = 0, 0
	if fmt.Sprint(full) != fmt.Sprint(sum) {
		t.Errorf("summary differs from stats:\n got %+v\nwant %+v", sum, full)
	}
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	defer damage(t, path, "s", "l0", seqKey(3), flipAt(0))()
	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.View(func(s *store.Snapshot) error {
		got, err := s.SessionSummary("s")
		if err != nil || fmt.Sprint(got) != fmt.Sprint(sum) {
			t.Errorf("summary of a log damaged at seq 3: %+v, %v", got, err)
		}
		if _, err := s.SessionStats("s"); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("stats of a log damaged at seq 3: %v, want ErrCorrupt", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
