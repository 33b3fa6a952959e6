package store

import (
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/tier"
)

// The group commit: every write — an append, or a compaction's commit —
// goes through one write transaction that carries every write waiting at
// the time, so that concurrent writers share one commit and one fsync.

// writeReq is one write waiting for the group commit: an append, or a
// compaction's commit (commit non-nil).
type writeReq struct {
	session string
	events  []tier.Event // as given to Append
	work    []tier.Event // room for a copy of events, for prepareAppend
	commit  *commitReq
	linger  bool // a commit made while appends were in flight (Options.CommitWait)
	res     AppendResult
	err     error
	done    chan struct{}
}

// submit commits req, alone or in a group commit, and returns when it is
// done. The caller holds db.acquire; submit releases it.
func (db *DB) submit(req *writeReq) {
	// Nothing handed to the committer and no commit in flight: commit
	// here, without handing the write to the committer goroutine and
	// waiting to be woken — two goroutine switches that cost a single
	// writer more than the CPU they take (about 10% of an fsync'd append
	// on this machine's disk). A write handed over and not yet committed
	// keeps later ones from going past it: they join its batch.
	// Not when the last group commit released other appenders: they are
	// coming back, and the committer gathers them (Options.GroupWait).
	if !req.linger && db.queued.Load() == 0 && db.active.Load() <= 1 && db.commitMu.TryLock() {
		db.commitBatch([]*writeReq{req}, false)
		db.commitMu.Unlock()
		db.release()
		return
	}
	db.queued.Add(1)
	if req.commit == nil {
		db.queuedApp.Add(1)
	}
	_ = hook("queued") // a step tests wait on; it cannot fail
	db.writes <- req
	db.release()
	<-req.done
}

// committer is the group commit loop: it takes the first waiting write
// (an append or a compaction's commit), then every other one already queued
// (up to MaxBatch), and commits them in one write transaction. Concurrent
// writers share fsyncs; a single writer commits its writes itself (submit),
// and pays no delay.
func (db *DB) committer() {
	defer close(db.stopped)
	batch := make([]*writeReq, 0, db.opts.MaxBatch)
	wait := time.NewTimer(time.Hour) // CommitWait's and gather's waits
	wait.Stop()
	for req := range db.writes {
		batch = db.fill(append(batch[:0], req))
		db.commitMu.Lock()
		batch = db.fill(batch) // and those that came while it waited
		if lingering(batch) && db.noWait.Load() == 0 {
			// Commits made while an append was in flight or had just
			// committed (mayLinger), and nothing else: the appending
			// goroutine is about to come back.
			_ = hook("linger") // a step tests wait on; it cannot fail
			wait.Reset(db.opts.CommitWait)
			select {
			case r, ok := <-db.writes:
				if ok {
					batch = db.fill(append(batch, r))
				}
				db.lingerPays.Store(ok && r.commit == nil)
			case <-db.nudge:
			case <-wait.C:
				db.lingerPays.Store(false)
			}
			wait.Stop()
		}
		batch = db.gather(batch, wait)
		db.commitBatch(batch, true)
		db.queued.Add(-int32(len(batch)))
		db.queuedApp.Add(-int32(appendsIn(batch)))
		db.commitMu.Unlock()
	}
}

// gather adds to batch the appenders the last group commit released as
// they come back with their next append, so that one commit carries them
// all (Options.GroupWait). Without it, 64 goroutines appending in a loop
// split into a commit of the first one back and a commit of the 63 that
// came while it synced: half the fsyncs carry one append. It waits while
// batch holds fewer appends than were active at the last commit — those
// it carried and those queued behind it — and only as long as they keep
// coming: each wait is GroupWait, or a quarter of the last commit's
// duration when that is shorter, so a wait that finds nobody costs little
// beside the commit itself. A single appender is never kept waiting: one
// is as many as were active.
//
// It waits before the write transaction begins, so that the transaction's
// first reads are every write's: on PostgreSQL one round trip takes every
// session's lock and reads its rows (backend.Prefetcher), where a write
// arriving after the first reads would need a round trip and statements
// of its own in the transaction, holding its locks meanwhile.
func (db *DB) gather(batch []*writeReq, t *time.Timer) []*writeReq {
	gap := min(db.opts.GroupWait, time.Duration(db.lastCommit.Load())/4)
	for gap > 0 && appendsIn(batch) < int(db.active.Load()) &&
		len(batch) < db.opts.MaxBatch && db.noWait.Load() == 0 {
		if more := db.fill(batch); len(more) > len(batch) {
			batch = more
			continue
		}
		_ = hook("gather") // a step tests wait on; it cannot fail
		t.Reset(gap)
		select {
		case r, ok := <-db.writes:
			t.Stop()
			if !ok {
				return batch
			}
			batch = db.fill(append(batch, r))
		case <-db.nudge:
			t.Stop()
			return batch
		case <-t.C:
			return batch
		}
	}
	return batch
}

// appendsIn counts the appends of batch.
func appendsIn(batch []*writeReq) (n int) {
	for _, r := range batch {
		if r.commit == nil {
			n++
		}
	}
	return n
}

// NoCommitWait turns off the waits of Options.CommitWait until restore is
// called, and ends a wait in progress: that commit goes at once. A
// goroutine that appends calls it before it blocks until a compaction is
// done, or stops appending — compaction.Background does, before an Append
// that must wait for its session's compaction and in Close — so that
// compaction commits do not wait for an append it will not make.
func (db *DB) NoCommitWait() (restore func()) {
	db.noWait.Add(1)
	select {
	case db.nudge <- struct{}{}:
	default:
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if db.noWait.Add(-1) == 0 {
				// No wait began meanwhile (the committer checks noWait):
				// a nudge left unread would cut a later one short.
				select {
				case <-db.nudge:
				default:
				}
			}
		})
	}
}

