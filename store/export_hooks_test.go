package store

import (
	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/tier"
)

// SetTestHook sets the write-step hook (see hooks.go) and returns a func
// that clears it. Only for tests that are not parallel: the hook is
// process-wide.
func SetTestHook(f func(step string) error) (clear func()) {
	testHook.Store(&f)
	return func() { testHook.Store(nil) }
}

// GroupWrite is one write of a WriteGroup: an append of Events to Session,
// or, with Plan set, the commit of Summary for Plan.
type GroupWrite struct {
	Session string
	Events  []tier.Event
	Plan    *Plan
	Summary Summary
}

// GroupResult is the outcome of one GroupWrite.
type GroupResult struct {
	Append AppendResult
	Commit CommitResult
	Err    error
}

// WriteGroup commits ws as one group commit, in order, as the committer
// does when they are all waiting: the way to put an append and a commit in
// one batch without racing goroutines. Events must carry their Time.
func WriteGroup(db *DB, ws ...GroupWrite) []GroupResult {
	if err := db.acquire(); err != nil {
		panic(err)
	}
	defer db.release()
	batch := make([]*writeReq, len(ws))
	for i, w := range ws {
		batch[i] = &writeReq{session: w.Session, events: w.Events, work: make([]tier.Event, len(w.Events)), done: make(chan struct{})}
		if w.Plan != nil {
			batch[i].commit = db.newCommitReq(w.Plan, w.Summary, true, nil)
		}
	}
	db.commitMu.Lock()
	db.commitBatch(batch, false)
	db.commitMu.Unlock()
	out := make([]GroupResult, len(ws))
	for i, req := range batch {
		out[i] = GroupResult{Append: req.res, Err: req.err}
		if c := req.commit; c != nil {
			out[i] = GroupResult{Commit: c.res, Err: c.err}
			if c.err == nil && c.invalid != nil {
				out[i].Err = c.invalid
			}
		}
	}
	return out
}

// editNode rewrites node id of session's record as edit says, in one
// write transaction: through the backend, which seals it as its own, as a
// hand that fixes the checksum would.
func editNode(db *DB, session string, id uint64, edit func(r *nodeRec) error) error {
	return db.update(func(tx backend.Tx) error {
		ss, err := openSess(tx, session)
		if err != nil {
			return err
		}
		r, err := ss.nodeRecord(id)
		if err != nil {
			return err
		}
		if err := edit(&r); err != nil {
			return err
		}
		return ss.putNodeRecord(&r)
	})
}

// DropFacts removes the facts recorded with node id of session, as damage
// that still decodes would.
func DropFacts(db *DB, session string, id uint64) error {
	return editNode(db, session, id, func(r *nodeRec) error {
		if r.facts() == nil {
			return errors.Newf("node %d has no facts", id)
		}
		r.Facts, r.FactsInClaims = nil, false
		return nil
	})
}

// HasFacts reports whether node id of session has facts recorded.
func HasFacts(db *DB, session string, id uint64) (has bool, err error) {
	err = db.view(func(tx backend.Tx) error {
		ss, err := openSess(tx, session)
		if err != nil {
			return err
		}
		r, err := ss.nodeRecord(id)
		has = r.facts() != nil
		return err
	})
	return has, err
}

// SpoilFacts drops the dispositions from the facts recorded with node id
// of session, as damage that still decodes would.
func SpoilFacts(db *DB, session string, id uint64) error {
	return editNode(db, session, id, func(r *nodeRec) error {
		f := r.facts()
		if f == nil || len(f.Dispositions) == 0 {
			return errors.Newf("node %d records no disposition", id)
		}
		spoilt := *f
		spoilt.Dispositions = nil
		r.Facts, r.FactsInClaims = &spoilt, false
		return nil
	})
}

// RewordClaims rewrites the texts of node id's constraint claims as
// rewrite says.
func RewordClaims(db *DB, session string, id uint64, rewrite func(string) string) error {
	return editNode(db, session, id, func(r *nodeRec) error {
		if len(r.Claims.Constraints) == 0 {
			return errors.Newf("node %d claims no constraint", id)
		}
		f := r.facts()
		r.Claims = r.Claims.Clone()
		for i := range r.Claims.Constraints {
			r.Claims.Constraints[i].Text = rewrite(r.Claims.Constraints[i].Text)
		}
		if f != nil {
			r.setFacts(f)
		}
		return nil
	})
}

// EditSizes rewrites the size counters of session's state (stateRec.Bytes,
// CompactedBytes, RefusedBytes: the events' size in a resumed context up to
// head, the compacted prefix's end and the last refused span's end) as edit
// says, in one write transaction through the backend, which seals the
// state as its own.
func EditSizes(db *DB, session string, edit func(head, compacted, refused *uint64)) error {
	return db.update(func(tx backend.Tx) error {
		ss, err := openSess(tx, session)
		if err != nil {
			return err
		}
		st, err := ss.state()
		if err != nil {
			return err
		}
		edit(&st.Bytes, &st.CompactedBytes, &st.RefusedBytes)
		return ss.putState(&st)
	})
}
