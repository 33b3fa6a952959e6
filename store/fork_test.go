package store_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/compaction"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// forkTurn returns the events of turn n: a prompt, a call and its result
// (every fifth one failed), an answer, each with some text.
func forkTurn(n int) []tier.Event {
	id := fmt.Sprintf("call-%d", n)
	text := bytes.Repeat([]byte("x"), 200)
	return []tier.Event{
		{Kind: tier.KindUser, Text: fmt.Sprintf("step %d %s", n, text)},
		{Kind: tier.KindToolCall, ID: id, Name: "run", Text: string(text)},
		{Kind: tier.KindToolResult, ID: id, Failed: n%5 == 0, Text: string(text)},
		{Kind: tier.KindAssistant, Text: fmt.Sprintf("done %d %s", n, text)},
	}
}

// bigSession fills session of db with turns turns, compacted by the
// extractive summarizer as an agent's compactor would.
func bigSession(t testing.TB, db *store.DB, session string, turns int) {
	t.Helper()
	comp, err := compaction.NewCompactor(db, compaction.Options{Summarizer: compaction.Extractive{},
		Policy: compaction.Policy{EveryTurns: 8, Fold: 4}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < turns; i += 25 {
		var evs []tier.Event
		for j := i; j < min(i+25, turns); j++ {
			evs = append(evs, forkTurn(j)...)
		}
		mustAppend(t, db, session, evs...)
		if _, err := comp.Run(context.Background(), session); err != nil {
			t.Fatal(err)
		}
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestFork_CostsItsFrame forks a session of 20,000 events in a bbolt file
// and compares the bytes the fork adds to the file with the bytes the
// session takes copied alone into a new file: the fork stores its frame,
// not its raw log. The figures are logged (docs/retention.md).
func TestFork_CostsItsFrame(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "strata.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bigSession(t, db, "src", 5000)
	alone := filepath.Join(dir, "alone.db")
	if err := db.View(func(s *store.Snapshot) error {
		_, err := s.CopyFile(context.Background(), alone, false, store.CopyOptions{Sessions: []string{"src"}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	info, err := db.Info("src")
	if err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)
	res, err := db.Fork("src", store.Latest, "dst")
	if err != nil {
		t.Fatal(err)
	}
	added := fileSize(t, path) - before
	session := fileSize(t, alone)
	t.Logf("session of %d events, %d roots: %d bytes alone in a file; its fork (%d roots) adds %d bytes to the file (%.2f%%)",
		info.Head, info.Roots, session, res.Roots, added, 100*float64(added)/float64(session))
	if added*20 > session {
		t.Errorf("the fork added %d bytes, more than 5%% of the session's %d", added, session)
	}
	want, err := db.Resume("src", res.Marker)
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Resume("dst", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	want.Session = "dst"
	if !bytes.Equal(got.Text(), want.Text()) {
		t.Fatal("the fork resumes to other bytes than its parent at the marker")
	}
	// The fork compacts on its own across its fork point.
	bigSession(t, db, "dst", 40)
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify: %v", rep.Problems)
	}
}

// TestVacuum_GivesSpaceBack prunes most sessions of a file, vacuums it and
// checks that the file shrank and what stays resumes to the same bytes.
func TestVacuum_GivesSpaceBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "strata.db")
	db, err := store.Open(path, store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		bigSession(t, db, fmt.Sprintf("s%d", i), 200)
	}
	if _, err := db.Fork("s0", store.Latest, "f"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 1; i < 8; i++ {
		ids = append(ids, fmt.Sprintf("s%d", i))
	}
	if _, err := db.Prune(store.PruneOptions{Sessions: ids}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, id := range []string{"s0", "f"} {
		c, err := db.Resume(id, store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = c.Text()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := store.Vacuum(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("vacuum: %d bytes before, %d after", res.Before, res.After)
	if res.After*2 > res.Before || res.After != fileSize(t, path) || res.Sessions != 2 {
		t.Fatalf("vacuum: %+v, want the file at most half as long, 2 sessions", res)
	}
	db, err = store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for id, w := range want {
		c, err := db.Resume(id, store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c.Text(), w) {
			t.Fatalf("session %s resumes to other bytes after the vacuum", id)
		}
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("verify after vacuum: %v %v", err, rep.Problems)
	}
}

// TestPrune_ArchiveResumesToTheSameBytes archives a fork and its parent's
// sibling before removing them: the archive file verifies and resumes to
// the same bytes; the fork's parent, which stays, is copied with it.
func TestPrune_ArchiveResumesToTheSameBytes(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "strata.db"), store.Options{Create: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bigSession(t, db, "p", 100)
	bigSession(t, db, "other", 50)
	if _, err := db.Fork("p", store.Latest, "f"); err != nil {
		t.Fatal(err)
	}
	bigSession(t, db, "f", 30)
	archive := filepath.Join(dir, "archive.db")
	res, err := db.Prune(store.PruneOptions{Sessions: []string{"f", "other"}, Archive: db.ArchiveFile(context.Background(), archive)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 2 {
		t.Fatalf("removed %+v", res.Removed)
	}
	ids, err := db.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "p" {
		t.Fatalf("sessions after prune: %v, want p", ids)
	}
	a, err := store.Open(archive, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ids, err = a.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 {
		t.Fatalf("archive holds %v, want f, other and f's parent p", ids)
	}
	// An archive onto an existing file is refused before anything goes.
	if _, err := db.Prune(store.PruneOptions{Sessions: []string{"p"}, Archive: db.ArchiveFile(context.Background(), archive)}); err == nil {
		t.Fatal("an archive onto an existing file was written")
	}
	if ids, _ := db.Sessions(); len(ids) != 1 {
		t.Fatalf("a failed archive removed sessions: %v", ids)
	}
}

// BenchmarkVerify_Fork verifies a database holding one session of 5,000,
// 10,000 and 20,000 events (parent), then the same with a fork of it
// (fork): verifying a fork replays its parent's raw log up to the fork
// point, so the fork's share, fork − parent, grows with the parent's size.
// docs/retention.md gives it per parent event at each size.
func BenchmarkVerify_Fork(b *testing.B) {
	for _, turns := range []int{1250, 2500, 5000} {
		db, err := store.Open(filepath.Join(b.TempDir(), "strata.db"), store.Options{Create: true, NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		bigSession(b, db, "src", turns)
		verify := func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rep, err := db.Verify(store.VerifyOptions{})
				if err != nil || !rep.OK() {
					b.Fatalf("verify: %v %v", err, rep.Problems)
				}
			}
		}
		b.Run(fmt.Sprintf("events=%d/parent", 4*turns), verify)
		if _, err := db.Fork("src", store.Latest, "dst"); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("events=%d/fork", 4*turns), verify)
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestVerify_ForkCheckpointMissing: a fork at a fallback whose checkpoint
// is gone is damage Verify names.
func TestVerify_ForkCheckpointMissing(t *testing.T) {
	db := dbtest.OpenUnverified(t, store.Options{NoSync: true})
	mustAppend(t, db, "src", forkTurn(0)...)
	res, err := db.ForkFallback("src", store.Latest, "f")
	if err != nil {
		t.Fatal(err)
	}
	if res.Checkpoint == 0 {
		t.Fatalf("the fallback fork of a raw session: %+v, want a checkpoint", res)
	}
	if err := store.PutRecord(db, "f", "ckpts", binary.BigEndian.AppendUint64(nil, res.Checkpoint), nil); err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(store.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("a fork at checkpoint %d, which is missing", res.Checkpoint)
	if !slices.ContainsFunc(rep.Problems, func(p store.Problem) bool { return strings.Contains(p.What, want) }) {
		t.Fatalf("Verify did not report %q: %v", want, rep.Problems)
	}
}
