package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/errors"
	bolt "go.etcd.io/bbolt"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// Problem is one broken invariant found by Verify.
type Problem struct {
	Session string `json:"session,omitempty"`
	What    string `json:"what"`
}

// String returns the problem on one line.
func (p Problem) String() string {
	if p.Session == "" {
		return p.What
	}
	return fmt.Sprintf("session %q: %s", p.Session, p.What)
}

// Report is what Verify found.
type Report struct {
	Sessions int       `json:"sessions"`
	Events   uint64    `json:"events"`
	Nodes    int       `json:"nodes"`
	Problems []Problem `json:"problems"`
}

// OK reports whether no problem was found.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// VerifyOptions tunes Verify.
type VerifyOptions struct {
	// Progress, if set, is called after each session with the number of
	// sessions done and in all.
	Progress func(done, total int)

	// Events, if set, is called as the raw log is checked — every 64 Ki
	// events and after each session — with the events checked so far and
	// in all (the sum of the sessions' heads): progress through one long
	// session, which Progress cannot show.
	Events func(done, total uint64)
}

// eventsProgressEvery is how many raw events Verify checks between two
// calls of VerifyOptions.Events.
const eventsProgressEvery = 64 << 10

// Verify checks the whole database in one read transaction: bbolt's own
// consistency check, then every strata invariant — every record decodes
// (envelope, checksum, type, key), seqs are gapless, the ledger equals a
// replay of the raw log, the roots cover exactly the compacted prefix, every
// node's span and children are consistent, every valid marker's node is a
// root whose claims still pass marker.Validate against its raw span, every
// usable checkpoint's prefix is exactly the current roots before it, and the
// audit refers to existing checkpoints. Problems are reported, not returned
// as an error; the error is for failing to run at all.
func (db *DB) Verify(opts VerifyOptions) (Report, error) {
	var rep Report
	if err := db.acquire(); err != nil {
		return rep, err
	}
	defer db.release()
	err := db.view(func(tx *bolt.Tx) error {
		// tx.Check runs in a goroutine guard cannot protect: only once
		// preCheck found what it reads sound (see verify_guard.go).
		pre, safe, graph := db.preCheck(tx)
		rep.Problems = append(rep.Problems, pre...)
		if !graph {
			return nil // every further check walks pages with cursors
		}
		if safe {
			for err := range tx.Check() {
				rep.Problems = append(rep.Problems, Problem{What: "bbolt: " + err.Error()})
			}
		}
		// tx.Check touched every page: let them leave the resident set
		// (see Snapshot.ReleaseMapped), and so again as the raw log is read.
		releaseMapped(db.path)
		var ids []string
		err := forEachSession(tx, db.format, func(k []byte, b *bolt.Bucket) error {
			if b == nil {
				rep.Problems = append(rep.Problems, Problem{What: fmt.Sprintf("sessions: a value at key %q, not a session bucket", clipKey(k))})
				return nil
			}
			ids = append(ids, string(k))
			return nil
		})
		if err != nil {
			return err
		}
		if k := unseekable(sessionsBucket(tx, db.format)); k != nil {
			rep.Problems = append(rep.Problems, Problem{What: fmt.Sprintf("sessions: key %q is not found by a seek (a damaged branch page)", clipKey(k))})
		}
		if db.format != 1 {
			c := tx.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if !bytes.Equal(k, bucketMeta) && !bytes.HasPrefix(k, sessionPrefix) && !formatBucket(db.format, k) {
					rep.Problems = append(rep.Problems, Problem{What: fmt.Sprintf("a bucket %q that is neither meta nor a session", clipKey(k))})
				}
			}
		}
		rep.Sessions = len(ids)
		sessions := make([]*sess, len(ids))
		for i, id := range ids {
			ss, err := newSess(tx, db.format, id, lookupSession(tx, db.format, id))
			if err != nil {
				rep.Problems = append(rep.Problems, Problem{Session: id, What: err.Error()})
				continue
			}
			sessions[i] = ss
		}
		if db.format >= 3 {
			rep.Problems = append(rep.Problems, checkEventsBucket(tx, db.format, sessions)...)
		}
		var total, done uint64
		if opts.Events != nil {
			for _, ss := range sessions {
				if ss == nil || ss.b == nil {
					continue
				}
				if st, err := ss.state(); err == nil {
					total += st.Head
				}
			}
		}
		for i := range ids {
			if sessions[i] == nil {
				continue
			}
			v := &verifier{rep: &rep, ss: sessions[i], path: db.path}
			if opts.Events != nil {
				base := done
				v.progress = func(n uint64) { opts.Events(base+n, total) }
			}
			if err := guard(v.run); err != nil {
				v.fail("%v", err)
			}
			if opts.Events != nil {
				done += v.checked
				opts.Events(done, max(total, done))
			}
			if opts.Progress != nil {
				opts.Progress(i+1, len(ids))
			}
		}
		return nil
	})
	if err != nil {
		rep.Problems = append(rep.Problems, Problem{What: err.Error()})
	}
	return rep, nil
}

