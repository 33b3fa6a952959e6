package store

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/backend"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// Summary is what a summarizer made of a plan.
type Summary struct {
	Narrative  string
	Claims     tier.Claims
	Summarizer string // its name, recorded on the node
	Attempt    int    // 0 for the first try, n for the n-th retry
	// Repairs is the audit id of the refused attempt whose missing claims
	// Claims, computed from the raw span, make good; 0 for none. It must
	// name a refusal of the same span.
	Repairs uint64
}

// CommitResult says what a Commit wrote. For a refused compaction Node is
// nil, and Checkpoint and Refusal say where resume will fall back to and why.
type CommitResult struct {
	Node                   *tier.Node
	Marker                 uint64
	Checkpoint             uint64
	InvalidatedMarkers     []uint64
	InvalidatedCheckpoints []uint64
	Refusal                *Refusal
}

// Commit checks and commits a summary of plan p in one write transaction:
// the raw span must still be resident and hash as planned, and the frame
// must be the one planned against (else ErrConflict: plan again). The
// ledger is recomputed from the raw events inside the transaction and the
// claims validated against it (marker.Validate).
//
// Valid: the node, its marker, a checkpoint at its boundary, the roots and
// the frame are written together, and every marker and checkpoint that the
// frame change made stale is invalidated with its reason. The node's claims
// are those the raw span requires (tier.Required.Claims), with the raw log's
// texts: a summary's claims are checked for which facts they name and in
// what state, and none of their words is stored.
//
// Invalid: no node and no marker; a checkpoint at the span's start and an
// audit record are written, and the returned error is a
// *marker.InvalidError (errors.Is(err, marker.ErrMarkerInvalid)).
func (db *DB) Commit(p *Plan, sum Summary) (CommitResult, error) {
	return db.commit(p, sum, true, nil)
}

// Refuse records a compaction of plan p refused before there was a summary
// to check — the summarizer's answer could not be used (marker.ClassOutput)
// — the way Commit records a refused summary: in one write transaction,
// after the same checks of the span and the frame, a checkpoint at the
// span's start and an audit record with failures and sum.Summarizer and
// sum.Attempt (sum's narrative and claims are not stored). It returns the
// *marker.InvalidError it recorded, as Commit does.
func (db *DB) Refuse(p *Plan, sum Summary, failures ...marker.Failure) (CommitResult, error) {
	if len(failures) == 0 {
		return CommitResult{}, errors.Wrap(ErrBadOptions, "store: Refuse without a failure")
	}
	return db.commit(p, sum, true, failures)
}

// commit is Commit, with validate false CommitUnchecked, and with refused
// set Refuse: the same transaction, with or without the size check and
// marker.Validate, or refused for the given failures. It joins the group
// commit, so a compaction committed while appends wait shares their
// transaction and fsync.
func (db *DB) commit(p *Plan, sum Summary, validate bool, refused []marker.Failure) (CommitResult, error) {
	if db.opts.ReadOnly {
		return CommitResult{}, ErrReadOnly
	}
	// Text that is not UTF-8 is refused before anything of it can be
	// stored: what no refusal can record (the summarizer's name, a
	// failure given to Refuse) and any text of an unchecked summary as an
	// error; a checked summary's narrative or claims as a refusal
	// (summaryText), so that a compaction goes on as after any refused
	// summary.
	if !utf8.ValidString(sum.Summarizer) {
		return CommitResult{}, errors.Wrap(tier.ErrInvalidUTF8, "store: the summarizer's name")
	}
	if w := tier.InvalidUTF8(refused); w != "" {
		return CommitResult{}, errors.Wrapf(tier.ErrInvalidUTF8, "store: the failures refused: %s", w)
	}
	if w := summaryText(&sum); w != "" && !validate {
		return CommitResult{}, errors.Wrapf(tier.ErrInvalidUTF8, "store: the summary's %s", w)
	}
	if err := db.acquire(); err != nil {
		return CommitResult{}, err
	}
	c := db.newCommitReq(p, sum, validate, refused)
	db.submit(&writeReq{session: p.Session, commit: c, done: make(chan struct{}), linger: db.mayLinger()})
	if c.err != nil {
		return CommitResult{}, c.err
	}
	return c.res, c.invalid
}

