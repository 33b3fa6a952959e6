package store

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
)

// PruneOptions selects the sessions DB.Prune removes. Every criterion set
// must hold of a session for it to go (they narrow one another); at least
// one must be set.
type PruneOptions struct {
	// Sessions names sessions by id; an id the database does not hold is
	// ErrSessionNotFound.
	Sessions []string
	// OlderThan selects the sessions whose last event is older than
	// OlderThan before Now (a session without events, always).
	OlderThan time.Duration
	// KeepLast keeps the KeepLast sessions of the newest last events and
	// selects the rest (0: not a criterion).
	KeepLast int
	// Now is the clock OlderThan is measured on (nil: time.Now).
	Now func() time.Time
	// DryRun selects and reports, and removes nothing.
	DryRun bool
	// Archive, when set, is called with the sessions about to be removed
	// before any is: Prune removes nothing when it returns an error.
	// ArchiveFile makes one.
	Archive func(ids []string) error
}

// PruneResult is what Prune removed, or with DryRun would remove, and what
// it kept because forks depend on it.
type PruneResult struct {
	Removed []Pruned
	Held    []Held
}

// Pruned is one session Prune removes, and why it was selected.
type Pruned struct {
	Session string
	Why     string
}

// Held is a selected session Prune keeps: forks that stay read its raw
// log.
type Held struct {
	Session string
	Forks   []string
}

// HeldError is returned by Prune when a session named in
// PruneOptions.Sessions is held by forks that stay; its cause is
// ErrForkHeld. Nothing is removed.
type HeldError struct{ Held []Held }

func (e *HeldError) Error() string {
	var b strings.Builder
	for i, h := range e.Held {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "session %q is held by its forks %s", h.Session, strings.Join(h.Forks, ", "))
	}
	return "store: prune: " + b.String()
}

// Unwrap returns ErrForkHeld.
func (e *HeldError) Unwrap() error { return ErrForkHeld }

// candidate is a session and what selection reads of it.
type candidate struct {
	id     string
	last   int64 // the time of its last event, Unix ns (0: none)
	parent string
}

// Prune removes whole sessions selected by opts, never one a fork that
// stays depends on (a fork reads its parent's raw log up to its fork
// point): a selected session that has such forks is held, and reported
// with them. Each session is removed in a transaction of its own, forks
// before their parents, so that a crash leaves every session whole or gone
// and no fork without its parent. A session named by id that is held is a
// *HeldError and nothing is removed.
func (db *DB) Prune(opts PruneOptions) (res PruneResult, err error) {
	if len(opts.Sessions) == 0 && opts.OlderThan <= 0 && opts.KeepLast <= 0 {
		return res, errors.WithHint(errors.New("store: prune: no session selected"), "name sessions, or give an age or a number of sessions to keep")
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	var all []candidate
	var forks map[string][]string
	err = db.View(func(s *Snapshot) error {
		ids, err := s.Sessions()
		if err != nil {
			return err
		}
		for _, id := range ids {
			c, err := s.candidate(id)
			if err != nil {
				return err
			}
			all = append(all, c)
		}
		forks, err = s.Forks()
		return err
	})
	if err != nil {
		return res, err
	}
	selected := map[string]string{} // id: why
	for _, c := range all {
		selected[c.id] = ""
	}
	why := func(id, w string) {
		if _, ok := selected[id]; ok {
			if selected[id] != "" {
				w = selected[id] + ", " + w
			}
			selected[id] = w
		}
	}
	if len(opts.Sessions) > 0 {
		named := map[string]bool{}
		for _, id := range opts.Sessions {
			if _, ok := selected[id]; !ok {
				return res, errors.Wrapf(ErrSessionNotFound, "%q", id)
			}
			named[id] = true
		}
		for _, c := range all {
			if named[c.id] {
				why(c.id, "named")
			} else {
				delete(selected, c.id)
			}
		}
	}
	if opts.OlderThan > 0 {
		cut := now().Add(-opts.OlderThan).UnixNano()
		for _, c := range all {
			if c.last < cut {
				why(c.id, "last event "+lastEvent(c.last)+", older than "+opts.OlderThan.String())
			} else {
				delete(selected, c.id)
			}
		}
	}
	if opts.KeepLast > 0 {
		byNew := slices.Clone(all)
		sort.SliceStable(byNew, func(i, j int) bool { return byNew[i].last > byNew[j].last })
		for i, c := range byNew {
			if i < opts.KeepLast {
				delete(selected, c.id)
			} else {
				why(c.id, fmt.Sprintf("not among the %d of the newest last events", opts.KeepLast))
			}
		}
	}

	// A selected session is held while a fork of it stays.
	held := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for id := range selected {
			if held[id] {
				continue
			}
			for _, f := range forks[id] {
				if _, going := selected[f]; !going || held[f] {
					held[id], changed = true, true
					break
				}
			}
		}
	}
	var gone []string
	for id := range selected {
		if held[id] {
			var by []string
			for _, f := range forks[id] {
				if _, going := selected[f]; !going || held[f] {
					by = append(by, f)
				}
			}
			res.Held = append(res.Held, Held{Session: id, Forks: by})
		} else {
			gone = append(gone, id)
		}
	}
	sort.Slice(res.Held, func(i, j int) bool { return res.Held[i].Session < res.Held[j].Session })
	if len(opts.Sessions) > 0 && len(res.Held) > 0 {
		return PruneResult{Held: res.Held}, &HeldError{Held: res.Held}
	}
	// Forks before their parents: deeper first, then by id.
	parent := map[string]string{}
	for _, c := range all {
		parent[c.id] = c.parent
	}
	depth := func(id string) int {
		n := 0
		for p := parent[id]; p != ""; p = parent[p] {
			n++
		}
		return n
	}
	sort.Slice(gone, func(i, j int) bool {
		if di, dj := depth(gone[i]), depth(gone[j]); di != dj {
			return di > dj
		}
		return gone[i] < gone[j]
	})
	for _, id := range gone {
		res.Removed = append(res.Removed, Pruned{Session: id, Why: selected[id]})
	}
	if opts.DryRun || len(gone) == 0 {
		return res, nil
	}
	if opts.Archive != nil {
		if err := opts.Archive(gone); err != nil {
			return PruneResult{Held: res.Held}, errors.Wrap(err, "store: prune: archive")
		}
	}
	removed := res.Removed
	res.Removed = nil
	for _, p := range removed {
		if err := db.DeleteSession(p.Session); err != nil {
			return res, err
		}
		res.Removed = append(res.Removed, p)
	}
	return res, nil
}