// checkEventsBucket checks format 3's events bucket as a whole: every key
// belongs to a session (by its number, which no two sessions share, and
// which is below the number meta gives the next session) and is
// an event's, a state's or an open call's; no key holds a bucket; a seek
// finds every key. What each session's keys hold is checked with the
// session.
func checkEventsBucket(tx *bolt.Tx, format int, sessions []*sess) []Problem {
	var out []Problem
	fail := func(format string, args ...any) {
		switch {
		case len(out) < maxProblems:
			out = append(out, Problem{What: fmt.Sprintf(format, args...)})
		case len(out) == maxProblems:
			out = append(out, Problem{What: "events bucket: more problems not shown"})
		}
	}
	next, err := decodeNext(format, tx.Bucket(bucketMeta).Get(keyNextSess3))
	if err != nil {
		fail("meta: %v", err)
	}
	owner := map[[4]byte]string{}
	for _, ss := range sessions {
		if ss == nil || !ss.numbered {
			continue // format 5: a cold session has no number
		}
		if other, ok := owner[ss.num]; ok {
			fail("sessions %q and %q have the same number %d", other, ss.id, binary.BigEndian.Uint32(ss.num[:]))
		}
		owner[ss.num] = ss.id
		if n := binary.BigEndian.Uint32(ss.num[:]); err == nil && n >= next {
			// The next session made would take this one's keys.
			fail("meta: the next session number %d is not above session %q's %d", next, ss.id, n)
		}
	}
	e := tx.Bucket(bucketEvents3)
	if e == nil {
		fail("the events bucket %q is missing", bucketEvents3)
		return out
	}
	if k := unseekable(e); k != nil {
		fail("events bucket: key %x is not found by a seek (a damaged branch page)", clipKey(k))
	}
	named := map[[4]byte]bool{} // the sessions whose id key is there
	c := e.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) < 5 {
			fail("events bucket: key %x is no session's", clipKey(k))
			continue
		}
		if _, ok := owner[[4]byte(k)]; !ok {
			fail("events bucket: key %x of session number %d, which no session has", clipKey(k), binary.BigEndian.Uint32(k))
			continue
		}
		switch {
		case v == nil:
			fail("events bucket: key %x holds a bucket", clipKey(k))
		case k[4] == eventPrefix && len(k) == 13:
		case k[4] == stateSuffix3 && len(k) == 6 && k[5] == idSuffix3:
			named[[4]byte(k)] = true
			if id := owner[[4]byte(k)]; string(v) != id {
				fail("events bucket: key %x names session %q, the number is %q's", clipKey(k), clipKey(v), id)
			}
		case format == 3 && k[4] == stateSuffix3 && (len(k) == 5 || len(k) > 6 && k[5] == openSuffix3):
		case format == 3:
			fail("events bucket: key %x is neither an event's, a state's nor an open call's", clipKey(k))
		default:
			fail("events bucket: key %x is neither an event's nor a session's id", clipKey(k))
		}
	}
	for _, ss := range sessions {
		if ss != nil && !ss.cold && !named[ss.num] {
			fail("events bucket: session %q has no id key (%x)", ss.id, append(ss.num[:], stateSuffix3, idSuffix3))
		}
	}
	if format >= 4 {
		checkJournal(tx, format, owner, fail)
	}
	return out
}