// mayLinger reports whether a commit made now may wait for an append to
// share its transaction (Options.CommitWait): while an append is in flight
// — another goroutine appends — or, when the last commit that waited got
// company, within CommitWait of the last append. A caller that appends and
// then commits on one goroutine does not wait: no append of its is in
// flight when it commits, and a wait that finds none (right after a
// pipeline) turns the second rule off.
func (db *DB) mayLinger() bool {
	w := db.opts.CommitWait
	if w <= 0 || db.noWait.Load() > 0 {
		return false
	}
	if db.appending.Load() > 0 {
		return true
	}
	return db.lingerPays.Load() && time.Now().UnixNano()-db.lastAppend.Load() < int64(w)
}

// commitReq is a compaction's commit waiting for the group commit, and
// then its outcome.
type commitReq struct {
	p         *Plan
	sum       Summary
	validate  bool
	preFailed []marker.Failure // refused before any claim is looked at
	claims    tier.Claims      // sum.Claims, normalized

	res     CommitResult
	invalid error // the refusal recorded (*marker.InvalidError)
	err     error // not committed
}

func (db *DB) newCommitReq(p *Plan, sum Summary, validate bool, refused []marker.Failure) *commitReq {
	c := &commitReq{p: p, sum: sum, validate: validate, preFailed: refused}
	// Failures known before the transaction: Refuse's, or a summary over
	// the size limits (not validated: its keys could be as large).
	if c.preFailed == nil && validate {
		c.preFailed = summarySize(&sum, db.opts.limits())
	}
	if w := summaryText(&sum); c.preFailed == nil && validate && w != "" {
		c.preFailed = []marker.Failure{{Class: marker.ClassOutput, Item: OutputInvalidUTF8, Detail: "the summary's " + w + " is not valid UTF-8"}}
	}
	c.claims = sum.Claims.Clone() // the caller's, which it may change after
	c.claims.Normalize()
	return c
}

// commitIn writes c in tx. A check that fails before anything is written
// — a conflict, a changed span, damage in the session's records — is c's
// own error and leaves tx as it was; an error while writing is returned,
// and only rolling back the whole transaction undoes it.
func (db *DB) commitIn(tx backend.Tx, c *commitReq) error {
	c.res, c.invalid, c.err = CommitResult{}, nil, nil
	p := c.p
	ss, err := openSess(tx, p.Session)
	if err != nil {
		c.err = err
		return nil
	}
	st, err := ss.state()
	if err != nil {
		c.err = err
		return nil
	}
	slot, err := ss.checkCurrent(&st, p)
	if err != nil {
		c.err = err
		return nil
	}
	// The claims the span requires: computed at plan time if the span
	// still hashes the same (planSeal), else from its raw events now.
	var required *tier.Required
	var hash []byte
	var lastTurn uint64  // of the span's last event, for a refusal
	var spanBytes uint64 // the span's size in a resumed context (an L1 span's)
	if p.Kind == PlanDigest {
		// The prefix's facts and the raw events after it (PlanDigest):
		// as planned if the events hash the same, else computed now.
		first, err := ss.nodeRecord(p.Replaces[0])
		if err != nil {
			c.err = err
			return nil
		}
		if first.From != 1 || first.To >= p.To {
			c.err = errors.Wrapf(ErrConflict, "digest of 1..%d does not extend node %d (%d..%d)", p.To, first.ID, first.From, first.To)
			return nil
		}
		if s := p.seal; s != nil && s.db == db && s.kind == p.Kind && s.session == p.Session && s.from == first.To+1 && s.to == p.To {
			raw, err := ss.hashSpan(&st, s.from, s.to)
			if err != nil {
				c.err = err
				return nil
			}
			if !bytes.Equal(raw, s.hash) {
				c.err = errors.Wrapf(ErrSpanChanged, "seq %d..%d hashes differently", s.from, s.to)
				return nil
			}
			hash, required, lastTurn = digestHash(first.SpanHash, raw), &s.required, s.lastTurn
		} else {
			d, err := ss.digestSpan(&st, &first, p.To)
			if err != nil {
				c.err = err
				return nil
			}
			hash, required, lastTurn = d.hash, &d.required, d.events[len(d.events)-1].Turn
		}
	} else if s := p.seal; s != nil && s.db == db && s.kind == p.Kind && s.session == p.Session && s.from == p.From && s.to == p.To &&
		bytes.Equal(s.hash, p.SpanHash) {
		if hash, err = ss.hashSpan(&st, p.From, p.To); err != nil {
			c.err = err
			return nil
		}
		required, lastTurn, spanBytes = &s.required, s.lastTurn, s.bytes
	} else {
		sp, err := ss.readSpan(&st, p.From, p.To)
		if err != nil {
			c.err = err
			return nil
		}
		hash, required, lastTurn = sp.hash, &sp.required, sp.events[len(sp.events)-1].Turn
		if p.Kind == PlanSpan {
			spanBytes = spanSize(sp.events)
		}
	}
	if !bytes.Equal(hash, p.SpanHash) {
		c.err = errors.Wrapf(ErrSpanChanged, "seq %d..%d hashes differently", p.From, p.To)
		return nil
	}
	if id := c.sum.Repairs; id != 0 {
		r, err := ss.refusal(id)
		if err == nil && (r.From != p.From || r.To != p.To || r.Depth != p.Depth) {
			err = errors.Newf("refusal %d is of %s seq %d..%d", id, r.Depth, r.From, r.To)
		}
		if err != nil {
			c.err = errors.Wrapf(ErrBadOptions, "store: a repair of %s seq %d..%d: %v", p.Depth, p.From, p.To, err)
			return nil
		}
	}
	var invalid error
	switch {
	case !c.validate:
	case c.preFailed != nil:
		invalid = &marker.InvalidError{Failures: c.preFailed}
	default:
		invalid = marker.Validate(
			marker.Frame{Version: p.FrameVersion, RootDepth: p.Depth},
			marker.Frame{Version: st.FrameVersion, RootDepth: slot},
			required, p.Depth, &c.claims)
	}
	claims := c.claims
	if invalid == nil && c.validate {
		// Valid claims name the facts the span requires, no more and no
		// fewer; the node carries those facts as the raw log recorded
		// them, never the summarizer's words for them — and those are
		// what must fit.
		claims = required.Claims()
		if f := claimsSize("the raw log's claims", &claims, db.opts.limits()); f != nil {
			invalid = &marker.InvalidError{Failures: f}
		}
	}
	if invalid == nil {
		return ss.accept(&st, p, c.sum, claims, !c.validate, required, spanBytes, &c.res)
	}
	var ie *marker.InvalidError
	if !errors.As(invalid, &ie) {
		c.err = invalid
		return nil
	}
	c.invalid = invalid
	return ss.refuse(&st, p, lastTurn, spanBytes, c.sum, ie, &c.res)
}

