package store

import (
	"crypto/sha256"
	"slices"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/tier"
)

// PlanKind says what a compaction plan makes.
type PlanKind uint8

// Plan kinds.
const (
	// PlanSpan summarizes the oldest uncompacted raw span into a new L1 root.
	PlanSpan PlanKind = 1
	// PlanFold folds K consecutive roots of depth d into one node of depth
	// d+1 that takes their place.
	PlanFold PlanKind = 2
	// PlanRecompact summarizes a root's span again (e.g. with a tighter
	// budget) into a node of the same depth that supersedes it.
	PlanRecompact PlanKind = 3
	// PlanDigest folds the first two roots, whatever their depths, into a
	// node over the prefix they cover, at the first root's depth or one
	// below the second's, whichever is deeper: what keeps the frame at a
	// bounded number of roots (PlanDigest).
	PlanDigest PlanKind = 4
)

// String names the kind.
func (k PlanKind) String() string {
	switch k {
	case PlanSpan:
		return "span"
	case PlanFold:
		return "fold"
	case PlanRecompact:
		return "recompact"
	case PlanDigest:
		return "digest"
	}
	return "plan(?)"
}

// Plan is a compaction planned in a read transaction: the span, the frame
// it was planned against, the raw events, and the claims the node must
// carry. A summarizer works from it with no transaction held; Commit then
// checks that nothing it relied on changed.
type Plan struct {
	Session      string
	Kind         PlanKind
	Depth        tier.Depth // depth of the node to make
	From, To     uint64     // the raw span; To is the marker's boundary
	FrameVersion uint64
	Replaces     []uint64    // roots the new node takes the place of
	Children     []tier.Node // fold: the roots folded; recompact: the old node's children
	Previous     *tier.Node  // recompact: the root being re-compacted
	Events       []tier.Event
	Required     tier.Required
	SpanHash     []byte
	Budget       int

	seal *planSeal // what the plan computed, out of the caller's reach
}

// planSeal is what a plan computed from the raw span, kept where the
// caller cannot change it. The raw log below the head never changes, so
// the claims a span requires — its events and the calls open before it —
// are those computed at plan time as long as the span's bytes are the same:
// Commit checks that, by hashing the span inside its transaction, and then
// need not decode it again.
type planSeal struct {
	db       *DB // the handle that planned: another database's log is another log
	kind     PlanKind
	session  string
	from, to uint64
	hash     []byte
	required tier.Required
	lastTurn uint64 // the turn of the span's last event
	bytes    uint64 // an L1 span's size in a resumed context (spanSize); 0 for another kind
}

// sealed returns a seal of what db planned, with a copy of req that shares
// no memory with it: the plan's Required is the caller's, and what the
// caller or a summarizer does to it changes nothing Commit validates
// against or commits (tier.Required.Clone).
func sealed(db *DB, kind PlanKind, session string, from, to uint64, hash []byte, req *tier.Required, lastTurn, bytes uint64) *planSeal {
	return &planSeal{db: db, kind: kind, session: session, from: from, to: to, hash: slices.Clone(hash), required: req.Clone(), lastTurn: lastTurn, bytes: bytes}
}

// PlanSpan plans an L1 node over the oldest uncompacted raw span, from the
// end of the compacted prefix to seq to, which the caller's policy chose
// (package compaction's Policy). It returns ErrNothingToCompact when to is
// not past the compacted prefix: another compaction got there first.
func (db *DB) PlanSpan(session string, to uint64, budget int) (*Plan, error) {
	return db.plan(session, false, func(ss *sess, st *stateRec) (*Plan, error) {
		if to <= st.CompactedTo {
			return nil, errors.Wrapf(ErrNothingToCompact, "seq %d is compacted already (1..%d)", to, st.CompactedTo)
		}
		if to > st.Head {
			return nil, errors.Newf("store: a span to seq %d, past the session's head %d", to, st.Head)
		}
		return &Plan{Kind: PlanSpan, Depth: 1, From: st.CompactedTo + 1, To: to}, nil
	}, budget)
}