// formatBucket reports whether the root's key k is a bucket of format f's
// own, beside meta and the sessions.
func formatBucket(f int, k []byte) bool {
	switch string(k) {
	case string(bucketEvents3):
		return f >= 3
	case string(bucketHot4), string(bucketJournal4):
		return f >= 4
	}
	return false
}

// checkJournal checks format 4's hot bucket and journal as a whole: every
// key belongs to a session and is of a kind the format puts there, no key
// holds a bucket, a seek finds every key, every journal key is one the
// journal's sequence has given, and each session's record of its first
// journal entry is that entry's key. The events themselves are checked
// with their session.
func checkJournal(tx *bolt.Tx, format int, owner map[[4]byte]string, fail func(string, ...any)) {
	h, j := tx.Bucket(bucketHot4), tx.Bucket(bucketJournal4)
	if h == nil || j == nil {
		fail("the hot bucket %q or the journal %q is missing", bucketHot4, bucketJournal4)
		return
	}
	if k := unseekable(h); k != nil {
		fail("hot bucket: key %x is not found by a seek (a damaged branch page)", clipKey(k))
	}
	if k := unseekable(j); k != nil {
		fail("journal: key %x is not found by a seek (a damaged branch page)", clipKey(k))
	}
	firsts := map[[4]byte][]byte{} // h's record of each session's first journal key
	c := h.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		switch {
		case len(k) < 5:
			fail("hot bucket: key %x is no session's", clipKey(k))
			continue
		case owner[[4]byte(k)] == "":
			fail("hot bucket: key %x of session number %d, which no session has", clipKey(k), binary.BigEndian.Uint32(k))
			continue
		case v == nil:
			fail("hot bucket: key %x holds a bucket", clipKey(k))
		case k[4] == stateSuffix4 && len(k) == 5:
		case k[4] == journalSuffix4 && len(k) == 5:
			if len(v) != 8 {
				fail("hot bucket: key %x holds a journal key of %d bytes", clipKey(k), len(v))
			}
			firsts[[4]byte(k)] = v
		case k[4] == openSuffix3 && len(k) > 5:
		case format >= 5 && k[4] == coldHeadSuffix5 && len(k) == 5:
			if len(v) != 8 {
				fail("hot bucket: key %x holds a head of %d bytes", clipKey(k), len(v))
			}
		default:
			fail("hot bucket: key %x is neither a state, a journal key nor an open call", clipKey(k))
		}
	}
	if j.Sequence() > maxJournalKey {
		fail("journal: sequence %d is past any a journal reaches", j.Sequence())
	}
	seen := map[[4]byte]bool{}
	c = j.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		switch {
		case v == nil:
			fail("journal: key %x holds a bucket", clipKey(k))
			continue
		case len(k) != 8:
			fail("journal: key %x is not 8 bytes", clipKey(k))
			continue
		}
		if g := binary.BigEndian.Uint64(k); g == 0 || g > j.Sequence() || g > maxJournalKey {
			// The next append would write over it.
			fail("journal: key %d is past the journal's sequence %d", g, j.Sequence())
		}
		if len(v) < journalHeader {
			fail("journal: entry %d holds %d bytes", binary.BigEndian.Uint64(k), len(v))
			continue
		}
		num := [4]byte(v)
		if owner[num] == "" {
			fail("journal: entry %d of session number %d, which no session has", binary.BigEndian.Uint64(k), binary.BigEndian.Uint32(v))
			continue
		}
		if seen[num] {
			continue
		}
		seen[num] = true
		if first := firsts[num]; !bytes.Equal(first, k) {
			fail("hot bucket: session %q's first journal entry is %d, its record says %x", owner[num], binary.BigEndian.Uint64(k), clipKey(first))
		}
	}
	for num, first := range firsts {
		if !seen[num] {
			fail("hot bucket: session %q records journal entry %x, and has none", owner[num], first)
		}
	}
}

