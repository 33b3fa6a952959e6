package store_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/internal/memback"
	"github.com/strata-go/strata/store"
)

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
