package store

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"

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
// replay of the raw log, the index of refs holds exactly the refs the
// events carry, the roots cover exactly the compacted prefix, every
// node's span and children are consistent, every valid marker's node is a
// root whose claims still pass marker.Validate against its raw span, every
// usable checkpoint's prefix is exactly the current roots before it, the
// audit refers to existing checkpoints, and the state's head, turn and
// sizes of the log (what Info's TailTokens and RefusedTokens come from) are
// what the raw log says. Problems are reported, not returned as an error;
// the error is for failing to run at all.
func (db *DB) Verify(opts VerifyOptions) (Report, error) {
	var rep Report
	if err := db.acquire(); err != nil {
		return rep, err
	}
	defer db.release()
	err := db.view(func(tx backend.Tx) error {
		release := func() {}
		if r, ok := tx.(backend.MappedReleaser); ok {
			release = r.ReleaseMapped
		}
		if c, ok := db.be.(backend.Checker); ok {
			// The backend's own structure first: a page graph too damaged
			// for its reads stops the logical checks.
			safe, err := c.Check(tx, func(session, what string) {
				rep.Problems = append(rep.Problems, Problem{Session: session, What: what})
			})
			if err != nil || !safe {
				return err
			}
			release()
		}
		var ids []string
		if err := tx.Sessions(func(id string) error { ids = append(ids, id); return nil }); err != nil {
			return err
		}
		rep.Sessions = len(ids)
		sessions := make([]*sess, len(ids))
		for i, id := range ids {
			ss, err := openSess(tx, id)
			if err != nil {
				rep.Problems = append(rep.Problems, Problem{Session: id, What: err.Error()})
				continue
			}
			sessions[i] = ss
		}
		var total, done uint64
		if opts.Events != nil {
			for _, ss := range sessions {
				if ss == nil {
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
			v := &verifier{rep: &rep, ss: sessions[i], release: release}
			if opts.Events != nil {
				base := done
				v.progress = func(n uint64) { opts.Events(base+n, total) }
			}
			if err := v.run(); err != nil {
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
	// Damage the backend's check found is often met again by the logical
	// checks that read the same record: one line for each.
	seen := map[Problem]bool{}
	rep.Problems = slices.DeleteFunc(rep.Problems, func(p Problem) bool {
		dup := seen[p]
		seen[p] = true
		return dup
	})
	return rep, nil
}

type verifier struct {
	rep   *Report
	ss    *sess
	st    stateRec
	nodes map[uint64]tier.Node
	roots []rootRec

	release  func()         // lets the backend's mapped pages go (Snapshot.ReleaseMapped)
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
	v.checkRawAndLedger()
	v.checkRefs()
	v.checkRoots()
	v.checkNodes()
	v.checkMarkers()
	v.checkCheckpoints()
	v.checkAudit()
	return nil
}

func (v *verifier) loadNodes() error {
	v.nodes = map[uint64]tier.Node{}
	return v.ss.forEach(backend.Nodes, func(k, raw []byte) error {
		var r nodeRec
		if err := decode(recNode, raw, &r); err != nil {
			v.fail("%v", corrupt(v.ss.id, "nodes", k, err))
			return nil
		}
		if u64val(k) != r.ID || len(k) != 8 {
			v.fail("nodes: key %x holds node %d", backend.ShowKey(k), r.ID)
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
// at head equal to the stored one, each root's claims valid against its
// raw span, and the state's sizes of the log (stateRec.Bytes) and the turn
// of its last refused span as the events say.
func (v *verifier) checkRawAndLedger() {
	l := tier.NewLedger()
	ri := 0 // next root to check
	var rb *tier.RequiredBuilder
	var plan []tier.PlanItem // the plan standing, and its call's seq
	var planAt uint64
	targets := map[string]string{} // the target of each call open (tier.CallTarget)
	want := uint64(1)
	turn := uint64(0)
	var run refRun // the events of one source record being walked
	// The events' size in a resumed context: up to each seq, at the
	// compacted prefix's end and at the last refused span's.
	var size, compacted, refused, refusedTurn uint64
	// Every stored event, also any past the head: a gap or a stray is
	// damage.
	// A fork's events up to its fork point are its parent's: replayed
	// from there, their refs are the parent's to index.
	if err := v.ss.forkBase(); err != nil {
		v.fail("%v", err)
		return
	}
	body := func(seq uint64, raw []byte) (bool, error) {
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
		switch {
		case seq <= v.ss.forkAt:
		case e.Ref != "" && e.Ref == run.ref && run.last == seq-1:
			run.last = seq
		case e.Ref != "":
			v.checkRefRun(run)
			run = refRun{ref: e.Ref, first: seq, last: seq}
		default:
			v.checkRefRun(run)
			run = refRun{}
		}
		size += uint64(checkpoint.EventTextLen(&e))
		if seq == v.st.CompactedTo {
			compacted = size
		}
		if seq == v.st.RefusedTo {
			refused, refusedTurn = size, e.Turn
		}
		stored, prior := e.Opener, e.PriorFailure
		if ri < len(v.roots) && seq == v.roots[ri].From {
			open := l.OpenList()
			for i := range open {
				open[i].Target = targets[open[i].ID]
			}
			rb = tier.NewRequiredBuilderAfter(tier.Before{Open: open, Plan: plan, PlanAt: planAt})
		}
		if items, ok := tier.PlanOf(&e); ok {
			plan, planAt = items, seq
		}
		switch {
		case e.Kind == tier.KindToolCall:
			if t := tier.CallTarget(e.Name, e.Text); t != "" {
				targets[e.ID] = t
			}
		case e.Kind.Resolves():
			delete(targets, e.ID)
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
			v.release()
			if v.progress != nil {
				v.progress(v.checked)
			}
		}
		return true, nil
	}
	var err error
	if v.ss.parent != nil {
		err = v.ss.parent.rawEvents(1, v.ss.forkAt, func(seq uint64, raw []byte) error {
			_, err := body(seq, raw)
			return err
		})
	}
	if err == nil {
		err = v.ss.b.Events(want, ^uint64(0), body)
	}
	if err != nil {
		v.fail("%v", err)
		return
	}
	v.checkRefRun(run)
	if want-1 != v.st.Head {
		v.fail("state: head %d, l0 ends at %d", v.st.Head, want-1)
	}
	if turn != v.st.Turn {
		v.fail("state: turn %d, the last event's is %d", v.st.Turn, turn)
	}
	for _, c := range []struct {
		what        string
		seq         uint64
		state, want uint64
	}{
		{"head", v.st.Head, v.st.Bytes, size},
		{"the compacted prefix's end", v.st.CompactedTo, v.st.CompactedBytes, compacted},
		{"the last refused span's end", v.st.RefusedTo, v.st.RefusedBytes, refused},
	} {
		if c.state != c.want && c.seq <= want-1 {
			v.fail("state: the events up to %s (seq %d) take %d bytes in a resumed context, the state counts %d", c.what, c.seq, c.want, c.state)
		}
	}
	if v.st.RefusedTo > want-1 {
		v.fail("state: the last refused span ends at seq %d, past the raw log's end %d", v.st.RefusedTo, want-1)
	} else if v.st.RefusedTurn != refusedTurn {
		v.fail("state: the last refused span ends in turn %d, its last event (seq %d) is of turn %d", v.st.RefusedTurn, v.st.RefusedTo, refusedTurn)
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

// checkRefRun checks that the Refs table indexes a run of events that
// carry one ref, found in the raw log: exactly their seqs. A ref that comes
// back after events of another is a run whose seqs the entry does not
// hold.
func (v *verifier) checkRefRun(r refRun) {
	if r.ref == "" {
		return
	}
	got, found, err := v.ss.ref(r.ref)
	switch {
	case err != nil:
		v.fail("%v", err)
	case !found:
		v.fail("l0: seq %d..%d carry ref %q, which refs does not index", r.first, r.last, tier.TruncateUTF8(r.ref, 128))
	case got.First != r.first || got.Last != r.last:
		v.fail("refs: ref %q indexes seq %d..%d, but seq %d..%d carry it", tier.TruncateUTF8(r.ref, 128), got.First, got.Last, r.first, r.last)
	}
}

// checkRefs checks that every entry of the Refs table names events that
// carry its ref: with checkRefRun, the table and the raw log's refs are
// one and the same.
func (v *verifier) checkRefs() {
	err := v.ss.forEach(backend.Refs, func(k, _ []byte) error {
		r, _, err := v.ss.ref(string(k))
		if err != nil {
			v.fail("%v", err)
			return nil
		}
		ref := tier.TruncateUTF8(string(k), 128)
		if r.Last > v.st.Head {
			v.fail("refs: ref %q indexes seq %d..%d, past the head %d", ref, r.First, r.Last, v.st.Head)
			return nil
		}
		e, _, err := v.ss.event(r.First)
		if err != nil {
			v.fail("refs: ref %q indexes seq %d..%d: %v", ref, r.First, r.Last, err)
			return nil
		}
		if e.Ref != string(k) {
			v.fail("refs: ref %q indexes seq %d..%d, whose first event carries ref %q", ref, r.First, r.Last, tier.TruncateUTF8(e.Ref, 128))
		}
		return nil
	})
	if err != nil {
		v.fail("%v", err)
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
	if f := rec.facts(); f == nil {
		v.fail("root node %d (seq %d..%d): records no facts", n.ID, n.From, n.To)
	} else {
		// What the next span starts from, and the next digest extends:
		// it must be what the raw span requires.
		got, want := f.required(n.To), req
		got.From = n.From // facts record no span: the node's
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
				if !ok && v.ss.parent != nil {
					// A node of a fork's frame folds its parent's nodes.
					var err error
					c, err = v.ss.parent.inheritedNode(cid)
					ok = err == nil
				}
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
	_ = v.ss.forEach(backend.Markers, func(k, _ []byte) error {
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
	{
		_ = v.ss.forEach(backend.CheckpointIndex, func(k, raw []byte) error {
			var r indexRec
			if len(k) != 16 || decode(recIndex, raw, &r) != nil || r.ID != u64val(k[8:]) {
				v.fail("ckvalid: bad entry at key %x", backend.ShowKey(k))
				return nil
			}
			index[r.ID] = u64val(k[:8])
			return nil
		})
	}
	atZero, forkCk := false, v.st.ForkCheckpoint == 0
	_ = v.ss.forEach(backend.Checkpoints, func(k, _ []byte) error {
		c, err := v.ss.checkpoint(u64val(k))
		if err != nil {
			v.fail("%v", err)
			return nil
		}
		forkCk = forkCk || c.ID == v.st.ForkCheckpoint
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
	if !forkCk {
		v.fail("state: a fork at checkpoint %d, which is missing", v.st.ForkCheckpoint)
	}
}

func (v *verifier) checkAudit() {
	_ = v.ss.forEach(backend.Audit, func(k, raw []byte) error {
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
