package storetest

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/store"
)

// resumeText returns session's resumed context at markerID, rendered with
// the session's name replaced by as: what a fork's context is compared by.
func resumeText(t *testing.T, db *store.DB, session string, markerID uint64, as string) []byte {
	t.Helper()
	ctx, err := db.Resume(session, markerID)
	if err != nil {
		t.Fatalf("resume %s at %d: %v", session, markerID, err)
	}
	ctx.Session = as
	return ctx.Text()
}

// forkResumesToParentBytes: a fork at a marker, latest or earlier, resumes
// to the parent's context at that marker byte for byte but for the name;
// then it appends and compacts across its fork point on its own, the
// parent untouched, and a fork of the fork does the same.
func forkResumesToParentBytes(t *testing.T, h Harness) {
	db := open(t, h)
	for i := range 6 {
		mustAppend(t, db, "src", turn(i)...)
	}
	first := compactSpan(t, db, "src", 8).Marker
	second := compactSpan(t, db, "src", 4).Marker

	for _, c := range []struct {
		dst    string
		marker uint64
		want   uint64
	}{{"latest", store.Latest, second}, {"early", first, first}} {
		res, err := db.Fork("src", c.marker, c.dst)
		if err != nil {
			t.Fatalf("fork at %d: %v", c.marker, err)
		}
		if res.Parent != "src" || res.Marker != c.want || res.At != 24 {
			t.Fatalf("fork %s: %+v, want parent src, marker %d, at 24", c.dst, res, c.want)
		}
		want := resumeText(t, db, "src", c.want, c.dst)
		if got := resumeText(t, db, c.dst, store.Latest, c.dst); !bytes.Equal(got, want) {
			t.Fatalf("fork %s resumes to\n%s\nwant\n%s", c.dst, got, want)
		}
	}
	before := resumeText(t, db, "src", store.Latest, "src")

	// The early fork compacts a span that straddles its fork point: the
	// parent's events 9..24 and its own 25..28.
	mustAppend(t, db, "early", turn(100)...)
	r := compactSpan(t, db, "early", 20)
	if r.Marker == 0 {
		t.Fatal("the fork's compaction across its fork point committed no marker")
	}
	ctx, err := db.Resume("early", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Source != checkpoint.SourceMarker || ctx.Boundary != 28 || ctx.Head != 28 {
		t.Fatalf("fork after its own compaction: source %s boundary %d head %d", ctx.Source, ctx.Boundary, ctx.Head)
	}
	if got := resumeText(t, db, "src", store.Latest, "src"); !bytes.Equal(got, before) {
		t.Fatal("compacting a fork changed its parent's context")
	}
	if n := len(Events(t, db, "early")); n != 28 {
		t.Fatalf("the fork reads %d events, want the parent's 24 and its own 4", n)
	}
	if n := len(Events(t, db, "src")); n != 24 {
		t.Fatalf("the parent holds %d events after its fork appended, want 24", n)
	}

	// A fork of the fork.
	if _, err := db.Fork("early", store.Latest, "grand"); err != nil {
		t.Fatal(err)
	}
	want := resumeText(t, db, "early", store.Latest, "grand")
	if got := resumeText(t, db, "grand", store.Latest, "grand"); !bytes.Equal(got, want) {
		t.Fatalf("fork of a fork resumes to\n%s\nwant\n%s", got, want)
	}
	mustAppend(t, db, "grand", turn(200)...)
	compactSpan(t, db, "grand", 4)
	if n := len(Events(t, db, "grand")); n != 32 {
		t.Fatalf("the fork of a fork reads %d events, want 32", n)
	}
	err = db.View(func(s *store.Snapshot) error {
		f, err := s.Fork("grand")
		if err != nil {
			return err
		}
		if f.Parent != "early" || f.At != 28 {
			return errors.Newf("grand's origin %+v", f)
		}
		forks, err := s.Forks()
		if err != nil {
			return err
		}
		if len(forks["src"]) != 2 || len(forks["early"]) != 1 {
			return errors.Newf("forks %v", forks)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// forkRefusesInvalidMarker: a marker a fold invalidated, and a session
// without a marker, are no point to fork at.
func forkRefusesInvalidMarker(t *testing.T, h Harness) {
	db := open(t, h)
	for i := range 4 {
		mustAppend(t, db, "s", turn(i)...)
	}
	if _, err := db.Fork("s", store.Latest, "f"); !errors.Is(err, store.ErrForkMarker) {
		t.Fatalf("fork of a session without a marker: %v, want ErrForkMarker", err)
	}
	a := compactSpan(t, db, "s", 8).Marker
	compactSpan(t, db, "s", 8)
	p, err := db.PlanFold("s", a, 2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, extractive(p)); err != nil {
		t.Fatal(err)
	}
	_, err = db.Fork("s", a, "f")
	var fe *store.ForkMarkerError
	if !errors.As(err, &fe) || !errors.Is(err, store.ErrForkMarker) || fe.Session != "s" || fe.Marker != a || fe.Reason == "" {
		t.Fatalf("fork at an invalidated marker: %v, want a ForkMarkerError naming s's marker %d", err, a)
	}
	if _, err := db.Fork("s", store.Latest, "s"); !errors.Is(err, store.ErrSessionExists) {
		t.Fatalf("fork onto an existing session: %v, want ErrSessionExists", err)
	}
	ids, err := db.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 {
		t.Fatalf("refused forks left sessions %v", ids)
	}
}

// pruneKeepsWhatForksNeed: a parent stays while a fork of it stays; named,
// it is refused with the forks that hold it; with its forks it goes, forks
// first; a dry run removes nothing.
func pruneKeepsWhatForksNeed(t *testing.T, h Harness) {
	db := open(t, h)
	for i := range 4 {
		mustAppend(t, db, "p", turn(i)...)
		mustAppend(t, db, "other", turn(i)...)
	}
	compactSpan(t, db, "p", 8)
	if _, err := db.Fork("p", store.Latest, "f"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, "f", turn(9)...)
	want := resumeText(t, db, "f", store.Latest, "f")

	_, err := db.Prune(store.PruneOptions{Sessions: []string{"p"}})
	var held *store.HeldError
	if !errors.As(err, &held) || !errors.Is(err, store.ErrForkHeld) || len(held.Held) != 1 || held.Held[0].Forks[0] != "f" {
		t.Fatalf("prune of a fork's parent: %v, want a HeldError naming f", err)
	}
	if err := db.DeleteSession("p"); !errors.Is(err, store.ErrForkHeld) {
		t.Fatalf("delete of a fork's parent: %v, want ErrForkHeld", err)
	}
	// Everything older than a day on a clock a year ahead: f is selected
	// with p, so nothing is held; a dry run removes nothing.
	future := func() time.Time { return time.Now().Add(365 * 24 * time.Hour) }
	res, err := db.Prune(store.PruneOptions{OlderThan: 24 * time.Hour, Now: future, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 3 || res.Removed[0].Session != "f" || len(res.Held) != 0 {
		t.Fatalf("dry run: %+v, want f first of three, nothing held", res)
	}
	if got := resumeText(t, db, "f", store.Latest, "f"); !bytes.Equal(got, want) {
		t.Fatal("a dry run changed a session")
	}
	// Keeping the newest session (f's last append is the newest) holds p.
	res, err = db.Prune(store.PruneOptions{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 1 || res.Removed[0].Session != "other" || len(res.Held) != 1 || res.Held[0].Session != "p" {
		t.Fatalf("prune keeping the newest: %+v, want other removed and p held by f", res)
	}
	if got := resumeText(t, db, "f", store.Latest, "f"); !bytes.Equal(got, want) {
		t.Fatal("pruning changed the fork")
	}
	res, err = db.Prune(store.PruneOptions{Sessions: []string{"p", "f"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Removed) != 2 || res.Removed[0].Session != "f" || res.Removed[1].Session != "p" {
		t.Fatalf("prune of a parent and its fork: %+v, want f then p", res)
	}
	ids, err := db.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 0 {
		t.Fatalf("sessions after pruning all: %v", ids)
	}
}

// forkAtFallback: a fork at a marker that is not valid, or of a session
// without one, happens only when asked (ForkFallback), at the checkpoint
// the parent's resume falls back to; the fork resumes to that fallback's
// bytes but for the name, then lives on its own. Asked at a valid marker,
// it is a fork at the marker.
func forkAtFallback(t *testing.T, h Harness) {
	db := open(t, h)
	for i := range 8 {
		mustAppend(t, db, "s", turn(i)...)
	}
	compactSpan(t, db, "s", 8)
	b := compactSpan(t, db, "s", 8).Marker
	c := compactSpan(t, db, "s", 8).Marker
	p, err := db.PlanFold("s", b, 2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(p, extractive(p)); err != nil {
		t.Fatal(err)
	}
	fallback, err := db.Resume("s", c)
	if err != nil {
		t.Fatal(err)
	}
	if fallback.Source != checkpoint.SourceCheckpoint || fallback.Reason == "" || len(fallback.Nodes) == 0 {
		t.Fatalf("resume of s at its folded marker %d: source %s, reason %q, %d roots; want a fallback with its prefix roots", c, fallback.Source, fallback.Reason, len(fallback.Nodes))
	}
	before := resumeText(t, db, "s", store.Latest, "s")

	res, err := db.ForkFallback("s", c, "f")
	if err != nil {
		t.Fatal(err)
	}
	if res.Checkpoint != fallback.Checkpoint || res.Marker != c || res.At != 32 || res.Boundary != fallback.Boundary || res.Reason != fallback.Reason {
		t.Fatalf("fork at the fallback: %+v, want checkpoint %d, marker %d, at 32, boundary %d", res, fallback.Checkpoint, c, fallback.Boundary)
	}
	want := resumeText(t, db, "s", c, "f")
	ctx, err := db.Resume("f", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if got := ctx.Text(); !bytes.Equal(got, want) {
		t.Fatalf("fork at the fallback resumes to\n%s\nwant\n%s", got, want)
	}
	if ctx.Fork == nil || *ctx.Fork != res.ForkInfo {
		t.Fatalf("the fork's context names its origin %+v, want %+v", ctx.Fork, res.ForkInfo)
	}

	// A fork of it at Latest is at what its latest resume serves: the
	// checkpoint, asked for.
	var fe *store.ForkMarkerError
	if _, err := db.Fork("f", store.Latest, "ff"); !errors.As(err, &fe) || fe.Session != "f" {
		t.Fatalf("fork at the latest marker of a fork at a fallback: %v, want a ForkMarkerError", err)
	}
	if _, err := db.ForkFallback("f", store.Latest, "ff"); err != nil {
		t.Fatal(err)
	}
	if got, want := resumeText(t, db, "ff", store.Latest, "ff"), resumeText(t, db, "f", store.Latest, "ff"); !bytes.Equal(got, want) {
		t.Fatalf("the fallback fork of a fork at a fallback resumes to\n%s\nwant\n%s", got, want)
	}

	// On its own: it appends and compacts past its fork point, and then
	// resumes from its own marker; the parent is untouched.
	mustAppend(t, db, "f", turn(100)...)
	mustAppend(t, db, "f", turn(101)...)
	if r := compactSpan(t, db, "f", 32-fallback.Boundary+4); r.Marker == 0 {
		t.Fatal("the fork's compaction across its fork point committed no marker")
	}
	ctx, err = db.Resume("f", store.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Source != checkpoint.SourceMarker || ctx.Head != 40 || ctx.Boundary != 36 {
		t.Fatalf("fork after its own compaction: source %s boundary %d head %d", ctx.Source, ctx.Boundary, ctx.Head)
	}
	if got := resumeText(t, db, "s", store.Latest, "s"); !bytes.Equal(got, before) {
		t.Fatal("compacting the fork changed its parent's context")
	}

	// A session without a marker: Fork refuses, naming no marker;
	// ForkFallback forks at the checkpoint its resume serves.
	for i := range 3 {
		mustAppend(t, db, "raw", turn(i)...)
	}
	_, err = db.Fork("raw", store.Latest, "g")
	if !errors.As(err, &fe) || fe.Session != "raw" || fe.Marker != 0 {
		t.Fatalf("fork of a session without a marker: %v, want a ForkMarkerError", err)
	}
	if _, err := db.ForkFallback("raw", store.Latest, "g"); err != nil {
		t.Fatal(err)
	}
	if got, want := resumeText(t, db, "g", store.Latest, "g"), resumeText(t, db, "raw", store.Latest, "g"); !bytes.Equal(got, want) {
		t.Fatalf("fork of a raw session resumes to\n%s\nwant\n%s", got, want)
	}

	// Asked at a valid marker, the fallback fork is the marker's.
	res, err = db.ForkFallback("s", store.Latest, "h")
	if err != nil {
		t.Fatal(err)
	}
	if res.Checkpoint != 0 || res.Marker == 0 {
		t.Fatalf("fallback fork at a valid marker: %+v, want a fork at the marker", res)
	}
	if got, want := resumeText(t, db, "h", store.Latest, "h"), resumeText(t, db, "s", store.Latest, "h"); !bytes.Equal(got, want) {
		t.Fatalf("fallback fork at a valid marker resumes to\n%s\nwant\n%s", got, want)
	}
}

// copyTakesAncestors: a copy of a fork takes the sessions whose raw logs
// it reads along, says so, and the copy resumes the fork to its bytes; a
// second copy finds them present.
func copyTakesAncestors(t *testing.T, h Harness) {
	src := open(t, h)
	for i := range 4 {
		mustAppend(t, src, "p", turn(i)...)
	}
	compactSpan(t, src, "p", 8)
	if _, err := src.Fork("p", store.Latest, "f"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, src, "f", turn(10)...)
	compactSpan(t, src, "f", 8)
	if _, err := src.Fork("f", store.Latest, "g"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, src, "g", turn(20)...)
	mustAppend(t, src, "other", turn(0)...)
	want := resumeText(t, src, "g", store.Latest, "g")

	dst := open(t, h)
	var res store.CopyResult
	copyG := func() {
		t.Helper()
		err := src.View(func(s *store.Snapshot) error {
			var err error
			res, err = s.Copy(context.Background(), dst, store.CopyOptions{Sessions: []string{"g"}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	copyG()
	if !slices.Equal(res.Sessions, []string{"f", "g", "p"}) || !slices.Equal(res.Ancestors, []string{"f", "p"}) {
		t.Fatalf("copy of a fork of a fork: sessions %v ancestors %v, want f, g, p with ancestors f, p", res.Sessions, res.Ancestors)
	}
	if got := resumeText(t, dst, "g", store.Latest, "g"); !bytes.Equal(got, want) {
		t.Fatalf("the copied fork resumes to\n%s\nwant\n%s", got, want)
	}
	if ids, err := dst.Sessions(); err != nil || len(ids) != 3 {
		t.Fatalf("the copy holds %v (%v), want p, f and g", ids, err)
	}
	copyG()
	if len(res.Sessions) != 0 || !slices.Equal(res.Present, []string{"f", "g", "p"}) || !slices.Equal(res.Ancestors, []string{"f", "p"}) {
		t.Fatalf("a second copy: %+v, want all three present", res)
	}
}