// PlanFold plans a node of depth d+1 over k consecutive roots of depth d,
// the first of them root node first, which the caller's policy chose. It
// returns ErrConflict when they are no longer such roots: the frame changed
// since the policy looked.
func (db *DB) PlanFold(session string, first uint64, k int, budget int) (*Plan, error) {
	if k < 2 {
		return nil, errors.Wrapf(ErrNothingToCompact, "fold of %d roots", k)
	}
	return db.plan(session, true, func(ss *sess, st *stateRec) (*Plan, error) {
		roots, err := ss.roots(^uint64(0))
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(roots, func(r rootRec) bool { return r.Node == first })
		if i < 0 || i+k > len(roots) {
			return nil, errors.Wrapf(ErrConflict, "no %d roots from node %d", k, first)
		}
		run := roots[i : i+k]
		p := &Plan{Kind: PlanFold, Depth: run[0].Depth + 1, To: run[k-1].To}
		// The roots' nodes with the span they cover (readSpan).
		if err := prefetch(ss.tx, func() []backend.Read {
			reads := ss.spanReads(run[0].From, run[k-1].To)
			for _, r := range run {
				reads = append(reads, backend.Read{Session: ss.id, Table: backend.Nodes, Key: u64(r.Node)})
			}
			return reads
		}); err != nil {
			return nil, err
		}
		for _, r := range run {
			if r.Depth != run[0].Depth {
				return nil, errors.Wrapf(ErrConflict, "roots from node %d are not all %s", first, run[0].Depth)
			}
			n, err := ss.node(r.Node)
			if err != nil {
				return nil, err
			}
			p.Children = append(p.Children, n)
			p.Replaces = append(p.Replaces, n.ID)
		}
		p.From = p.Children[0].From
		return p, nil
	}, budget)
}

// PlanDigest plans a digest, or returns ErrNothingToCompact when the frame
// holds fewer than two roots: a node over the first two roots, whatever
// their depths, that takes their place — at the first root's depth, or one
// deeper than the second, whichever is deeper (a digest absorbs the roots
// after it at its own depth).
// Together with folds, digests keep the frame — and so a resumed context —
// at a bounded number of roots however long the session runs.
//
// The first root covers a prefix 1..a, so the digest covers 1..b. What it
// must claim — the Required of 1..b — is composed (tier.ExtendPrefix) from
// the facts the store recorded with the first root, computed from the raw
// log when that root was committed, and from the raw events of the second
// root's span: a digest reads that span, never the prefix again. The
// plan's Events are the second root's span; its Children are both roots.
// When a digest is due is the caller's policy (package compaction's
// Policy.MaxRoots).
func (db *DB) PlanDigest(session string, budget int) (*Plan, error) {
	return db.plan(session, true, func(ss *sess, st *stateRec) (*Plan, error) {
		roots, err := ss.roots(^uint64(0))
		if err != nil {
			return nil, err
		}
		if len(roots) < 2 {
			return nil, errors.Wrapf(ErrNothingToCompact, "%d roots: nothing to digest", len(roots))
		}
		// Both roots' nodes with the raw events of the second's span.
		if err := prefetch(ss.tx, func() []backend.Read {
			return []backend.Read{{Session: ss.id, Table: backend.Nodes, Key: u64(roots[0].Node)},
				{Session: ss.id, Table: backend.Nodes, Key: u64(roots[1].Node)},
				{Session: ss.id, From: roots[1].From, To: roots[1].To}}
		}); err != nil {
			return nil, err
		}
		first, err := ss.nodeRecord(roots[0].Node)
		if err != nil {
			return nil, err
		}
		second, err := ss.node(roots[1].Node)
		if err != nil {
			return nil, err
		}
		if first.From != 1 || second.From != first.To+1 {
			return nil, corrupt(ss.id, "roots", u64(second.From), errors.Newf("first roots cover %d..%d and %d..%d", first.From, first.To, second.From, second.To))
		}
		d, err := ss.digestSpan(st, &first, second.To)
		if err != nil {
			return nil, err
		}
		return &Plan{Kind: PlanDigest, Depth: digestDepth(first.Depth, second.Depth), From: 1, To: second.To,
			Replaces: []uint64{first.ID, second.ID}, Children: []tier.Node{first.node(), second},
			Events: d.events, Required: d.required, SpanHash: d.hash,
			seal: sealed(db, PlanDigest, session, first.To+1, second.To, d.raw, &d.required, d.events[len(d.events)-1].Turn, 0)}, nil
	}, budget)
}

// digestDepth is the depth of a digest of roots of depths first and
// second: the first root's, when it is the deeper — a digest absorbs the
// roots after it at its own depth, so depths stay those of the folds — or
// one more than the second's.
func digestDepth(first, second tier.Depth) tier.Depth { return max(first, second+1) }

// digest is what a digest over the prefix of first extended to seq to
// requires.
type digest struct {
	events   []tier.Event // first.To+1..to
	required tier.Required
	raw      []byte // sha256 of the stored events first.To+1..to
	hash     []byte // the digest's span hash: digestHash(first.SpanHash, raw)
}