type verifier struct {
	rep   *Report
	ss    *sess
	st    stateRec
	nodes map[uint64]tier.Node
	roots []rootRec

	path     string         // the database file, for releaseMapped
	checked  uint64         // raw events checked
	progress func(n uint64) // nil, or told checked every eventsProgressEvery
}

// maxProblems bounds the problems reported per session: a badly damaged
// session would otherwise report one per record.
const maxProblems = 100

func (v *verifier) fail(format string, args ...any) {
	n := 0
	for _, p := range v.rep.Problems {
		if p.Session == v.ss.id {
			n++
		}
	}
	switch {
	case n < maxProblems:
		v.rep.Problems = append(v.rep.Problems, Problem{Session: v.ss.id, What: fmt.Sprintf(format, args...)})
	case n == maxProblems:
		v.rep.Problems = append(v.rep.Problems, Problem{Session: v.ss.id, What: "more problems not shown"})
	}
}

func (v *verifier) run() error {
	if err := CheckSession(v.ss.id); err != nil {
		v.fail("%v", err)
	}
	for _, name := range v.ss.subBuckets() {
		if v.ss.b.Bucket(name) == nil {
			return errors.Newf("bucket %s missing", name)
		}
	}
	v.checkSessionKeys()
	v.checkColdHead()
	var err error
	if v.st, err = v.ss.state(); err != nil {
		return err
	}
	v.rep.Events += v.st.Head
	if err := v.loadNodes(); err != nil {
		return err
	}
	if v.roots, err = v.ss.roots(^uint64(0)); err != nil {
		return err
	}
	v.checkSeeks()
	v.checkRawAndLedger()
	v.checkRoots()
	v.checkNodes()
	v.checkMarkers()
	v.checkCheckpoints()
	v.checkAudit()
	return nil
}

// checkSessionKeys reports the keys of the session's bucket that its
// format does not put there: the buckets of subBuckets, the state, and (in
// format 2) the events — those checked with the raw log.
func (v *verifier) checkSessionKeys() {
	names := map[string]bool{}
	for _, n := range v.ss.subBuckets() {
		names[string(n)] = true
	}
	// The values the bucket holds: the state, or in formats 3 to 5 the
	// session's number (checked by newSess; the state is in "e" or "h"),
	// and in format 5 while cold the state too.
	values := [][]byte{v.ss.stateKey()}
	switch {
	case v.ss.f >= 5 && v.ss.cold:
		values = [][]byte{stateKey2}
	case v.ss.f >= 3:
		values = [][]byte{keyNum3}
	}
	check := func(k, val []byte) {
		switch {
		case val == nil && names[string(k)]:
		case val != nil && slices.ContainsFunc(values, func(x []byte) bool { return bytes.Equal(k, x) }):
		default:
			v.fail("session bucket: unexpected key %x", clipKey(k))
		}
	}
	// The events (formats 2 and 5) are checked with the raw log.
	events := v.ss.f == 2 || v.ss.f >= 5
	c := v.ss.b.Cursor()
	for k, val := c.First(); k != nil && (!events || k[0] < eventPrefix); k, val = c.Next() {
		check(k, val)
	}
	if events {
		for k, val := c.Seek(stateKey2); k != nil; k, val = c.Next() {
			check(k, val)
		}
	}
}

// checkColdHead checks, of a hot session of format 5, h's record of the
// head it had when it turned hot: the seq of its last event in its own
// bucket, where the journal's first fold of it goes on from.
func (v *verifier) checkColdHead() {
	if v.ss.f < 5 || v.ss.cold {
		return
	}
	head, ok := coldHead(v.ss.h, v.ss.num)
	if !ok {
		v.fail("hot bucket: no record (%x) of the head the session had when it turned hot", append(v.ss.num[:], coldHeadSuffix5))
		return
	}
	c := v.ss.b.Cursor()
	k, _ := c.Seek(stateKey2)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	var last uint64
	if len(k) == 9 && k[0] == eventPrefix {
		last = binary.BigEndian.Uint64(k[1:])
	}
	if last != head {
		v.fail("hot bucket: the session turned hot at head %d, its last event in its own bucket is %d", head, last)
	}
}