func lastEvent(ns int64) string {
	if ns == 0 {
		return "none"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339)
}

// candidate reads what Prune selects session id by.
func (s *Snapshot) candidate(id string) (candidate, error) {
	ss, err := s.sess(id)
	if err != nil {
		return candidate{}, err
	}
	st, err := ss.state()
	if err != nil {
		return candidate{}, err
	}
	c := candidate{id: id, parent: st.Parent}
	if st.Head > 0 {
		e, _, err := ss.event(st.Head)
		if err != nil {
			return candidate{}, err
		}
		c.last = e.Time
	}
	return c, nil
}

// DeleteSession removes session id whole, in one transaction: its events,
// its records, its state. A session that forks depend on is a *HeldError
// (ErrForkHeld), read inside the same transaction.
func (db *DB) DeleteSession(id string) error {
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	return db.update(func(tx backend.Tx) error {
		del, ok := tx.(backend.SessionDeleter)
		if !ok {
			return errors.Newf("store: the backend cannot delete a session")
		}
		if _, err := openSess(tx, id); err != nil {
			return err
		}
		var by []string
		if err := tx.Sessions(func(other string) error {
			if other == id {
				return nil
			}
			ss, err := openSess(tx, other)
			if err != nil {
				return err
			}
			st, err := ss.state()
			if err != nil {
				return err
			}
			if st.Parent == id {
				by = append(by, other)
			}
			return nil
		}); err != nil {
			return err
		}
		if len(by) > 0 {
			return &HeldError{Held: []Held{{Session: id, Forks: by}}}
		}
		if err := hook("prune"); err != nil {
			return err
		}
		return del.DeleteSession(id)
	})
}

// ArchiveFile returns a PruneOptions.Archive that copies the sessions to
// be removed, with the parents their forks read, into a new database file
// at path (Snapshot.CopyFile: built beside it, fsynced, renamed into
// place), then opens it and checks that it verifies and that each session
// resumes there to the bytes it resumes to here.
func (db *DB) ArchiveFile(ctx context.Context, path string) func(ids []string) error {
	return func(ids []string) error {
		var want = map[string][]byte{}
		err := db.View(func(s *Snapshot) error {
			for _, id := range ids {
				c, err := s.Resume(id, Latest)
				if err != nil {
					return err
				}
				want[id] = c.Text()
			}
			// The copy takes the parents the forks read along.
			_, err := s.CopyFile(ctx, path, false, CopyOptions{Sessions: ids})
			return err
		})
		if err != nil {
			return err
		}
		adb, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			return errors.Wrapf(err, "store: archive %s", path)
		}
		defer adb.Close()
		rep, err := adb.Verify(VerifyOptions{})
		if err != nil {
			return errors.Wrapf(err, "store: archive %s", path)
		}
		if len(rep.Problems) > 0 {
			return errors.Newf("store: archive %s does not verify: %s", path, rep.Problems[0])
		}
		for _, id := range ids {
			c, err := adb.Resume(id, Latest)
			if err != nil {
				return errors.Wrapf(err, "store: archive %s", path)
			}
			if string(c.Text()) != string(want[id]) {
				return errors.Newf("store: archive %s: session %q resumes to other bytes than in the database", path, id)
			}
		}
		return nil
	}
}
