package store

import (
	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/tier"
)

// MaxAppendEvents is the most events one Append takes. An append is one
// write transaction, and a transaction holds everything it writes in memory
// until its commit — bbolt its dirty pages, PostgreSQL the statements of
// its batch — beside Append's own copy of the events: the memory of one
// call grows with its events, by about 1 KB per short event, and no
// batching inside one atomic call bounds it. The limit keeps one call
// within about a hundred MB of short events (docs/performance.md, Memory);
// callers with more events append them in several calls, as strata import
// and strata replay do.
const MaxAppendEvents = 100_000

// AppendResult says where an Append's events landed.
type AppendResult struct {
	First, Last uint64 // seqs of the first and last event appended
	Turn        uint64 // turn of the last event
}

// Append appends events to session's raw log, creating the session on its
// first event. It is atomic: all the events are stored or none is — also
// when the ledger refuses one of them, in which case the error is an
// *tier.EventError whose Index names the event. Seqs are assigned gapless
// (an event that carries a Seq must carry the next one); a user event without
// a Turn starts a new turn; an event without a Time gets the store's clock.
// A call of more than MaxAppendEvents events is refused whole with an error
// wrapping ErrTooManyEvents.
//
// Events that carry a Ref (the source record they were made from) are
// indexed by it in the same transaction: the events of one record must be
// consecutive, and an append carrying a ref the session holds already is
// refused whole, with a *RefError naming the session, the ref and the seqs
// that hold it (in a *tier.EventError naming the event). Two importers of
// one source store each of its records once; Snapshot.Ref tells which
// records are stored before appending.
//
// When Append returns nil the events are durable (unless Options.NoSync).
// When its commit fails at the disk's fsync, the error is marked ErrPoisoned:
// the events may or may not be stored (they can be visible to readers), and
// the DB refuses every later write until it is reopened.
// Appends from many goroutines are group-committed: one write transaction,
// and one fsync, carries every append waiting at the time. An append refused
// as bad input, or because the records it must read are damaged (ErrCorrupt),
// fails alone: the others in its group commit go on.
func (db *DB) Append(session string, events ...tier.Event) (AppendResult, error) {
	if err := CheckSession(session); err != nil {
		return AppendResult{}, err
	}
	if len(events) == 0 {
		return AppendResult{}, nil
	}
	if db.opts.ReadOnly {
		return AppendResult{}, ErrReadOnly
	}
	if len(events) > MaxAppendEvents {
		return AppendResult{}, errors.WithHintf(errors.Wrapf(ErrTooManyEvents, "session %q: %d events, limit %d (store.MaxAppendEvents)",
			tier.TruncateUTF8(session, 128), len(events), MaxAppendEvents), "append them in calls of at most %d events", MaxAppendEvents)
	}
	lim := db.opts.limits()
	// The events as given, and room for the copy each run of the write
	// transaction assigns seqs and turns in (writeReq.work).
	buf := make([]tier.Event, 2*len(events))
	evs := buf[:len(events):len(events)]
	now := int64(0)
	for i := range events {
		e := events[i]
		e.Opener, e.PriorFailure = 0, 0 // the store sets them
		if err := e.Check(lim); err != nil {
			ee := err.(*tier.EventError)
			ee.Index = i
			return AppendResult{}, ee
		}
		if e.Time == 0 {
			if now == 0 {
				now = db.opts.Clock().UnixNano()
			}
			e.Time = now
		}
		evs[i] = e
	}
	if err := db.acquire(); err != nil {
		return AppendResult{}, err
	}
	req := &writeReq{session: session, events: evs, work: buf[len(events):], done: make(chan struct{})}
	db.appending.Add(1)
	db.submit(req)
	db.appending.Add(-1)
	return req.res, req.err
}

// preparedAppend is an append validated against the session's state and
// ledger, ready to write.
type preparedAppend struct {
	session    string
	s          *sess // nil: a new session
	st         stateRec
	l          *tier.Ledger
	touched    []tier.Ref
	refs       []refRun // the source records the events were made from
	events     []tier.Event
	vals       [][]byte // the events' records
	head, turn uint64
	bytes      uint64 // the events' size in a resumed context (stateRec.Bytes)
}