// OutputInvalidUTF8 is the item of the marker.ClassOutput failure of a
// summary whose narrative or claims hold text that is not valid UTF-8: a
// summarizer's output is input like any other, refused, and none of it
// stored (the failure's detail names the field and the byte).
const OutputInvalidUTF8 = "invalid_utf8"

// summaryText returns where sum's narrative or claims hold text that is
// not valid UTF-8 ("narrative, byte 3", "claims Failures[0].Reason, byte
// 0"), or "".
func summaryText(sum *Summary) string {
	if w := tier.InvalidUTF8(sum.Narrative); w != "" {
		return "narrative, " + w
	}
	if w := tier.InvalidUTF8(&sum.Claims); w != "" {
		return "claims " + w
	}
	return ""
}

// summarySize returns a ClassSize failure when the summary's narrative or
// claims are over the event limits: a summarizer's output is input like any
// other, and an enormous one is refused, not trusted.
func summarySize(sum *Summary, lim tier.Limits) []marker.Failure {
	if n := len(sum.Narrative); n > lim.MaxEventBytes {
		return []marker.Failure{{Class: marker.ClassSize, Item: "narrative", Detail: fmt.Sprintf("%d bytes, limit %d", n, lim.MaxEventBytes)}}
	}
	return claimsSize("claims", &sum.Claims, lim)
}

// claimsSize returns a ClassSize failure, its item named item, when the
// texts of c are over the event limit together: what one node may carry.
func claimsSize(item string, c *tier.Claims, lim tier.Limits) []marker.Failure {
	total := 0
	var fields []string
	for _, x := range c.Resolved {
		fields = append(fields, x.ID, x.Name, x.Reason)
	}
	for _, x := range c.Failures {
		fields = append(fields, x.ID, x.Name, x.Reason)
	}
	for _, x := range c.Unresolved {
		fields = append(fields, x.ID, x.Name)
	}
	for _, x := range c.Dispositions {
		fields = append(fields, x.Key, x.Reason, x.By)
	}
	for _, x := range c.Constraints {
		fields = append(fields, x.Key, x.Text)
	}
	for _, x := range c.Artifacts {
		fields = append(fields, x.Key, x.Text)
	}
	for _, x := range c.Requests {
		fields = append(fields, x.Text)
	}
	for _, x := range c.Plan {
		fields = append(fields, x.Key, x.Status)
	}
	for _, f := range fields {
		total += len(f)
	}
	if total > lim.MaxEventBytes {
		return []marker.Failure{{Class: marker.ClassSize, Item: item, Detail: fmt.Sprintf("%d claims of %d bytes, limit %d", c.Count(), total, lim.MaxEventBytes)}}
	}
	return nil
}