// checkSeeks finds every key of every bucket of the session again by a
// seek, as reads do (Get, Seek). Iteration follows the leaves whatever the
// branch pages' keys say; a damaged branch key that still sorts can send a
// seek to the wrong leaf, so a read would miss a record that iteration — and
// bbolt's Check — sees.
func (v *verifier) checkSeeks() {
	if k := unseekable(v.ss.b); k != nil {
		v.fail("a key %q of the session bucket is not found by a seek (a damaged branch page)", clipKey(k))
	}
	for _, name := range v.ss.subBuckets() {
		if b := v.ss.b.Bucket(name); b != nil {
			// Buckets of values: a bucket inside one is damage, and
			// nothing reads it (the page walk does not go there).
			_ = b.ForEach(func(k, val []byte) error {
				if val == nil {
					v.fail("%s: key %x holds a bucket", name, clipKey(k))
				}
				return nil
			})
		}
		if k := unseekable(v.ss.b.Bucket(name)); k != nil {
			v.fail("%s: key %x is not found by a seek (a damaged branch page)", name, clipKey(k))
		}
	}
}

// unseekable returns the first key of b that a seek does not find, or nil.
func unseekable(b *bolt.Bucket) []byte {
	if b == nil {
		return nil
	}
	it, seek := b.Cursor(), b.Cursor()
	for k, _ := it.First(); k != nil; k, _ = it.Next() {
		if got, _ := seek.Seek(k); !bytes.Equal(got, k) {
			return k
		}
	}
	return nil
}

func (v *verifier) loadNodes() error {
	v.nodes = map[uint64]tier.Node{}
	b, err := v.ss.sub(bucketNodes)
	if err != nil {
		return err
	}
	return b.ForEach(func(k, raw []byte) error {
		var r nodeRec
		if err := decode(recNode, raw, &r); err != nil {
			v.fail("%v", corrupt(v.ss.id, "nodes", k, err))
			return nil
		}
		if u64val(k) != r.ID || len(k) != 8 {
			v.fail("nodes: key %x holds node %d", clipKey(k), r.ID)
			return nil
		}
		// Keep the structure only: the narrative and claims of every node
		// of a long session would hold the whole summary tree in memory;
		// validateRoot reads a root's claims again when it needs them.
		n := r.node()
		n.Narrative, n.Claims = "", tier.Claims{}
		v.nodes[r.ID] = n
		v.rep.Nodes++
		return nil
	})
}

// checkRawAndLedger replays the raw log: gapless seqs, records that decode,
// turns that never go back, openers as the ledger assigns them, the ledger
// at head equal to the stored one, and each root's claims valid against its
// raw span.
func (v *verifier) checkRawAndLedger() {
	l := tier.NewLedger()
	ri := 0 // next root to check
	var rb *tier.RequiredBuilder
	want := uint64(1)
	turn := uint64(0)
	err := v.ss.rawEvents(0, func(seq uint64, raw []byte) (bool, error) {
		if seq != want {
			return false, corrupt(v.ss.id, "l0", u64(seq), errors.Newf("stored where seq %d was expected", want))
		}
		e, err := decodeEvent(v.ss.id, seq, raw)
		if err != nil {
			return false, err
		}
		if e.Turn < turn {
			v.fail("l0: seq %d turn %d after turn %d", seq, e.Turn, turn)
		}
		turn = e.Turn
		stored, prior := e.Opener, e.PriorFailure
		if ri < len(v.roots) && seq == v.roots[ri].From {
			rb = tier.NewRequiredBuilder(l.OpenList())
		}
		if err := l.Apply(&e); err != nil {
			return false, errors.Newf("l0: seq %d does not replay: %v", seq, err)
		}
		if e.Opener != stored {
			v.fail("l0: seq %d records opener %d, the replay says %d", seq, stored, e.Opener)
		}
		if e.PriorFailure != prior {
			v.fail("l0: seq %d records a prior failure at seq %d, the replay says %d", seq, prior, e.PriorFailure)
		}
		if rb != nil {
			e.Opener, e.PriorFailure = stored, prior
			if err := rb.Add(e); err != nil {
				v.fail("l0: seq %d: %v", seq, err)
				rb = nil
			} else if seq == v.roots[ri].To {
				v.validateRoot(v.roots[ri], rb.Required())
				rb = nil
				ri++
			}
		}
		want++
		v.checked++
		if v.checked%eventsProgressEvery == 0 {
			releaseMapped(v.path)
			if v.progress != nil {
				v.progress(v.checked)
			}
		}
		return true, nil
	})
	if err != nil {
		v.fail("%v", err)
		return
	}
	if want-1 != v.st.Head {
		v.fail("state: head %d, l0 ends at %d", v.st.Head, want-1)
	}
	if turn != v.st.Turn {
		v.fail("state: turn %d, the last event's is %d", v.st.Turn, turn)
	}
	stored, err := v.ss.ledger()
	if err != nil {
		v.fail("%v", err)
		return
	}
	for _, d := range stored.Diff(l) {
		v.fail("ledger differs from a replay of the raw log: %s", d)
	}
}