// prepareAppend validates every event against the session's state and the
// ledger entries they touch, entirely in memory and without writing: an
// error leaves the transaction untouched. It sets the events' seqs, turns
// and what the ledger records on them, in events itself.
func (db *DB) prepareAppend(tx backend.Tx, session string, events []tier.Event) (*preparedAppend, error) {
	s, err := findSess(tx, session)
	if err != nil {
		return nil, err
	}
	var st stateRec
	if s != nil {
		if st, err = s.state(); err != nil {
			return nil, err
		}
	}

	// Load the ledger entries the events refer to. Most events refer to
	// none, and their append makes no ledger maps: a zero Ledger is empty.
	l := &tier.Ledger{}
	type ref = tier.Ref
	loaded := map[ref]bool{}
	var touched []ref
	for i := range events {
		e := &events[i]
		for _, r := range e.Refs() {
			if loaded[r] {
				continue
			}
			loaded[r] = true
			touched = append(touched, r)
			if s == nil {
				continue
			}
			if l.Open == nil {
				l = tier.NewLedger()
			}
			// Apply reads a stored entry only here: a keyed tool_result
			// that succeeds takes a failed disposition's seq as its prior
			// failure. That record is checked against the event it names
			// before its seq goes into the raw log; every other entry an
			// append touches is replaced whole or removed.
			read := r.Class == tier.ClassDisposition && e.Kind == tier.KindToolResult && !e.Failed
			if err := s.loadLedgerEntry(l, r, read); err != nil {
				return nil, err
			}
		}
	}

	refs, err := refRuns(s, session, st.Head, events)
	if err != nil {
		return nil, err
	}

	// Assign seq and turn, and apply.
	head, turn := st.Head, st.Turn
	var size uint64
	for i := range events {
		e := &events[i]
		next := head + 1
		if e.Seq != 0 && e.Seq != next {
			return nil, &tier.EventError{Index: i, Seq: e.Seq, Kind: e.Kind.String(), ID: e.ID, Key: e.Key,
				Err: tier.ErrSeqOrder, Detail: errors.Newf("the session's next seq is %d", next).Error()}
		}
		e.Seq = next
		switch {
		case e.Turn != 0:
			if e.Turn < turn {
				return nil, &tier.EventError{Index: i, Seq: e.Seq, Kind: e.Kind.String(), ID: e.ID, Key: e.Key,
					Err: tier.ErrTurnOrder, Detail: errors.Newf("turn %d after turn %d", e.Turn, turn).Error()}
			}
		case e.Kind == tier.KindUser:
			e.Turn = turn + 1
		default:
			e.Turn = turn
		}
		// The limits Event.Check applies to a given seq and turn, applied
		// to those counted on: a user's turn after turn 2^53 is refused as
		// the seq after 2^53 is, and nothing stored is past them.
		if e.Seq > tier.MaxSeq || e.Turn > tier.MaxTurn {
			return nil, &tier.EventError{Index: i, Seq: e.Seq, Kind: e.Kind.String(), ID: e.ID, Key: e.Key,
				Err: tier.ErrBadField, Detail: errors.Newf("seq %d, turn %d: over the limit %d (2^53)", e.Seq, e.Turn, uint64(tier.MaxSeq)).Error()}
		}
		if err := l.Apply(e); err != nil {
			ee := err.(*tier.EventError)
			ee.Index = i
			return nil, ee
		}
		head, turn = e.Seq, e.Turn
		size += uint64(checkpoint.EventTextLen(e)) // with its seq and turn, as a context renders it
	}
	// Encode here, so that a record the codec refuses fails this append
	// alone.
	vals := make([][]byte, len(events))
	for i := range events {
		rec := toEventRec(&events[i])
		v, err := encodeEvent(&rec)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	return &preparedAppend{session: session, s: s, st: st, l: l, touched: touched, refs: refs, events: events, vals: vals, head: head, turn: turn, bytes: size}, nil
}

// refRun is the events of an append made from one source record: its ref
// and their seqs, consecutive.
type refRun struct {
	ref         string
	first, last uint64
}

// refRuns returns the runs of events that carry a ref, the events to be
// appended after head. A ref the session holds already (s nil: a new
// session holds none), or one that comes back in the append after events
// of another, is refused with a *RefError in a *tier.EventError naming the
// event: the events of one record are appended once, together.
func refRuns(s *sess, session string, head uint64, events []tier.Event) ([]refRun, error) {
	var runs []refRun
	var at map[string]int // ref → its run
	for i := range events {
		e := &events[i]
		if e.Ref == "" {
			continue
		}
		seq := head + 1 + uint64(i)
		if n := len(runs); n > 0 && runs[n-1].ref == e.Ref && runs[n-1].last == seq-1 {
			runs[n-1].last = seq
			continue
		}
		first, last := uint64(0), uint64(0)
		if j, ok := at[e.Ref]; ok {
			first, last = runs[j].first, runs[j].last
		} else if s != nil {
			r, _, err := s.ref(e.Ref)
			if err != nil {
				return nil, err
			}
			first, last = r.First, r.Last // zero when not found
		}
		if first != 0 {
			return nil, &tier.EventError{Index: i, Seq: seq, Kind: e.Kind.String(), ID: e.ID, Key: e.Key,
				Err: &RefError{Session: session, Ref: e.Ref, First: first, Last: last}}
		}
		if at == nil {
			at = map[string]int{}
		}
		at[e.Ref] = len(runs)
		runs = append(runs, refRun{ref: e.Ref, first: seq, last: seq})
	}
	return runs, nil
}

// write stores a prepared append: its events, the ledger entries they
// touched and the session's new head.
func (p *preparedAppend) write(tx backend.Tx) (AppendResult, error) {
	s, st, l, events, head, turn := p.s, p.st, p.l, p.events, p.head, p.turn
	if s == nil {
		var err error
		if s, err = createSess(tx, p.session); err != nil {
			return AppendResult{}, err
		}
		if st, err = s.state(); err != nil {
			return AppendResult{}, err
		}
	}
	for i := range events {
		if err := s.b.PutEvent(events[i].Seq, p.vals[i]); err != nil {
			return AppendResult{}, err
		}
	}
	for _, r := range p.touched {
		if err := s.storeLedgerEntry(l, r); err != nil {
			return AppendResult{}, err
		}
	}
	for _, r := range p.refs {
		if err := s.put(backend.Refs, recRef, []byte(r.ref), &refRec{V: recordVersion, First: r.first, Last: r.last}); err != nil {
			return AppendResult{}, err
		}
	}
	res := AppendResult{First: st.Head + 1, Last: head, Turn: turn}
	st.Head, st.Turn = head, turn
	st.Bytes += p.bytes
	return res, s.putState(&st)
}

// loadLedgerEntry loads the ledger entry r names into l, if the session
// holds one; with text, its text too, which only the event that made it
// holds (ledgerText), and which that event confirms: its key and kind.
// Without text only the record is checked. An append reads the event only
// for the entry Apply reads (prepareAppend): each such read is one more
// in its transaction, a round trip on PostgreSQL.
func (s *sess) loadLedgerEntry(l *tier.Ledger, r tier.Ref, text bool) error {
	name, t := ledgerTable(r.Class)
	key := []byte(r.Name)
	var err error
	var found bool
	switch r.Class {
	case tier.ClassOpen:
		var v tier.Open
		if found, err = s.get(name, t, key, &v); found && err == nil {
			l.Open[r.Name] = v
		}
	case tier.ClassDisposition:
		var v tier.Disposition
		if found, err = s.get(name, t, key, &v); found && err == nil {
			if v.Reason, err = s.ledgerText(name, key, v.Reason, v.Seq, text, func(e *tier.Event) bool {
				return e.Kind == v.State && e.Kind.IsDisposition() && e.By == v.By ||
					v.State == tier.KindFailed && e.Kind == tier.KindToolResult && e.Failed && v.By == "" ||
					v.State == tier.StateSucceeded && e.Kind == tier.KindToolResult && !e.Failed && v.By == ""
			}); err == nil {
				l.Dispositions[r.Name] = v
			}
		}
	case tier.ClassConstraint:
		var v tier.Constraint
		if found, err = s.get(name, t, key, &v); found && err == nil {
			if v.Text, err = s.ledgerText(name, key, v.Text, v.Seq, text, func(e *tier.Event) bool {
				return e.Kind == tier.KindConstraint
			}); err == nil {
				l.Constraints[r.Name] = v
			}
		}
	case tier.ClassArtifact:
		var v tier.Artifact
		if found, err = s.get(name, t, key, &v); found && err == nil {
			if v.Text, err = s.ledgerText(name, key, v.Text, v.Seq, text, func(e *tier.Event) bool {
				return e.Kind == tier.KindArtifact
			}); err == nil {
				l.Artifacts[r.Name] = v
			}
		}
	}
	return err
}

// ledgerText returns the text of the ledger entry at key of table name,
// whose record holds stored and names the event at seq. The text is only in
// that event — every disposition, constraint and artifact is made by one
// event, and its text is that event's, so the record is a few dozen bytes
// where a policy text of kilobytes would take pages of its own — and the
// event must be one that makes this entry: its key, and a kind ok accepts.
// Without read it checks only the record (it holds no text, names an
// event) and returns "".
func (s *sess) ledgerText(name backend.Table, key []byte, stored string, seq uint64, read bool, ok func(*tier.Event) bool) (string, error) {
	if stored != "" {
		return "", corrupt(s.id, name.String(), key, errors.New("the record holds a text, which only its event holds"))
	}
	if seq == 0 {
		return "", corrupt(s.id, name.String(), key, errors.New("the record names no event"))
	}
	if !read {
		return "", nil
	}
	e, _, err := s.event(seq)
	if err != nil {
		return "", corrupt(s.id, name.String(), key, errors.Wrapf(err, "the record names event %d", seq))
	}
	if e.Key != string(key) || !ok(&e) {
		return "", corrupt(s.id, name.String(), key, errors.Newf("the record names event %d, a %s of key %q", seq, e.Kind, e.Key))
	}
	return e.Text, nil
}

func (s *sess) storeLedgerEntry(l *tier.Ledger, r tier.Ref) error {
	name, t := ledgerTable(r.Class)
	var v any
	var ok bool
	switch r.Class {
	case tier.ClassOpen:
		var x tier.Open
		x, ok = l.Open[r.Name]
		v = &x
	case tier.ClassDisposition:
		var x tier.Disposition
		x, ok = l.Dispositions[r.Name]
		x.Reason = "" // the event's text (ledgerText)
		v = &x
	case tier.ClassConstraint:
		var x tier.Constraint
		x, ok = l.Constraints[r.Name]
		x.Text = ""
		v = &x
	case tier.ClassArtifact:
		var x tier.Artifact
		x, ok = l.Artifacts[r.Name]
		x.Text = ""
		v = &x
	}
	if !ok {
		return s.b.Delete(name, []byte(r.Name))
	}
	return s.put(name, t, []byte(r.Name), v)
}
