package compaction

import (
	"context"
	"sync"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/internal/errmark"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// DefaultBackgroundRuns is Options.BackgroundRuns's default.
const DefaultBackgroundRuns = 8

// Background appends on the caller's goroutine and compacts on goroutines
// of its own: each Append queues a Run of its session, and the caller goes
// on with its next append while the compaction plans and summarizes. Runs
// of different sessions are made at once, up to Options.BackgroundRuns of
// them, so that their commits share the store's group commits; a
// compaction's commit made while an append is in flight shares that
// append's transaction and fsync too (store.Options.CommitWait), so a bulk
// load pays about one commit per append instead of one per append and one
// per compaction.
//
// Append is meant to be called from one goroutine (it is safe from
// several, but the order of reports across sessions is then that of the
// appends as they land). The compactions, and the order in which report
// sees them, are those of calling Run after each append on one goroutine: a
// session's Runs go one at a time in the order of its appends (where
// compactions fall depends only on the events, not on when Run looks),
// their results are reported in the order the Runs were queued, whichever
// finishes first, and an Append to a session waits for the Run its
// previous Append queued when another session's Run is queued after that
// one — else that Run, seeing the new events too, reports what the next
// would have, in the same order. The first error stops it: Runs not begun
// by then are not made (those being made beside the failed one finish and
// are reported), and Append and Close return it. The Summarizer is called
// from several goroutines at once, for different sessions.
type Background struct {
	c      *Compactor
	ctx    context.Context
	report func(session string, rs []Result)
	runs   int // Runs made at once at most

	mu        sync.Mutex
	cond      *sync.Cond // signalled when a Run finishes or the Background stops
	queue     []*queued  // Runs not reported yet, in the order queued
	running   map[string]bool
	busy      int  // Runs being made
	reporting bool // a goroutine is calling report
	last      string
	pending   map[string]int // Runs queued and not finished, per session
	inAppend  int            // Appends past their checks, whose Run is not queued yet
	closed    bool
	err       error
	workers   sync.WaitGroup
}

// queued is a Run of session waiting to be made, being made, or made and
// waiting for the Runs queued before it to be reported.
type queued struct {
	session        string
	started, ended bool
	rs             []Result
}

// ErrStopped marks the error Append returns when an earlier Run failed:
// the append was not made. The error is that Run's.
var ErrStopped = errors.New("compaction: stopped by an earlier compaction's error")

// Background starts a Background over c. report, if not nil, is called
// with the results of each Run, on one of the Background's goroutines,
// one call at a time, in the order the Runs were queued (so report must
// not call Append: an Append that waits for a Run would wait for itself).
// Close must be called to stop it.
func (c *Compactor) Background(ctx context.Context, report func(session string, rs []Result)) *Background {
	runs := c.opts.BackgroundRuns
	if runs <= 0 {
		runs = DefaultBackgroundRuns
	}
	b := &Background{c: c, ctx: ctx, report: report, runs: runs, running: map[string]bool{}, pending: map[string]int{}}
	b.cond = sync.NewCond(&b.mu)
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
		b.queue = append(b.queue, &queued{session: session})
		b.last = session
		b.pending[session]++
		b.start()
	}
	b.cond.Broadcast()
	b.mu.Unlock()
	return res, err
}

// Close waits for the Appends in progress and every queued Run, and stops
// the Background. It returns the first error a Run met.
func (b *Background) Close() error {
	restore := b.c.db.NoCommitWait() // no append comes from here any more
	defer restore()
	b.mu.Lock()
	b.closed = true
	for b.inAppend > 0 {
		b.cond.Wait()
	}
	b.mu.Unlock()
	b.workers.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// start starts a worker when a Run can be made and fewer than runs are
// being made. The caller holds mu.
func (b *Background) start() {
	if b.busy < b.runs && b.next() != nil {
		b.busy++
		b.workers.Add(1)
		go b.work()
	}
}

// next returns the first Run not begun whose session has no Run being
// made, or nil. The caller holds mu.
func (b *Background) next() *queued {
	if b.err != nil {
		return nil
	}
	for _, q := range b.queue {
		if !q.started && !b.running[q.session] {
			return q
		}
	}
	return nil
}

// work makes Runs while there is one to make, and reports those made, in
// the order queued.
func (b *Background) work() {
	defer b.workers.Done()
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		q := b.next()
		if q == nil {
			b.busy--
			b.deliver()
			return
		}
		q.started = true
		b.running[q.session] = true
		b.start() // another Run may be made beside this one
		b.mu.Unlock()
		rs, err := b.c.Run(b.ctx, q.session)
		b.mu.Lock()
		if err != nil && b.err == nil {
			b.err = errors.Wrapf(err, "compacting session %q", q.session)
		}
		q.rs, q.ended = rs, true
		delete(b.running, q.session)
		if b.pending[q.session]--; b.pending[q.session] == 0 {
			delete(b.pending, q.session)
		}
		b.cond.Broadcast()
		b.deliver()
	}
}

// deliver reports the Runs made at the head of the queue, unless another
// goroutine is doing so. When the Background has stopped on an error, the
// Runs never begun are dropped. The caller holds mu; deliver releases it
// while report runs.
func (b *Background) deliver() {
	if b.reporting {
		return
	}
	b.reporting = true
	for len(b.queue) > 0 {
		q := b.queue[0]
		if !q.ended {
			if q.started || b.err == nil {
				break
			}
			// Never to be made: the Background stopped.
			if b.pending[q.session]--; b.pending[q.session] == 0 {
				delete(b.pending, q.session)
			}
		}
		b.queue = b.queue[1:]
		if b.report != nil && len(q.rs) > 0 {
			b.mu.Unlock()
			b.report(q.session, q.rs)
			b.mu.Lock()
		}
	}
	b.reporting = false
	b.cond.Broadcast()
}