func (v *verifier) validateRoot(r rootRec, req tier.Required) {
	if _, ok := v.nodes[r.Node]; !ok {
		return // reported by checkRoots
	}
	rec, err := v.ss.nodeRecord(r.Node)
	if err != nil {
		v.fail("%v", err)
		return
	}
	n := rec.node()
	if f := rec.facts(); f != nil {
		// What the next digest will extend: it must be what the raw span
		// requires.
		got, want := f.required(n.To), req
		want.Resolved, want.ResolvedInside = nil, nil
		if !got.Equal(&want) {
			v.fail("root node %d (seq %d..%d): its recorded facts differ from what its raw span requires", n.ID, n.From, n.To)
		}
	}
	err = marker.Validate(marker.Frame{Version: 0, RootDepth: n.Depth}, marker.Frame{Version: 0, RootDepth: n.Depth}, &req, n.Depth, &n.Claims)
	if err != nil {
		v.fail("root node %d (seq %d..%d): its claims no longer validate against the raw span: %v", n.ID, n.From, n.To, err)
		return
	}
	// A checked node carries the raw log's facts word for word: a text
	// changed in the file since is damage, never served as a claim.
	if want := req.Claims(); !n.Unchecked && !want.Equal(&n.Claims) {
		v.fail("root node %d (seq %d..%d): its claims' texts differ from the raw span's", n.ID, n.From, n.To)
	}
}

func (v *verifier) checkRoots() {
	next := uint64(1)
	for _, r := range v.roots {
		if r.From != next {
			v.fail("roots: a root starts at seq %d where %d was expected", r.From, next)
		}
		n, ok := v.nodes[r.Node]
		switch {
		case !ok:
			v.fail("roots: root at seq %d names node %d, which does not exist", r.From, r.Node)
		case !n.IsRoot():
			v.fail("roots: node %d is in the frame but folded into %d / superseded by %d", n.ID, n.Parent, n.SupersededBy)
		case n.From != r.From || n.To != r.To || n.Depth != r.Depth:
			v.fail("roots: entry for node %d says %s %d..%d, the node %s %d..%d", n.ID, r.Depth, r.From, r.To, n.Depth, n.From, n.To)
		}
		next = r.To + 1
	}
	if next-1 != v.st.CompactedTo {
		v.fail("roots cover seq 1..%d, the compacted prefix is 1..%d", next-1, v.st.CompactedTo)
	}
	if len(v.roots) != v.st.Roots {
		v.fail("state counts %d roots, the frame holds %d", v.st.Roots, len(v.roots))
	}
	inFrame := map[uint64]bool{}
	for _, r := range v.roots {
		inFrame[r.Node] = true
	}
	for _, id := range sortedIDs(v.nodes) {
		if n := v.nodes[id]; n.IsRoot() && !inFrame[id] {
			v.fail("node %d is neither folded nor superseded, yet not in the frame", id)
		}
	}
}

