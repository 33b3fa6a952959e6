package compaction

import (
	"context"
	"sync"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/errmark"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Background appends on the caller's goroutine and compacts on one of its
// own: each Append queues a Run of its session, and the caller goes on
// with its next append while the compaction plans and summarizes. A
// compaction's commit made while an append is in flight shares that
// append's transaction and fsync (store.Options.CommitWait), so a bulk
// load pays about one commit per append instead of one per append and one
// per compaction.
//
// Append is meant to be called from one goroutine (it is safe from
// several, but the order of reports across sessions is then that of the
// appends as they land). The compactions, and the order in which report
// sees them, are those of calling Run after each append on one goroutine: Runs go in the order of
// the appends (where compactions fall depends only on the events, not on
// when Run looks), and an Append to a session waits for the Run its
// previous Append queued when another session's Run is queued after that
// one — else that Run, seeing the new events too, reports what the next
// would have, in the same order. The first error stops the queue: later
// Runs are not made, and Append and Close return it.
type Background struct {
	c      *Compactor
	ctx    context.Context
	report func(session string, rs []Result)

	mu       sync.Mutex
	cond     *sync.Cond // signalled when a Run finishes or the worker stops
	queue    []string   // sessions waiting for their Run, in order
	last     string     // the session queued last
	pending  map[string]int
	inAppend int // Appends past their checks, whose Run is not queued yet
	closed   bool
	err      error
	done     chan struct{}
}

// ErrStopped marks the error Append returns when an earlier Run failed:
// the append was not made. The error is that Run's.
var ErrStopped = errors.New("compaction: stopped by an earlier compaction's error")

// Background starts a Background over c. report, if not nil, is called
// with the results of each Run, on the Background's goroutine, in the order
// the Runs were queued (so report must not call Append: an Append that
// waits for a Run would wait for itself). Close must be called to stop it.
func (c *Compactor) Background(ctx context.Context, report func(session string, rs []Result)) *Background {
	b := &Background{c: c, ctx: ctx, report: report, pending: map[string]int{}, done: make(chan struct{})}
	b.cond = sync.NewCond(&b.mu)
	go b.work()
	return b
}

// Append appends events to session (store.DB.Append) and queues a Run of
// session. It first waits for the Run a previous Append to session queued,
// unless no other session's Run is queued after it, so that reports come
// in the order a sequential caller would see them. When
// a Run has failed, it appends nothing and returns that Run's error, marked
// ErrStopped.
func (b *Background) Append(session string, events ...tier.Event) (store.AppendResult, error) {
	b.mu.Lock()
	// A Run of session still to come sees these events too. That changes
	// nothing when no other session's Run comes between (the results are
	// reported in the same order); otherwise wait for it.
	if b.pending[session] > 0 && b.last != session && b.err == nil {
		// No append comes from here before that Run is done: its
		// commits must not wait for one (store.Options.CommitWait).
		restore := b.c.db.NoCommitWait()
		for b.pending[session] > 0 && b.err == nil {
			b.cond.Wait()
		}
		restore()
	}
	err := b.err
	if err == nil && b.closed {
		b.mu.Unlock()
		return store.AppendResult{}, errors.New("compaction: Background is closed")
	}
	if err == nil {
		b.inAppend++ // Close waits for it, and for its Run
	}
	b.mu.Unlock()
	if err != nil {
		return store.AppendResult{}, errmark.Mark(err, ErrStopped)
	}
	res, err := b.c.db.Append(session, events...)
	b.mu.Lock()
	b.inAppend--
	if err == nil {
		b.queue = append(b.queue, session)
		b.last = session
		b.pending[session]++
	}
	b.cond.Broadcast()
	b.mu.Unlock()
	return res, err
}

// Close waits for the Appends in progress and every queued Run, and stops
// the Background. It returns the first error a Run met.
func (b *Background) Close() error {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
	restore := b.c.db.NoCommitWait() // no append comes from here any more
	<-b.done
	restore()
	return b.err
}

func (b *Background) work() {
	defer close(b.done)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for len(b.queue) == 0 && (!b.closed || b.inAppend > 0) {
			b.cond.Wait()
		}
		if len(b.queue) == 0 {
			return // closed, and no Append in progress
		}
		session := b.queue[0]
		b.queue = b.queue[1:]
		failed := b.err != nil
		b.mu.Unlock()
		var rs []Result
		var err error
		if !failed {
			rs, err = b.c.Run(b.ctx, session)
			if b.report != nil && len(rs) > 0 {
				b.report(session, rs)
			}
		}
		b.mu.Lock()
		if err != nil && b.err == nil {
			b.err = errors.Wrapf(err, "compacting session %q", session)
		}
		b.pending[session]--
		if b.pending[session] == 0 {
			delete(b.pending, session)
		}
		b.cond.Broadcast()
	}
}