// checkCurrent returns ErrConflict unless everything p replaces is still
// current, and returns the depth of the root slot the node fills.
func (ss *sess) checkCurrent(st *stateRec, p *Plan) (tier.Depth, error) {
	if st.FrameVersion != p.FrameVersion {
		return 0, errors.Wrapf(ErrConflict, "planned against frame version %d, now %d", p.FrameVersion, st.FrameVersion)
	}
	switch p.Kind {
	case PlanSpan:
		if st.CompactedTo+1 != p.From {
			return 0, errors.Wrapf(ErrConflict, "span starts at %d, the uncompacted tail now at %d", p.From, st.CompactedTo+1)
		}
		if len(p.Replaces)+len(p.Children) > 0 {
			return 0, errors.Wrapf(ErrConflict, "a span plan naming roots or children")
		}
		return 1, nil
	case PlanFold, PlanRecompact, PlanDigest:
		n := len(p.Replaces)
		if p.Kind == PlanRecompact && n != 1 || p.Kind == PlanDigest && n != 2 || p.Kind == PlanFold && n < 2 {
			return 0, errors.Wrapf(ErrConflict, "a %s plan replacing %d roots", p.Kind, n)
		}
		var depths []tier.Depth
		var children []uint64 // of the node re-compacted
		next := p.From
		for _, id := range p.Replaces {
			n, err := ss.node(id)
			if err != nil {
				return 0, err
			}
			if !n.IsRoot() {
				return 0, errors.Wrapf(ErrConflict, "node %d is no longer a root", id)
			}
			if n.From != next {
				return 0, errors.Wrapf(ErrConflict, "node %d covers %d..%d, the plan's next root starts at %d", id, n.From, n.To, next)
			}
			next = n.To + 1
			depths = append(depths, n.Depth)
			children = n.Children
		}
		if next-1 != p.To {
			return 0, errors.Wrapf(ErrConflict, "the plan's roots cover %d..%d, its span %d..%d", p.From, next-1, p.From, p.To)
		}
		// The new node's children: the roots it folds, or those of the
		// node it re-compacts — never what a plan built by hand says.
		want := p.Replaces
		if p.Kind == PlanRecompact {
			want = children
		}
		if len(p.Children) != len(want) {
			return 0, errors.Wrapf(ErrConflict, "the plan names %d children, the node takes %d", len(p.Children), len(want))
		}
		for i, c := range p.Children {
			if c.ID != want[i] {
				return 0, errors.Wrapf(ErrConflict, "the plan's child %d is node %d, the node takes node %d", i, c.ID, want[i])
			}
		}
		switch p.Kind {
		case PlanRecompact:
			return depths[0], nil
		case PlanDigest:
			return digestDepth(depths[0], depths[1]), nil
		}
		if slices.Min(depths) != slices.Max(depths) {
			return 0, errors.Wrapf(ErrConflict, "a fold of roots of depths %v (a fold takes roots of one depth)", depths)
		}
		return depths[0] + 1, nil // a fold: one deeper
	}
	return 0, errors.AssertionFailedf("plan kind %d", p.Kind)
}

// reads returns what committing p reads (commitIn), for a backend that
// reads ahead (backend.Prefetcher): the session, the span's events, the
// roots, and the nodes and markers of the roots it replaces, with the
// checkpoint index after them.
func (p *Plan) reads() []backend.Read {
	id := p.Session
	from, to := p.From, p.To
	if p.Kind == PlanDigest && p.seal != nil {
		from, to = p.seal.from, p.seal.to // the raw events after the first root
	}
	reads := []backend.Read{{Session: id}, {Session: id, From: from, To: to}, {Session: id, Table: backend.Roots, Scan: true}}
	for _, n := range p.Replaces {
		reads = append(reads, backend.Read{Session: id, Table: backend.Nodes, Key: u64(n)}, backend.Read{Session: id, Table: backend.Markers, Key: u64(n)})
	}
	if len(p.Replaces) > 0 {
		reads = append(reads, backend.Read{Session: id, Table: backend.CheckpointIndex, Key: checkpoint.IndexKey(p.From, 0), Scan: true})
	}
	return reads
}