func (v *verifier) checkNodes() {
	for _, id := range sortedIDs(v.nodes) {
		n := v.nodes[id]
		if id > v.st.NextNode {
			v.fail("node %d: beyond the last id issued (%d)", id, v.st.NextNode)
		}
		if n.Depth < 1 || n.From < 1 || n.From > n.To || n.To > v.st.Head {
			v.fail("node %d: bad depth or span (%s, seq %d..%d, head %d)", id, n.Depth, n.From, n.To, v.st.Head)
			continue
		}
		if n.FrameVersion > v.st.FrameVersion {
			v.fail("node %d: made under frame version %d, the frame is at %d", id, n.FrameVersion, v.st.FrameVersion)
		}
		if n.Depth == 1 && len(n.Children) > 0 {
			v.fail("node %d: an L1 node with children", id)
		}
		if n.Depth > 1 {
			// Consecutive children, all one level below (a fold), or the
			// two roots a digest folded: the first of any depth, the node
			// at the deeper of its depth and one more than the second's.
			next, fold := n.From, true
			var depths []tier.Depth
			for _, cid := range n.Children {
				c, ok := v.nodes[cid]
				if !ok {
					v.fail("node %d: child %d does not exist", id, cid)
					break
				}
				if c.From != next {
					v.fail("node %d: child %d is seq %d..%d, expected from seq %d", id, cid, c.From, c.To, next)
				}
				next, fold = c.To+1, fold && c.Depth == n.Depth-1
				depths = append(depths, c.Depth)
			}
			digest := n.From == 1 && len(depths) == 2 && n.Depth == digestDepth(depths[0], depths[1])
			switch {
			case len(n.Children) == 0 || next-1 != n.To:
				v.fail("node %d: children cover up to seq %d, the node to %d", id, next-1, n.To)
			case !fold && !digest:
				v.fail("node %d: a %s node over children of depths %v", id, n.Depth, depths)
			}
		}
		if n.Parent != 0 {
			p, ok := v.nodes[n.Parent]
			if !ok || !slices.Contains(p.Children, id) {
				v.fail("node %d: parent %d does not list it as a child", id, n.Parent)
			}
		}
		if n.SupersededBy != 0 {
			s, ok := v.nodes[n.SupersededBy]
			if !ok || s.From != n.From || s.To != n.To || s.Depth != n.Depth {
				v.fail("node %d: superseded by %d, which does not cover the same span at the same depth", id, n.SupersededBy)
			}
		}
	}
}

func (v *verifier) checkMarkers() {
	seen := map[uint64]bool{}
	b, err := v.ss.sub(bucketMarkers)
	if err != nil {
		v.fail("%v", err)
		return
	}
	_ = b.ForEach(func(k, _ []byte) error {
		m, err := v.ss.marker(u64val(k))
		if err != nil {
			v.fail("%v", err)
			return nil
		}
		seen[m.ID] = true
		n, ok := v.nodes[m.Node]
		switch {
		case !ok || m.ID != m.Node:
			v.fail("marker %d: names node %d, which does not exist", m.ID, m.Node)
		case m.Depth != n.Depth || m.Boundary != n.To:
			v.fail("marker %d: says %s boundary %d, its node %s ends at %d", m.ID, m.Depth, m.Boundary, n.Depth, n.To)
		case m.Status == marker.StatusValid && !n.IsRoot():
			v.fail("marker %d: valid, but node %d is no longer a root (frame version %d)", m.ID, n.ID, v.st.FrameVersion)
		case m.Status == marker.StatusInvalid && n.IsRoot():
			v.fail("marker %d: invalid, but node %d is a root", m.ID, n.ID)
		case m.Status != marker.StatusValid && m.Status != marker.StatusInvalid:
			v.fail("marker %d: unknown status %d", m.ID, m.Status)
		case m.Status == marker.StatusInvalid && m.Reason == "":
			v.fail("marker %d: invalid without a reason", m.ID)
		}
		if m.FrameVersion > v.st.FrameVersion {
			v.fail("marker %d: emitted at frame version %d, the frame is at %d", m.ID, m.FrameVersion, v.st.FrameVersion)
		}
		return nil
	})
	for _, id := range sortedIDs(v.nodes) {
		if !seen[id] {
			v.fail("node %d has no marker", id)
		}
	}
}