// digestSpan computes what a digest extending first's prefix 1..a to seq
// to requires, from first's facts and the raw events a+1..to, on top of what
// those facts record open.
func (ss *sess) digestSpan(st *stateRec, first *nodeRec, to uint64) (digest, error) {
	f, err := ss.factsOf(first)
	if err != nil {
		return digest{}, err
	}
	prefix := f.required(first.To)
	next, err := ss.readSpanAfter(st, first.To+1, to, tier.Before{Open: prefix.Unresolved, Plan: prefix.Plan, PlanAt: prefix.PlanAt}, first.ID)
	if err != nil {
		return digest{}, err
	}
	req, err := tier.ExtendPrefix(&prefix, first.Claims.Resolved, &next.required)
	if err != nil {
		return digest{}, corrupt(ss.id, "nodes", u64(first.ID), err)
	}
	return digest{events: next.events, required: req, raw: next.hash, hash: digestHash(first.SpanHash, next.hash)}, nil
}

// digestHash is a digest's span hash: the first root's span hash chained
// with that of the raw events after it, so that no digest hashes the prefix
// again.
func digestHash(first, raw []byte) []byte {
	h := sha256.New()
	h.Write([]byte("strata digest\x00"))
	h.Write(first)
	h.Write(raw)
	return h.Sum(nil)
}

// PlanRecompact plans a new node over the span of root node, to supersede
// it (typically with a tighter budget).
func (db *DB) PlanRecompact(session string, node uint64, budget int) (*Plan, error) {
	return db.plan(session, false, func(ss *sess, st *stateRec) (*Plan, error) {
		n, err := ss.node(node)
		if err != nil {
			return nil, err
		}
		if !n.IsRoot() {
			return nil, errors.Wrapf(ErrNothingToCompact, "node %d is not a root", node)
		}
		p := &Plan{Kind: PlanRecompact, Depth: n.Depth, From: n.From, To: n.To, Previous: &n, Replaces: []uint64{n.ID}}
		for _, c := range n.Children {
			cn, err := ss.node(c)
			if err != nil {
				return nil, err
			}
			p.Children = append(p.Children, cn)
		}
		return p, nil
	}, budget)
}

// plan runs pick on session in a read transaction and reads the span of
// the plan it returns. With frame, pick reads the roots: they are read
// ahead with the session, in one round trip where reads are one.
func (db *DB) plan(session string, frame bool, pick func(*sess, *stateRec) (*Plan, error), budget int) (*Plan, error) {
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	var p *Plan
	err := db.view(func(tx backend.Tx) error {
		if err := prefetch(tx, func() []backend.Read {
			reads := []backend.Read{{Session: session}}
			if frame {
				reads = append(reads, backend.Read{Session: session, Table: backend.Roots, Scan: true})
			}
			return reads
		}); err != nil {
			return err
		}
		ss, err := openSess(tx, session)
		if err != nil {
			return err
		}
		st, err := ss.state()
		if err != nil {
			return err
		}
		if p, err = pick(ss, &st); err != nil {
			return err
		}
		p.Session, p.FrameVersion, p.Budget = session, st.FrameVersion, budget
		if p.Kind == PlanDigest {
			return nil // its span is read by PlanDigest
		}
		sp, err := ss.readSpan(&st, p.From, p.To)
		if err != nil {
			return err
		}
		p.Events, p.Required, p.SpanHash = sp.events, sp.required, sp.hash
		var size uint64
		if p.Kind == PlanSpan {
			size = spanSize(sp.events)
		}
		p.seal = sealed(db, p.Kind, session, p.From, p.To, sp.hash, &sp.required, sp.events[len(sp.events)-1].Turn, size)
		return nil
	})
	return p, err
}

type span struct {
	events   []tier.Event // from..to
	required tier.Required
	hash     []byte
}

// spanSize returns the size of events in a resumed context, as the
// session's state counts it (stateRec.Bytes): what an L1 span's commit or
// refusal adds to the compacted prefix's or the refused span's.
func spanSize(events []tier.Event) uint64 {
	var n uint64
	for i := range events {
		n += uint64(checkpoint.EventTextLen(&events[i]))
	}
	return n
}

// readSpan reads the raw span [from, to] — and nothing else of the raw log —
// and computes what a node over it must claim, on top of what was open
// before it (openBefore).
func (ss *sess) readSpan(st *stateRec, from, to uint64) (span, error) {
	if from < 1 || to < from || to > st.Head {
		return span{}, errors.Wrapf(ErrSpanChanged, "span %d..%d, head %d", from, to, st.Head)
	}
	if err := prefetch(ss.tx, func() []backend.Read { return ss.spanReads(from, to) }); err != nil {
		return span{}, err
	}
	before, node, err := ss.openBefore(from)
	if err != nil {
		return span{}, err
	}
	return ss.readSpanAfter(st, from, to, before, node)
}