// accept writes the node of p, valid against required, and everything its
// commit changes; spanBytes is the size of an L1 span's events in a resumed
// context.
func (ss *sess) accept(st *stateRec, p *Plan, sum Summary, claims tier.Claims, unchecked bool, required *tier.Required, spanBytes uint64, res *CommitResult) error {
	// The roots before the node's span, read before anything is written:
	// with the node, the prefix of its checkpoint.
	prefix, err := ss.roots(p.From - 1)
	if err != nil {
		return err
	}
	st.NextNode++
	n := tier.Node{ID: st.NextNode, Depth: p.Depth, From: p.From, To: p.To, Narrative: sum.Narrative, Claims: claims,
		FrameVersion: p.FrameVersion, Summarizer: sum.Summarizer, Budget: p.Budget, SpanHash: slices.Clone(p.SpanHash),
		Unchecked: unchecked, Repairs: sum.Repairs}
	for _, c := range p.Children {
		n.Children = append(n.Children, c.ID)
	}
	n.Tokens = tier.TokensOfBytes(checkpoint.NodeTextLen(&n))

	// Take the replaced roots out of the frame. Each marker names its own
	// root; a checkpoint may hold several of them, so its reason names all.
	var whyCk string
	for _, id := range p.Replaces {
		old, err := ss.node(id)
		if err != nil {
			return err
		}
		var why string
		switch p.Kind {
		case PlanFold, PlanDigest:
			why = fmt.Sprintf("root %d folded into %s node %d at frame version %d", id, n.Depth, n.ID, st.FrameVersion+1)
			whyCk = fmt.Sprintf("roots %s folded into %s node %d at frame version %d", joinIDs(p.Replaces), n.Depth, n.ID, st.FrameVersion+1)
		case PlanRecompact:
			why = fmt.Sprintf("root %d re-compacted into node %d (budget %d) at frame version %d", id, n.ID, p.Budget, st.FrameVersion+1)
			whyCk = why
		}
		if err := ss.setParent(id, n.ID, p.Kind == PlanRecompact); err != nil {
			return err
		}
		if err := ss.b.Delete(backend.Roots, u64(old.From)); err != nil {
			return err
		}
		if err := ss.invalidateMarker(id, why, st.FrameVersion+1, res); err != nil {
			return err
		}
	}
	if p.Kind == PlanRecompact {
		// The children now belong to the new node.
		for _, c := range p.Children {
			if err := ss.setParent(c.ID, n.ID, false); err != nil {
				return err
			}
		}
	}
	if len(p.Replaces) > 0 {
		st.FrameVersion++
		if err := ss.invalidateCheckpoints(p.From, whyCk, st.FrameVersion, res); err != nil {
			return err
		}
	}
	// The facts the raw span requires, as computed now: what is open at
	// its end, where the next span starts (openBefore), and over a prefix
	// what a digest extending it needs.
	rec := toNodeRec(&n)
	rec.setFacts(toFactsRec(required))
	if err := ss.putNodeRecord(&rec); err != nil {
		return err
	}
	if err := ss.put(backend.Roots, recRoot, u64(n.From), &rootRec{V: recordVersion, From: n.From, Node: n.ID, To: n.To, Depth: n.Depth}); err != nil {
		return err
	}
	st.Roots += 1 - len(p.Replaces)
	switch p.Kind {
	case PlanSpan:
		st.CompactedTo = p.To
		st.CompactedBytes += spanBytes
	case PlanFold, PlanDigest:
		if p.From <= st.FoldRefusedTo && st.FoldRefusedTo <= p.To {
			// The roots of the refused fold are folded now (a retry, or a
			// digest): the policy goes on as before that refusal — over the
			// roots after an earlier refused fold, and never over roots
			// this node now covers.
			st.FoldRefusedTo = min(st.FoldRefusedPrev, p.From-1)
			st.FoldRefusedPrev = 0
		}
	}
	m := marker.Marker{ID: n.ID, Node: n.ID, Depth: n.Depth, FrameVersion: st.FrameVersion, Boundary: n.To, Status: marker.StatusValid, Unchecked: unchecked}
	if err := ss.putMarker(&m); err != nil {
		return err
	}
	ids := make([]uint64, 0, len(prefix)+1)
	for _, r := range prefix {
		ids = append(ids, r.Node)
	}
	ids = append(ids, n.ID)
	ck, err := ss.putCheckpoint(st, n.To, ids, fmt.Sprintf("node %d committed", n.ID))
	if err != nil {
		return err
	}
	res.Node, res.Marker, res.Checkpoint = &n, m.ID, ck
	return ss.putState(st)
}

func joinIDs(ids []uint64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(parts, ",")
}