func (v *verifier) checkCheckpoints() {
	index := map[uint64]uint64{} // checkpoint id → seq, from ckvalid
	if b, err := v.ss.sub(bucketCkValid); err == nil {
		_ = b.ForEach(func(k, raw []byte) error {
			var r indexRec
			if len(k) != 16 || decode(recIndex, raw, &r) != nil || r.ID != u64val(k[8:]) {
				v.fail("ckvalid: bad entry at key %x", clipKey(k))
				return nil
			}
			index[r.ID] = u64val(k[:8])
			return nil
		})
	}
	atZero := false
	b, err := v.ss.sub(bucketCkpts)
	if err != nil {
		v.fail("%v", err)
		return
	}
	_ = b.ForEach(func(k, _ []byte) error {
		c, err := v.ss.checkpoint(u64val(k))
		if err != nil {
			v.fail("%v", err)
			return nil
		}
		if c.ID != u64val(k) || c.ID > v.st.NextCk {
			v.fail("checkpoint at key %d holds id %d (last issued %d)", u64val(k), c.ID, v.st.NextCk)
		}
		seq, indexed := index[c.ID]
		delete(index, c.ID)
		switch c.Status {
		case checkpoint.StatusValid:
			if !indexed || seq != c.Seq {
				v.fail("checkpoint %d: usable but not indexed at its seq %d", c.ID, c.Seq)
			}
			if c.Seq == 0 {
				atZero = true
			}
			if c.Seq > v.st.CompactedTo {
				v.fail("checkpoint %d: at seq %d, past the compacted prefix (1..%d)", c.ID, c.Seq, v.st.CompactedTo)
			}
			var want []uint64
			for _, r := range v.roots {
				if r.To <= c.Seq {
					want = append(want, r.Node)
				}
			}
			if !slices.Equal(want, c.Prefix) {
				v.fail("checkpoint %d: usable, but its prefix %v is not the current roots up to seq %d %v", c.ID, c.Prefix, c.Seq, want)
			}
		case checkpoint.StatusInvalid:
			if indexed {
				v.fail("checkpoint %d: invalid but indexed as usable", c.ID)
			}
			if c.Reason == "" {
				v.fail("checkpoint %d: invalid without a reason", c.ID)
			}
		default:
			v.fail("checkpoint %d: unknown status %d", c.ID, c.Status)
		}
		return nil
	})
	for id := range index {
		v.fail("ckvalid indexes checkpoint %d, which is missing", id)
	}
	if !atZero {
		v.fail("no usable checkpoint at seq 0")
	}
}

func (v *verifier) checkAudit() {
	b, err := v.ss.sub(bucketAudit)
	if err != nil {
		v.fail("%v", err)
		return
	}
	_ = b.ForEach(func(k, raw []byte) error {
		var r auditRec
		if err := decode(recAudit, raw, &r); err != nil {
			v.fail("%v", corrupt(v.ss.id, "audit", k, err))
			return nil
		}
		if r.ID != u64val(k) || r.ID > v.st.NextAudit {
			v.fail("audit: key %d holds record %d (last issued %d)", u64val(k), r.ID, v.st.NextAudit)
		}
		if _, err := v.ss.checkpoint(r.Checkpoint); err != nil {
			v.fail("audit %d: checkpoint %d: %v", r.ID, r.Checkpoint, err)
		}
		if len(r.Failures) == 0 {
			v.fail("audit %d: a refusal without a failed condition", r.ID)
		}
		return nil
	})
}

func sortedIDs(m map[uint64]tier.Node) []uint64 {
	out := make([]uint64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