// spanReads returns what readSpan reads first, for prefetch: the events
// from..to and the root before them (openBefore). That root's node is read
// after, by itself: read ahead with the others of its table
// (postgres's one statement for a table's records), the node cost the
// replay of the real sessions 7% more than its own round trip — the
// server scans the nodes table for the statement of many keys while it is
// small, and the nodes' claims make it many pages.
func (ss *sess) spanReads(from, to uint64) []backend.Read {
	reads := []backend.Read{{Session: ss.id, From: from, To: to}}
	if from > 1 {
		reads = append(reads, backend.Read{Session: ss.id, Table: backend.Roots, Key: u64(from), Last: true})
	}
	return reads
}

// readSpanAfter is readSpan with what was open and the plan before the
// span given, as node's facts recorded them (0: nothing, before seq 1).
func (ss *sess) readSpanAfter(st *stateRec, from, to uint64, before tier.Before, node uint64) (span, error) {
	var sp span
	if from < 1 || to < from || to > st.Head {
		return sp, errors.Wrapf(ErrSpanChanged, "span %d..%d, head %d", from, to, st.Head)
	}
	h := sha256.New()
	sp.events = make([]tier.Event, 0, to-from+1)
	err := ss.events(from, to, func(e tier.Event, raw []byte) error {
		h.Write(raw)
		sp.events = append(sp.events, e)
		return nil
	})
	if err != nil {
		return sp, err
	}
	sp.hash = h.Sum(nil)
	if sp.required, err = tier.ComputeRequiredAfter(before, sp.events); err != nil {
		if node != 0 {
			// The raw span, or the open set recorded before it, is damaged.
			err = errors.Wrapf(err, "the raw span does not replay on the calls node %d records open at seq %d", node, from-1)
		} else {
			err = errors.Wrap(err, "the raw span does not replay")
		}
		return sp, corrupt(ss.id, "l0", u64(from), err)
	}
	return sp, nil
}

// openBefore returns what was open and the plan at seq from-1, where a
// span starting at from begins: nothing before seq 1, else what the facts
// of the root that ends at from-1 record at its end (tier.Required's
// Unresolved, Plan and PlanAt) — every
// span planned starts where a root ends (an L1 span at the compacted
// prefix's end, a fold or a re-compaction at a root). node is that root, 0
// before seq 1. The cost is one seek, however long the session.
func (ss *sess) openBefore(from uint64) (before tier.Before, node uint64, err error) {
	if from <= 1 {
		return before, 0, nil
	}
	k, v, err := ss.b.Last(backend.Roots, u64(from))
	if err != nil {
		return tier.Before{}, 0, err
	}
	if k == nil {
		return tier.Before{}, 0, corrupt(ss.id, "roots", u64(from-1), errors.Newf("no root ends at seq %d, where the span at %d starts", from-1, from))
	}
	var r rootRec
	if err := decode(recRoot, v, &r); err != nil {
		return tier.Before{}, 0, corrupt(ss.id, "roots", k, err)
	}
	if at, err := parseU64(k); err != nil || r.From != at || r.To != from-1 {
		return tier.Before{}, 0, corrupt(ss.id, "roots", k, errors.Newf("the root covers %d..%d: none ends at seq %d, where the span at %d starts", r.From, r.To, from-1, from))
	}
	rec, err := ss.nodeRecord(r.Node)
	if err != nil {
		return tier.Before{}, 0, err
	}
	if rec.From != r.From || rec.To != r.To {
		return tier.Before{}, 0, corrupt(ss.id, "nodes", u64(rec.ID), errors.Newf("the root at seq %d..%d names node %d, which covers %d..%d", r.From, r.To, rec.ID, rec.From, rec.To))
	}
	f, err := ss.factsOf(&rec)
	if err != nil {
		return tier.Before{}, 0, err
	}
	return tier.Before{Open: f.Unresolved, Plan: f.Plan, PlanAt: f.PlanAt}, rec.ID, nil
}

// factsOf returns the facts recorded with node rec: every node records them
// when it is committed, so a node without them is damage.
func (ss *sess) factsOf(rec *nodeRec) (*factsRec, error) {
	f := rec.facts()
	if f == nil {
		return nil, corrupt(ss.id, "nodes", u64(rec.ID), errors.New("the node records no facts"))
	}
	return f, nil
}

// hashSpan returns the sha256 of the stored bytes of events from..to, as
// readSpan computes it, without decoding them.
func (ss *sess) hashSpan(st *stateRec, from, to uint64) ([]byte, error) {
	if from < 1 || to < from || to > st.Head {
		return nil, errors.Wrapf(ErrSpanChanged, "span %d..%d, head %d", from, to, st.Head)
	}
	h := sha256.New()
	err := ss.rawEvents(from, to, func(_ uint64, v []byte) error {
		h.Write(v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