// fill adds to batch the writes already queued, up to MaxBatch.
func (db *DB) fill(batch []*writeReq) []*writeReq {
	for len(batch) < db.opts.MaxBatch {
		select {
		case r, ok := <-db.writes:
			if !ok {
				return batch
			}
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// lingering reports whether every write of batch is a commit that may wait
// for company (Options.CommitWait).
func lingering(batch []*writeReq) bool {
	for _, r := range batch {
		if !r.linger {
			return false
		}
	}
	return true
}

// batchReads returns what the writes of batch read first, for prefetch:
// each one's session; for an append, the ledger entries and refs its
// events name (prepareAppend); for a compaction's commit, what Plan.reads
// names.
func batchReads(batch []*writeReq) []backend.Read {
	var reads []backend.Read
	for _, req := range batch {
		if c := req.commit; c != nil {
			reads = append(reads, c.p.reads()...)
			continue
		}
		reads = append(reads, backend.Read{Session: req.session})
		for i := range req.events {
			e := &req.events[i]
			for _, r := range e.Refs() {
				t, _ := ledgerTable(r.Class)
				reads = append(reads, backend.Read{Session: req.session, Table: t, Key: []byte(r.Name)})
			}
			if e.Ref != "" {
				reads = append(reads, backend.Read{Session: req.session, Table: backend.Refs, Key: []byte(e.Ref)})
			}
		}
	}
	return reads
}

// errNothingWritten rolls back a batch whose writes were all refused.
var errNothingWritten = errors.New("store: nothing written")

// commitBatch commits batch in one write transaction, in order. A write
// refused before it wrote anything fails alone; so does a write that fails
// half-way — its session's records while encoding them, say: that rolls
// the transaction back, and the batch is committed again without it. An
// error of the transaction itself (its commit, a prefetch) fails every
// write of the batch. The transaction's function may run more than once (a
// backend retries a transaction another process's conflicted with): each
// run starts every write afresh — its result and error reset, an append
// from its events as given, a commit from its plan. queued says the batch
// came through the committer, its appends counted in queuedApp.
func (db *DB) commitBatch(batch []*writeReq, queued bool) {
	start := time.Now()
	live := batch
	var err error
	for {
		var culprit *writeReq
		culprit, err = db.writeBatch(live)
		if err == nil || culprit == nil || len(live) == 1 {
			break
		}
		// The write that failed fails alone; the others go again, in a
		// new transaction.
		culprit.fail(err)
		live = slices.DeleteFunc(slices.Clone(live), func(r *writeReq) bool { return r == culprit })
	}
	if errors.Is(err, errNothingWritten) {
		err = nil
	}
	if err == nil {
		appended, committed := false, false
		for _, req := range live {
			appended = appended || req.commit == nil && req.err == nil
			committed = committed || req.commit != nil
		}
		if appended {
			db.lastAppend.Store(time.Now().UnixNano())
			if committed {
				db.lingerPays.Store(true) // appends and commits meet: a pipeline
			}
		}
	}
	// For gather: how long a commit takes, and how many appenders are
	// active — this batch's and those queued behind it. A compaction's
	// commit queued meanwhile is not an appender: counted as one, it would
	// keep the next commit of a pipeline (one appender, one compactor)
	// waiting for an append that is not coming. Recorded before any writer
	// is released, so that the writer's next append sees it.
	db.lastCommit.Store(int64(time.Since(start)))
	n := int32(appendsIn(batch))
	pending := db.queuedApp.Load()
	if queued {
		pending -= n // the committer's batch is counted in queuedApp
	}
	db.active.Store(n + pending)
	for _, req := range batch {
		if err != nil && slices.Contains(live, req) {
			req.fail(err)
		}
		close(req.done)
	}
}

// fail sets err as req's outcome: nothing of it is written.
func (req *writeReq) fail(err error) {
	req.err, req.res = err, AppendResult{}
	if c := req.commit; c != nil {
		c.err, c.res, c.invalid = err, CommitResult{}, nil
	}
}

// writeBatch runs batch's writes in one write transaction and commits it.
// A write that fails half-way rolls the transaction back; it is returned as
// culprit, with its error. A write refused before it wrote anything — bad
// input (an *tier.EventError), a conflict, damage in its session's
// records — has its error and the rest of the batch goes on.
func (db *DB) writeBatch(batch []*writeReq) (culprit *writeReq, err error) {
	err = db.update(func(tx backend.Tx) error {
		culprit = nil
		if err := prefetch(tx, func() []backend.Read { return batchReads(batch) }); err != nil {
			return err
		}
		for _, req := range batch {
			req.err, req.res = nil, AppendResult{}
			if c := req.commit; c != nil {
				if err := db.commitIn(tx, c); err != nil {
					culprit = req
					return err
				}
				continue
			}
			// On a copy: a backend may run this function again (a
			// conflict with another process), from the events as given.
			p, err := db.prepareAppend(tx, req.session, req.work[:copy(req.work, req.events)])
			if err != nil {
				req.err = err
				continue
			}
			if req.res, err = p.write(tx); err != nil {
				// Only rolling back the whole transaction undoes it.
				culprit = req
				return err
			}
		}
		for _, req := range batch {
			if req.err == nil && (req.commit == nil || req.commit.err == nil) {
				return nil
			}
		}
		// Every write was refused before it wrote: roll back rather than
		// pay a commit (a meta page and two fsyncs) for nothing.
		return errNothingWritten
	})
	if err == nil || errors.Is(err, errNothingWritten) {
		culprit = nil
	}
	return culprit, err
}
