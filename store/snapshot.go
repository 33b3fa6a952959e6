package store

import (
	"math"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// Snapshot is a consistent read-only view of the database: one read
// transaction of its backend. It is valid only inside the function passed to View.
type Snapshot struct {
	tx backend.Tx
	db *DB
}

// View calls fn with a Snapshot of the database. Everything fn reads comes
// from one transaction; writers are not blocked.
func (db *DB) View(fn func(*Snapshot) error) error {
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	return db.view(func(tx backend.Tx) error { return fn(&Snapshot{tx: tx, db: db}) })
}

// Info is a session's head and frame.
type Info struct {
	Session      string `json:"id"`
	Head         uint64 `json:"head_seq"`
	Turn         uint64 `json:"turn"`
	FrameVersion uint64 `json:"frame_version"`
	CompactedTo  uint64 `json:"compacted_to"` // the roots cover exactly seq 1..CompactedTo
	Roots        int    `json:"roots"`
	// RefusedTo is the end of the last refused L1 span past the compacted
	// prefix, and RefusedTurn the turn of its last event; FoldRefusedTo is
	// the end of the last refused fold or digest. A policy asks again only
	// past them (package compaction).
	RefusedTo     uint64 `json:"refused_to,omitempty"`
	RefusedTurn   uint64 `json:"refused_turn,omitempty"`
	FoldRefusedTo uint64 `json:"fold_refused_to,omitempty"`
	// TailTokens estimates the tokens of the uncompacted tail, the events
	// CompactedTo+1..Head, as a context resumed now carries them: each
	// event as Context.Text renders it under "## raw"
	// (checkpoint.EventTextLen), lengths summed, then tier.TokensOfBytes.
	// RefusedTokens is the same of the events CompactedTo+1..RefusedTo, 0
	// when RefusedTo is not past CompactedTo. Both come from counters the
	// store keeps in the session's state, updated by every append and L1
	// commit or refusal and checked by Verify: O(1), however long the tail.
	TailTokens    int `json:"tail_tokens"`
	RefusedTokens int `json:"refused_tokens,omitempty"`
	// Fork is where a fork came from (DB.Fork); nil for a session of its
	// own.
	Fork *ForkInfo `json:"fork,omitempty"`
}

// FormatVersion returns the format version of the backend's layout (the
// bbolt file's), or 0 for a backend without one.
func (s *Snapshot) FormatVersion() (int, error) {
	if be, ok := s.db.be.(backend.Versioner); ok {
		return be.FormatVersion(), nil
	}
	return 0, nil
}

// Sessions returns the session ids in byte order.
func (s *Snapshot) Sessions() ([]string, error) {
	var out []string
	err := s.tx.Sessions(func(id string) error {
		out = append(out, id)
		return nil
	})
	return out, err
}

func (s *Snapshot) sess(id string) (*sess, error) { return openSess(s.tx, id) }

// Info returns session's head and frame.
func (s *Snapshot) Info(session string) (Info, error) {
	ss, err := s.sess(session)
	if err != nil {
		return Info{}, err
	}
	st, err := ss.state()
	if err != nil {
		return Info{}, err
	}
	return st.info(session), nil
}

func (st *stateRec) info(session string) Info {
	info := Info{Session: session, Head: st.Head, Turn: st.Turn, FrameVersion: st.FrameVersion,
		CompactedTo: st.CompactedTo, Roots: st.Roots, RefusedTo: st.RefusedTo, RefusedTurn: st.RefusedTurn,
		FoldRefusedTo: st.FoldRefusedTo}
	if st.Parent != "" {
		f := st.forkInfo()
		info.Fork = &f
	}
	if st.Bytes > st.CompactedBytes {
		info.TailTokens = tokensOfBytes(st.Bytes - st.CompactedBytes)
	}
	if st.RefusedTo > st.CompactedTo && st.RefusedBytes > st.CompactedBytes {
		info.RefusedTokens = tokensOfBytes(st.RefusedBytes - st.CompactedBytes)
	}
	return info
}

// tokensOfBytes is tier.TokensOfBytes of a counter's difference, bounded
// where an int cannot hold it (a damaged counter: Verify reports it).
func tokensOfBytes(n uint64) int {
	return tier.TokensOfBytes(int(min(n, math.MaxInt-3)))
}

// Events calls fn for every event of session with from ≤ seq ≤ to, in order.
// The event is a copy; fn may keep it.
func (s *Snapshot) Events(session string, from, to uint64, fn func(tier.Event) error) error {
	ss, err := s.sess(session)
	if err != nil {
		return err
	}
	st, err := ss.state()
	if err != nil {
		return err
	}
	if from < 1 {
		from = 1
	}
	if to > st.Head {
		to = st.Head
	}
	if from > to {
		return nil
	}
	return ss.events(from, to, func(e tier.Event, _ []byte) error { return fn(e) })
}

// RefSpan is where the events made from one source record (tier.Event.Ref)
// are: seqs First..Last of their session.
type RefSpan struct {
	First, Last uint64
}

// Ref returns where the events of session made from the source record ref
// are, and ok false when the session holds none: a lookup in the session's
// index of refs (O(log n)), for an importer to leave out the records it
// stored before. A session that does not exist holds none.
func (s *Snapshot) Ref(session, ref string) (span RefSpan, ok bool, err error) {
	ss, err := findSess(s.tx, session)
	if err != nil || ss == nil {
		return RefSpan{}, false, err
	}
	r, ok, err := ss.ref(ref)
	return RefSpan{First: r.First, Last: r.Last}, ok, err
}

// Roots returns the session's current roots, in seq order.
func (s *Snapshot) Roots(session string) ([]tier.Node, error) {
	ss, err := s.sess(session)
	if err != nil {
		return nil, err
	}
	return ss.rootNodes(^uint64(0))
}

// RootSpan is a root of the frame as the frame records it: its node, the
// seqs it covers and its depth, without the node itself.
type RootSpan struct {
	Node     uint64
	From, To uint64
	Depth    tier.Depth
}

// RootSpans returns the session's current roots, in seq order, without
// reading their nodes: what a compaction policy needs to decide, at the
// cost of the frame alone (a deep root's claims can be megabytes).
func (s *Snapshot) RootSpans(session string) ([]RootSpan, error) {
	// The session and its roots in one round trip, where reads are one.
	if err := prefetch(s.tx, func() []backend.Read {
		return []backend.Read{{Session: session}, {Session: session, Table: backend.Roots, Scan: true}}
	}); err != nil {
		return nil, err
	}
	ss, err := s.sess(session)
	if err != nil {
		return nil, err
	}
	rs, err := ss.roots(^uint64(0))
	if err != nil {
		return nil, err
	}
	out := make([]RootSpan, len(rs))
	for i, r := range rs {
		out[i] = RootSpan{Node: r.Node, From: r.From, To: r.To, Depth: r.Depth}
	}
	return out, nil
}

func (ss *sess) rootNodes(upto uint64) ([]tier.Node, error) {
	rs, err := ss.roots(upto)
	if err != nil {
		return nil, err
	}
	out := make([]tier.Node, 0, len(rs))
	for _, r := range rs {
		n, err := ss.node(r.Node)
		if err != nil {
			return nil, damaged(err, ss.id, "roots", u64(r.From), "the root's node")
		}
		out = append(out, n)
	}
	return out, nil
}

// Node returns node id of session; of a fork, a node under its frame is
// its parent's, returned from there.
func (s *Snapshot) Node(session string, id uint64) (tier.Node, error) {
	ss, err := s.sess(session)
	if err != nil {
		return tier.Node{}, err
	}
	return ss.inheritedNode(id)
}

// Nodes calls fn for every node of session, in id order.
func (s *Snapshot) Nodes(session string, fn func(tier.Node) error) error {
	return s.each(session, backend.Nodes, func(ss *sess, k, v []byte) error {
		var r nodeRec
		if err := decode(recNode, v, &r); err != nil {
			return corrupt(ss.id, "nodes", k, err)
		}
		return fn(r.node())
	})
}

// Markers calls fn for every marker of session, in id order.
func (s *Snapshot) Markers(session string, fn func(marker.Marker) error) error {
	return s.each(session, backend.Markers, func(ss *sess, k, v []byte) error {
		m, err := ss.marker(u64val(k))
		if err != nil {
			return err
		}
		return fn(m)
	})
}

// Marker returns marker id of session.
func (s *Snapshot) Marker(session string, id uint64) (marker.Marker, error) {
	ss, err := s.sess(session)
	if err != nil {
		return marker.Marker{}, err
	}
	return ss.marker(id)
}

// Checkpoints calls fn for every checkpoint of session, in id order.
func (s *Snapshot) Checkpoints(session string, fn func(checkpoint.Checkpoint) error) error {
	return s.each(session, backend.Checkpoints, func(ss *sess, k, v []byte) error {
		c, err := ss.checkpoint(u64val(k))
		if err != nil {
			return err
		}
		return fn(c)
	})
}

// Refusals calls fn for every audit record of a refused compaction of
// session, oldest first.
func (s *Snapshot) Refusals(session string, fn func(Refusal) error) error {
	return s.each(session, backend.Audit, func(ss *sess, k, v []byte) error {
		var r auditRec
		if err := decode(recAudit, v, &r); err != nil {
			return corrupt(ss.id, "audit", k, err)
		}
		return fn(r.Refusal)
	})
}

func (s *Snapshot) each(session string, t backend.Table, fn func(ss *sess, k, v []byte) error) error {
	ss, err := s.sess(session)
	if err != nil {
		return err
	}
	return ss.scan(t, nil, func(k, v []byte) (bool, error) {
		if len(k) != 8 {
			return false, corrupt(session, t.String(), k, errors.New("bad key"))
		}
		return true, fn(ss, k, v)
	})
}

// Ledger returns the ledger of session at its head, as stored.
func (s *Snapshot) Ledger(session string) (*tier.Ledger, error) {
	ss, err := s.sess(session)
	if err != nil {
		return nil, err
	}
	return ss.ledger()
}

func (ss *sess) ledger() (*tier.Ledger, error) {
	l := tier.NewLedger()
	for _, c := range []tier.Class{tier.ClassOpen, tier.ClassDisposition, tier.ClassConstraint, tier.ClassArtifact} {
		name, _ := ledgerTable(c)
		err := ss.scan(name, nil, func(k, _ []byte) (bool, error) {
			return true, ss.loadLedgerEntry(l, tier.Ref{Class: c, Name: string(k)}, true)
		})
		if err != nil {
			return nil, err
		}
	}
	// Each entry's key must be the id or key it holds.
	for k, v := range l.Open {
		if v.ID != k {
			return nil, corrupt(ss.id, "open", []byte(k), errors.Newf("record holds id %q", v.ID))
		}
	}
	for k, v := range l.Dispositions {
		if v.Key != k {
			return nil, corrupt(ss.id, "disp", []byte(k), errors.Newf("record holds key %q", v.Key))
		}
	}
	for k, v := range l.Constraints {
		if v.Key != k {
			return nil, corrupt(ss.id, "constr", []byte(k), errors.Newf("record holds key %q", v.Key))
		}
	}
	for k, v := range l.Artifacts {
		if v.Key != k {
			return nil, corrupt(ss.id, "art", []byte(k), errors.Newf("record holds key %q", v.Key))
		}
	}
	return l, nil
}

// Sessions returns the session ids in byte order.
func (db *DB) Sessions() (ids []string, err error) {
	err = db.View(func(s *Snapshot) error {
		ids, err = s.Sessions()
		return err
	})
	return ids, err
}

// Info returns session's head and frame.
func (db *DB) Info(session string) (info Info, err error) {
	err = db.View(func(s *Snapshot) error {
		info, err = s.Info(session)
		return err
	})
	return info, err
}

// ReleaseMapped lets the kernel take back, from this process's resident
// set, the pages of the database file read so far: they stay in the page
// cache and are read back from there when touched again. A long read — a
// dump, a verify — of a database larger than memory calls it now and then,
// so that its resident memory stays bounded by what it holds, not by the
// size of the file (bbolt maps the whole file). For a bbolt file on Linux;
// elsewhere it does nothing. It never changes what the snapshot reads.
func (s *Snapshot) ReleaseMapped() {
	if r, ok := s.tx.(backend.MappedReleaser); ok {
		r.ReleaseMapped()
	}
}
