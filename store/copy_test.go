package store_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/memback"
	"github.com/strata-go/strata/internal/pgtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/store/storetest"
	"github.com/strata-go/strata/tier"
)

// The backends a copy runs between: a bbolt file, and a schema of the
// PostgreSQL test server (skipped without one).
var copyKinds = []string{"file", "postgres"}

// openKind opens a new, empty database of kind, closed when t ends.
func openKind(t *testing.T, kind string) (*store.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "strata.db")
	if kind == "postgres" {
		path = pgtest.URL(t)
	}
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

// fillCopySource stores the sessions a copy is tested on: the incident
// compacted by the extractive summarizer (nodes, markers, folds) and by a
// lossy one (refusals, checkpoints, the audit), a session of imported
// events (refs), and the first real real sessions compacted on the default
// policy, when they are present. It returns their ids.
func fillCopySource(t *testing.T, db *store.DB, real int) []string {
	t.Helper()
	dbtest.ReplayIncident(t, db, "incident-extractive", compaction.Extractive{})
	lossy, err := compaction.NewLossy(compaction.DropNegatives, compaction.DropArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	dbtest.ReplayIncident(t, db, "incident-lossy", lossy)
	var imported []tier.Event
	for i := range 40 {
		imported = append(imported, tier.Event{Kind: tier.KindUser, Text: fmt.Sprintf("message %d", i), Ref: fmt.Sprintf("msg-%d", i)})
	}
	mustAppend(t, db, "imported", imported...)
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{}, Policy: compaction.DefaultPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range firstN(dbtest.RealSessionFiles(), real) {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		recs := readJSONL(t, f, filepath.Base(name))
		f.Close()
		session := strings.TrimSuffix(filepath.Base(name), ".jsonl")
		for len(recs) > 0 {
			n := min(len(recs), 20)
			evs := make([]tier.Event, n)
			for i := range evs {
				evs[i] = recs[i].Event
			}
			recs = recs[n:]
			mustAppend(t, db, session, evs...)
			if _, err := comp.Run(context.Background(), session); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids, err := db.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// rawSessions is store.RawSessions, failing t on an error.
func rawSessions(t *testing.T, db *store.DB) map[string]map[string]string {
	t.Helper()
	raw, err := store.RawSessions(db)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// resumes returns the sha256 of every session's resumed context.
func resumes(t *testing.T, db *store.DB) map[string]string {
	t.Helper()
	ids, err := db.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, id := range ids {
		rc, err := db.Resume(id, store.Latest)
		if err != nil {
			t.Fatalf("resume %q: %v", id, err)
		}
		out[id] = rc.SHA256()
	}
	return out
}

// sameCopy checks that dst holds what src does, byte for byte at the
// backend's level, verifies, and resumes every session to the same bytes.
func sameCopy(t *testing.T, src, dst *store.DB) {
	t.Helper()
	want, got := rawSessions(t, src), rawSessions(t, dst)
	if len(got) != len(want) {
		t.Errorf("the copy holds %d sessions, the source %d", len(got), len(want))
	}
	for id, w := range want {
		if g := got[id]; !reflect.DeepEqual(g, w) {
			t.Errorf("session %q: the copy's values differ from the source's (%d values, want %d)", id, len(g), len(w))
		}
	}
	dbtest.Verify(t, dst)
	if w, g := resumes(t, src), resumes(t, dst); !reflect.DeepEqual(g, w) {
		t.Errorf("resumed sha256 of the copy %v, of the source %v", g, w)
	}
}

func eventsOf(t *testing.T, db *store.DB) (n uint64) {
	t.Helper()
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.Total.Events
}

// TestCopy_BetweenBackends copies every session from a file and from
// PostgreSQL into a file and into PostgreSQL (another schema), in
// transactions of 50 values: each copy holds the source's bytes, verifies,
// and resumes to the same sha256; a new file from CopyFile too.
func TestCopy_BetweenBackends(t *testing.T) {
	defer store.SetCopyBatch(50)()
	for _, from := range copyKinds {
		t.Run("from "+from, func(t *testing.T) {
			src, _ := openKind(t, from)
			ids := fillCopySource(t, src, 3)
			events := eventsOf(t, src)
			for _, to := range copyKinds {
				t.Run("to "+to, func(t *testing.T) {
					dst, _ := openKind(t, to)
					var calls int
					var last, total uint64
					err := src.View(func(s *store.Snapshot) error {
						res, err := s.Copy(context.Background(), dst, store.CopyOptions{Progress: func(done, all uint64) {
							calls, last, total = calls+1, done, all
						}})
						if err == nil && (!slices.Equal(res.Sessions, ids) || res.Events != events || res.Unfinished != "" || len(res.Completed) != 0) {
							t.Errorf("Copy = %+v, want sessions %v and %d events", res, ids, events)
						}
						return err
					})
					if err != nil {
						t.Fatal(err)
					}
					if last != events || total != events || calls < int(events/50) {
						t.Errorf("progress: %d calls, last %d of %d; want %d events in batches of 50", calls, last, total, events)
					}
					sameCopy(t, src, dst)
				})
			}
			t.Run("to a new file", func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "copy.db")
				err := src.View(func(s *store.Snapshot) error {
					_, err := s.CopyFile(context.Background(), path, false, store.CopyOptions{})
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				assertNoTemp(t, dir, "copy.db")
				dst, err := store.Open(path, store.Options{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				defer dst.Close()
				sameCopy(t, src, dst)
			})
		})
	}
}

// TestCopy_Sessions copies the sessions named, once each, and refuses one
// the source does not hold before it writes anything.
func TestCopy_Sessions(t *testing.T) {
	src := dbtest.Open(t, store.Options{NoSync: true})
	fillCopySource(t, src, 0)
	dst := dbtest.Open(t, store.Options{NoSync: true})
	err := src.View(func(s *store.Snapshot) error {
		res, err := s.Copy(context.Background(), dst, store.CopyOptions{Sessions: []string{"incident-lossy", "imported", "incident-lossy"}})
		if err == nil && !slices.Equal(res.Sessions, []string{"imported", "incident-lossy"}) {
			t.Errorf("copied %v", res.Sessions)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := dst.Sessions(); !slices.Equal(ids, []string{"imported", "incident-lossy"}) {
		t.Errorf("the destination holds %v", ids)
	}
	// Again: the sessions there are the source's, byte for byte, and stay.
	err = src.View(func(s *store.Snapshot) error {
		res, err := s.Copy(context.Background(), dst, store.CopyOptions{Sessions: []string{"imported", "incident-lossy"}})
		if err == nil && (len(res.Sessions) != 0 || res.Events != 0 || !slices.Equal(res.Present, []string{"imported", "incident-lossy"})) {
			t.Errorf("the copy run again = %+v, want both present", res)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Once the source's session has moved on, the copy there is another.
	mustAppend(t, src, "imported", tier.Event{Kind: tier.KindUser, Text: "one more"})
	err = src.View(func(s *store.Snapshot) error {
		_, err := s.Copy(context.Background(), dst, store.CopyOptions{Sessions: []string{"imported", "incident-lossy"}})
		return err
	})
	var se *store.SessionExistsError
	if !errors.As(err, &se) || !slices.Equal(se.IDs, []string{"imported"}) {
		t.Errorf("a copy over an older copy = %v, want imported refused", err)
	}
	err = src.View(func(s *store.Snapshot) error {
		_, err := s.Copy(context.Background(), dst, store.CopyOptions{Sessions: []string{"incident-extractive", "absent"}})
		return err
	})
	if !errors.Is(err, store.ErrSessionNotFound) || !strings.Contains(err.Error(), `"absent"`) {
		t.Errorf("Copy of a session the source lacks = %v", err)
	}
	if ids, _ := dst.Sessions(); len(ids) != 2 {
		t.Errorf("a refused copy wrote: the destination holds %v", ids)
	}
}

// TestCopy_RefusesExisting: a destination that holds a session of an id to
// copy refuses the whole copy, naming it, before anything is written: a
// file's bytes, PostgreSQL's rows stay as they were.
func TestCopy_RefusesExisting(t *testing.T) {
	src := dbtest.Open(t, store.Options{NoSync: true})
	fillCopySource(t, src, 0)
	for _, kind := range copyKinds {
		t.Run(kind, func(t *testing.T) {
			dst, path := openKind(t, kind)
			mustAppend(t, dst, "incident-lossy", tier.Event{Kind: tier.KindUser, Text: "another session of the same id"})
			mustAppend(t, dst, "imported", tier.Event{Kind: tier.KindUser, Text: "and another"})
			before := rawSessions(t, dst)
			var file []byte
			if kind == "file" {
				file = readFile(t, path)
			}
			err := src.View(func(s *store.Snapshot) error {
				_, err := s.Copy(context.Background(), dst, store.CopyOptions{})
				return err
			})
			var se *store.SessionExistsError
			if !errors.As(err, &se) || !errors.Is(err, store.ErrSessionExists) || !slices.Equal(se.IDs, []string{"imported", "incident-lossy"}) {
				t.Fatalf("Copy = %v, want a SessionExistsError of imported and incident-lossy", err)
			}
			if !strings.Contains(err.Error(), `"imported", "incident-lossy"`) {
				t.Errorf("the error does not name the ids: %v", err)
			}
			if after := rawSessions(t, dst); !reflect.DeepEqual(after, before) {
				t.Errorf("a refused copy changed the destination: %d sessions, %d before", len(after), len(before))
			}
			if kind == "file" && !slices.Equal(readFile(t, path), file) {
				t.Errorf("a refused copy changed the file's bytes")
			}
		})
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCopy_Interrupted stops a copy after each of its destination
// transactions in turn (ctx cancelled): the copy returns ctx's error;
// every session but the one it was writing is whole or absent, that one
// has no state (verify names it), and the same copy run again completes
// it, to the source's bytes.
func TestCopy_Interrupted(t *testing.T) {
	defer store.SetCopyBatch(16)()
	src := dbtest.Open(t, store.Options{NoSync: true})
	fillCopySource(t, src, 0)
	copyAll := func(ctx context.Context, dst *store.DB, progress func(uint64, uint64)) (res store.CopyResult, err error) {
		err = src.View(func(s *store.Snapshot) error {
			res, err = s.Copy(ctx, dst, store.CopyOptions{Progress: progress})
			return err
		})
		return res, err
	}
	// How many transactions a whole copy takes.
	flushes := 0
	whole, _ := openKind(t, "file")
	if _, err := copyAll(context.Background(), whole, func(uint64, uint64) { flushes++ }); err != nil {
		t.Fatal(err)
	}
	for _, kind := range copyKinds {
		t.Run(kind, func(t *testing.T) {
			unfinished := 0
			for stop := 1; stop < flushes; stop++ {
				dst, _ := openKind(t, kind)
				ctx, cancel := context.WithCancel(context.Background())
				n := 0
				res, err := copyAll(ctx, dst, func(uint64, uint64) {
					if n++; n == stop {
						cancel()
					}
				})
				cancel()
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("stopped after transaction %d: Copy = %v, want context.Canceled", stop, err)
				}
				rep, err := dst.Verify(store.VerifyOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Unfinished != "" {
					unfinished++
					if len(rep.Problems) != 1 || rep.Problems[0].Session != res.Unfinished || !strings.Contains(rep.Problems[0].What, "state: missing") {
						t.Errorf("stopped after transaction %d in session %q: verify reports %v", stop, res.Unfinished, rep.Problems)
					}
				} else if !rep.OK() {
					t.Errorf("stopped after transaction %d between sessions: verify reports %v", stop, rep.Problems)
				}
				again, err := copyAll(context.Background(), dst, nil)
				if err != nil {
					t.Fatalf("stopped after transaction %d: the copy run again: %v", stop, err)
				}
				if want := []string{res.Unfinished}; res.Unfinished == "" && len(again.Completed) != 0 || res.Unfinished != "" && !slices.Equal(again.Completed, want) {
					t.Errorf("stopped after transaction %d in %q: the second run completed %v", stop, res.Unfinished, again.Completed)
				}
				if !slices.Equal(again.Present, res.Sessions) || len(res.Sessions)+len(again.Sessions) != len(rawSessions(t, src)) {
					t.Errorf("stopped after transaction %d: %v copied, then %v, with %v present", stop, res.Sessions, again.Sessions, again.Present)
				}
				sameCopy(t, src, dst)
			}
			if unfinished == 0 {
				t.Errorf("no stop of %d fell inside a session", flushes)
			}
		})
	}
}

// TestCopy_UnfinishedOfOtherEvents: a session without its state whose
// events are not the source's first is no unfinished copy of it: the copy
// is refused.
func TestCopy_UnfinishedOfOtherEvents(t *testing.T) {
	defer store.SetCopyBatch(16)()
	a := dbtest.Open(t, store.Options{NoSync: true})
	mustAppend(t, a, "s", tier.Event{Kind: tier.KindUser, Text: "one history"})
	for i := range 40 {
		mustAppend(t, a, "s", tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprint("a", i)})
	}
	b := dbtest.Open(t, store.Options{NoSync: true})
	mustAppend(t, b, "s", tier.Event{Kind: tier.KindUser, Text: "another history"})
	for i := range 40 {
		mustAppend(t, b, "s", tier.Event{Kind: tier.KindAssistant, Text: fmt.Sprint("b", i)})
	}
	dst := dbtest.OpenUnverified(t, store.Options{NoSync: true})
	ctx, cancel := context.WithCancel(context.Background())
	err := a.View(func(s *store.Snapshot) error {
		_, err := s.Copy(ctx, dst, store.CopyOptions{Progress: func(uint64, uint64) { cancel() }})
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Copy = %v", err)
	}
	err = b.View(func(s *store.Snapshot) error {
		_, err := s.Copy(context.Background(), dst, store.CopyOptions{})
		return err
	})
	if !errors.Is(err, store.ErrSessionExists) {
		t.Errorf("copy over an unfinished copy of other events = %v, want ErrSessionExists", err)
	}
}

// TestCopy_DamagedSource: a row of PostgreSQL changed by SQL stops a copy
// with ErrCorrupt naming it: a new file is not made (nor left beside its
// path), and a copy into a database names the session it left unfinished.
func TestCopy_DamagedSource(t *testing.T) {
	defer store.SetCopyBatch(16)()
	src, url := openKind(t, "postgres")
	ids := fillCopySource(t, src, 2)
	pgtest.Exec(t, url, `UPDATE strata_events SET value = value || '\x00'::bytea WHERE session = 'incident-lossy' AND seq = 30`)
	dir := t.TempDir()
	path := filepath.Join(dir, "copy.db")
	err := src.View(func(s *store.Snapshot) error {
		_, err := s.CopyFile(context.Background(), path, false, store.CopyOptions{})
		return err
	})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), `session "incident-lossy" l0 key 30`) {
		t.Errorf("CopyFile of a damaged source = %v, want ErrCorrupt at the row", err)
	}
	assertNoTemp(t, dir)

	dst, _ := openKind(t, "file")
	var res store.CopyResult
	err = src.View(func(s *store.Snapshot) error {
		res, err = s.Copy(context.Background(), dst, store.CopyOptions{})
		return err
	})
	var before []string // the sessions copied whole before the damaged one
	for _, id := range ids {
		if id < "incident-lossy" {
			before = append(before, id)
		}
	}
	if !errors.Is(err, store.ErrCorrupt) || res.Unfinished != "incident-lossy" || !slices.Equal(res.Sessions, before) {
		t.Errorf("Copy of a damaged source = %+v, %v", res, err)
	}
}

// TestCopyFile_Exists: CopyFile without replace leaves a file at its path
// as it was, and says it exists; with replace, it replaces it whole.
func TestCopyFile_Exists(t *testing.T) {
	src := dbtest.Open(t, store.Options{NoSync: true})
	mustAppend(t, src, "s", prefix...)
	dir := t.TempDir()
	path := filepath.Join(dir, "there.db")
	if err := os.WriteFile(path, []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	copyTo := func(replace bool) error {
		return src.View(func(s *store.Snapshot) error {
			_, err := s.CopyFile(context.Background(), path, replace, store.CopyOptions{})
			return err
		})
	}
	if err := copyTo(false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CopyFile onto a file = %v, want fs.ErrExist", err)
	}
	if string(readFile(t, path)) != "not yours" {
		t.Errorf("CopyFile without replace changed the file there")
	}
	assertNoTemp(t, dir, "there.db")
	if err := copyTo(true); err != nil {
		t.Fatal(err)
	}
	dbtest.MustVerify(t, path)
	assertNoTemp(t, dir, "there.db")
}

// TestBackupFile_Postgres backs up a PostgreSQL store while writers
// append: the file holds exactly what one snapshot holds — the snapshot
// in which the test reads every session — verifies, and resumes every
// session to the source's bytes; BackupFile does the same.
func TestBackupFile_Postgres(t *testing.T) {
	db, _ := openKind(t, "postgres")
	fillCopySource(t, db, 3)
	stop, appended := startWriters(t, db, 4)
	defer stop()
	dir := t.TempDir()
	path := filepath.Join(dir, "backup.db")
	waitFor(t, appended, 20)
	var want map[string]sessionState
	wantSHA := map[string]string{}
	err := db.View(func(s *store.Snapshot) error {
		ids, err := s.Sessions()
		if err != nil {
			return err
		}
		want = map[string]sessionState{}
		for _, id := range ids {
			want[id] = readSession(t, s, id)
			rc, err := s.Resume(id, store.Latest)
			if err != nil {
				return err
			}
			wantSHA[id] = rc.SHA256()
		}
		waitFor(t, appended, 40) // the writers go on past the snapshot
		_, err = s.CopyFile(context.Background(), path, true, store.CopyOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	compareStates(t, "backup", openBackupFile(t, path), want)
	backup, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := resumes(t, backup); !reflect.DeepEqual(got, wantSHA) {
		t.Errorf("the backup resumes to %v, the snapshot to %v", got, wantSHA)
	}
	backup.Close()

	stop()
	n, err := db.BackupFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != n || fi.Mode().Perm() != 0o600 {
		t.Errorf("BackupFile = %d bytes; the file: %v, %v", n, fi, err)
	}
	assertNoTemp(t, dir, "backup.db")
	backup, err = store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer backup.Close()
	sameCopy(t, db, backup)
}

// TestCopy_UnfinishedThenSourceMoved: a copy stopped before the last
// transaction of a session, then the source appends and compacts on: the
// copy run again completes the session to the source's new bytes — the
// events it lacked appended, its records the source's, and a record the
// source does not hold gone.
func TestCopy_UnfinishedThenSourceMoved(t *testing.T) {
	defer store.SetCopyBatch(4)()
	src := dbtest.Open(t, store.Options{NoSync: true})
	evs := dbtest.IncidentEvents(t)
	replay := func(evs []tier.Event) { dbtest.ReplayEvents(t, src, "s", compaction.Extractive{}, evs) }
	half := len(evs) / 2
	replay(evs[:half])

	// Stopped before the last of its transactions: the events are in,
	// and all but the last records.
	flushes := 0
	scratch, _ := openKind(t, "file")
	err := src.View(func(s *store.Snapshot) error {
		_, err := s.Copy(context.Background(), scratch, store.CopyOptions{Progress: func(uint64, uint64) { flushes++ }})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	dst := dbtest.Open(t, store.Options{NoSync: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	err = src.View(func(s *store.Snapshot) error {
		_, err := s.Copy(ctx, dst, store.CopyOptions{Progress: func(uint64, uint64) {
			if n++; n == flushes-1 {
				cancel()
			}
		}})
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Copy = %v, want context.Canceled", err)
	}
	replay(evs[half:])
	// A record the source does not hold, as an older state of it would
	// leave one (a call since closed, a root since folded).
	if err := store.PutRecord(dst, "s", "open", []byte("c-closed-since"), []byte("stale")); err != nil {
		t.Fatal(err)
	}
	var res store.CopyResult
	err = src.View(func(s *store.Snapshot) error {
		res, err = s.Copy(context.Background(), dst, store.CopyOptions{})
		return err
	})
	if err != nil || !slices.Equal(res.Completed, []string{"s"}) {
		t.Fatalf("the copy run again = %+v, %v", res, err)
	}
	sameCopy(t, src, dst)
}

// TestCopy_StrayEvent: a destination's session that holds an event past
// the events it shares with the source, after a gap, is another session —
// without a state (a copy stopped midway after 2 events, then an event at
// seq 4, below the source's head) as with one (a whole copy, then an event
// at seq 7, past the head): the copy is refused, naming it, and writes
// nothing.
func TestCopy_StrayEvent(t *testing.T) {
	defer store.SetCopyBatch(2)()
	src := dbtest.Open(t, store.Options{NoSync: true})
	mustAppend(t, src, "s", prefix...)
	copyTo := func(ctx context.Context, dst *store.DB, progress func(uint64, uint64)) (res store.CopyResult, err error) {
		err = src.View(func(s *store.Snapshot) error {
			res, err = s.Copy(ctx, dst, store.CopyOptions{Progress: progress})
			return err
		})
		return res, err
	}
	for _, kind := range copyKinds {
		t.Run(kind, func(t *testing.T) {
			unfinished, _ := openKind(t, kind)
			ctx, cancel := context.WithCancel(context.Background())
			res, err := copyTo(ctx, unfinished, func(uint64, uint64) { cancel() })
			cancel()
			if !errors.Is(err, context.Canceled) || res.Unfinished != "s" {
				t.Fatalf("the copy stopped after its first transaction = %+v, %v", res, err)
			}
			whole, _ := openKind(t, kind)
			if _, err := copyTo(context.Background(), whole, nil); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				dst  *store.DB
				seq  uint64
			}{{"unfinished", unfinished, 4}, {"whole", whole, uint64(len(prefix)) + 1}} {
				if err := store.PutRecord(c.dst, "s", "l0", binary.BigEndian.AppendUint64(nil, c.seq), []byte("stray")); err != nil {
					t.Fatal(err)
				}
				before := rawSessions(t, c.dst)
				res, err := copyTo(context.Background(), c.dst, nil)
				var se *store.SessionExistsError
				if !errors.As(err, &se) || !slices.Equal(se.IDs, []string{"s"}) || res.Events != 0 || res.Unfinished != "" || len(res.Present) != 0 {
					t.Errorf("%s, with an event at seq %d: Copy = %+v, %v; want a *SessionExistsError naming s", c.name, c.seq, res, err)
				}
				if !reflect.DeepEqual(rawSessions(t, c.dst), before) {
					t.Errorf("%s: a refused copy changed the destination", c.name)
				}
			}
		})
	}
}

// TestCopyFile_Itself: CopyFile onto the database's own file — by its
// path, or by another link to it — is refused, replace or not, and the
// file stays the database's: what it appends after is in it.
func TestCopyFile_Itself(t *testing.T) {
	db, path := openKind(t, "file")
	mustAppend(t, db, "s", prefix[:3]...)
	link := filepath.Join(filepath.Dir(path), "link.db")
	if err := os.Link(path, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, link} {
		for _, replace := range []bool{false, true} {
			err := db.View(func(s *store.Snapshot) error {
				_, err := s.CopyFile(context.Background(), p, replace, store.CopyOptions{})
				return err
			})
			if err == nil || !strings.Contains(err.Error(), p+" is the database itself") {
				t.Errorf("CopyFile onto %s, replace %v = %v, want it refused as the database itself", p, replace, err)
			}
		}
	}
	assertNoTemp(t, filepath.Dir(path), "link.db", "strata.db")
	mustAppend(t, db, "s", prefix[3:]...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := storetest.Events(t, again, "s"); len(got) != len(prefix) {
		t.Errorf("the file holds %d events of s after the refused copies, want %d", len(got), len(prefix))
	}
}

// TestCopy_DestinationErrors: an error of the destination is marked
// ErrDestination (a damaged session of it), one of the source is not (a
// session the source lacks).
func TestCopy_DestinationErrors(t *testing.T) {
	src := dbtest.Open(t, store.Options{NoSync: true})
	mustAppend(t, src, "s", prefix...)
	dst, url := openKind(t, "postgres")
	copyTo := func(opts store.CopyOptions) error {
		return src.View(func(s *store.Snapshot) error {
			_, err := s.Copy(context.Background(), dst, opts)
			return err
		})
	}
	if err := copyTo(store.CopyOptions{Sessions: []string{"absent"}}); !errors.Is(err, store.ErrSessionNotFound) || errors.Is(err, store.ErrDestination) {
		t.Errorf("Copy of a session the source lacks = %v, want ErrSessionNotFound, not ErrDestination", err)
	}
	if err := copyTo(store.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, url, `UPDATE strata_events SET value = value || '\x00'::bytea WHERE session = 's' AND seq = 2`)
	if err := copyTo(store.CopyOptions{}); !errors.Is(err, store.ErrCorrupt) || !errors.Is(err, store.ErrDestination) {
		t.Errorf("Copy into a damaged destination = %v, want ErrCorrupt marked ErrDestination", err)
	}
}

// reads counts what the sessions of a backend read, by session id.
type reads struct {
	mu sync.Mutex
	by map[string]*sessionReads
}

// sessionReads is what one session read: its state record, events and
// records (each row passed to a callback).
type sessionReads struct{ states, events, records int }

func (r *reads) add(id string, f func(*sessionReads)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string]*sessionReads{}
	}
	if r.by[id] == nil {
		r.by[id] = &sessionReads{}
	}
	f(r.by[id])
}

// take returns what was read since the last take, and starts again.
func (r *reads) take() map[string]sessionReads {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]sessionReads{}
	for id, s := range r.by {
		out[id] = *s
	}
	r.by = map[string]*sessionReads{}
	return out
}

// countingBackend is a backend whose sessions count their reads.
type countingBackend struct {
	backend.Backend
	r *reads
}

func (b countingBackend) View(fn func(backend.Tx) error) error {
	return b.Backend.View(func(tx backend.Tx) error { return fn(countingTx{tx, b.r}) })
}

func (b countingBackend) Update(fn func(backend.Tx) error) error {
	return b.Backend.Update(func(tx backend.Tx) error { return fn(countingTx{tx, b.r}) })
}

type countingTx struct {
	backend.Tx
	r *reads
}

func (t countingTx) Session(id string) (backend.Session, error) {
	s, err := t.Tx.Session(id)
	if s == nil || err != nil {
		return nil, err
	}
	return countingSession{s, t.r}, nil
}

func (t countingTx) CreateSession(id string) (backend.Session, error) {
	s, err := t.Tx.CreateSession(id)
	if err != nil {
		return nil, err
	}
	return countingSession{s, t.r}, nil
}

type countingSession struct {
	backend.Session
	r *reads
}

func (s countingSession) State() ([]byte, error) {
	s.r.add(s.ID(), func(c *sessionReads) { c.states++ })
	return s.Session.State()
}

func (s countingSession) Events(from, to uint64, fn func(uint64, []byte) (bool, error)) error {
	return s.Session.Events(from, to, func(seq uint64, v []byte) (bool, error) {
		s.r.add(s.ID(), func(c *sessionReads) { c.events++ })
		return fn(seq, v)
	})
}

func (s countingSession) Scan(t backend.Table, from []byte, fn func(k, v []byte) (bool, error)) error {
	return s.Session.Scan(t, from, func(k, v []byte) (bool, error) {
		s.r.add(s.ID(), func(c *sessionReads) { c.records++ })
		return fn(k, v)
	})
}

// openCounting opens a database in memory whose reads r counts.
func openCounting(t *testing.T, r *reads) *store.DB {
	t.Helper()
	db, err := store.New(countingBackend{memback.New(), r}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestCopy_ReadsWhatDecides: a copy reads the source's state of each
// session once; of a destination's session of another state, it reads the
// state and nothing more before it refuses it; of one the same as the
// source's (a copy made before), it reads every event and record once, as
// it does the source's.
func TestCopy_ReadsWhatDecides(t *testing.T) {
	srcReads, dstReads := &reads{}, &reads{}
	src, dst := openCounting(t, srcReads), openCounting(t, dstReads)
	mustAppend(t, src, "s", prefix...)
	mustAppend(t, src, "t", prefix[:2]...)
	mustAppend(t, dst, "s", prefix[:3]...)
	copyTo := func(dst *store.DB) (res store.CopyResult, err error) {
		srcReads.take()
		dstReads.take()
		err = src.View(func(s *store.Snapshot) error {
			res, err = s.Copy(context.Background(), dst, store.CopyOptions{})
			return err
		})
		return res, err
	}

	_, err := copyTo(dst)
	var se *store.SessionExistsError
	if !errors.As(err, &se) || !slices.Equal(se.IDs, []string{"s"}) {
		t.Fatalf("Copy over another session s = %v, want a SessionExistsError naming s", err)
	}
	if got := dstReads.take()["s"]; got != (sessionReads{states: 1}) {
		t.Errorf("the destination's other session s read %+v, want its state alone", got)
	}
	src1 := srcReads.take()
	for _, id := range []string{"s", "t"} {
		if got := src1[id]; got.states != 1 {
			t.Errorf("the source's session %s: its state read %d times, want once", id, got.states)
		}
	}

	again := openCounting(t, dstReads)
	if _, err := copyTo(again); err != nil {
		t.Fatal(err)
	}
	res, err := copyTo(again)
	if err != nil || !slices.Equal(res.Present, []string{"s", "t"}) || len(res.Sessions) != 0 {
		t.Fatalf("the copy run again = %+v, %v; want s and t present", res, err)
	}
	srcGot, dstGot := srcReads.take(), dstReads.take()
	for id, raw := range rawSessions(t, src) {
		var want sessionReads
		for k := range raw {
			switch {
			case k == "state":
				want.states++
			case strings.HasPrefix(k, "l0 "):
				want.events++
			default:
				want.records++
			}
		}
		if want.events == 0 || want.records == 0 {
			t.Fatalf("session %s holds %+v", id, want)
		}
		if srcGot[id] != want || dstGot[id] != want {
			t.Errorf("session %s present: the source read %+v, the destination %+v; want each value once, %+v", id, srcGot[id], dstGot[id], want)
		}
	}
}
