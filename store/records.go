package store

import (
	"slices"

	"github.com/strata-go/strata/backend"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
)

// The records the store keeps in a backend (backend.go's places): a
// session's state and events, and by table its ledger entries, nodes,
// roots, markers, checkpoints, checkpoint index and audit. A disposition,
// constraint or artifact record names the event that made it by seq
// instead of copying its text (a reason, a policy, a failed tool's output):
// a text of kilobytes is stored once, in its event.

// ledgerTable maps a ledger class to its table and record type.
func ledgerTable(c tier.Class) (backend.Table, recType) {
	switch c {
	case tier.ClassOpen:
		return backend.Open, recOpen
	case tier.ClassDisposition:
		return backend.Dispositions, recDisp
	case tier.ClassConstraint:
		return backend.Constraints, recConstraint
	default:
		return backend.Artifacts, recArtifact
	}
}

// Record versions; a record carries its version in field "v".
const recordVersion = 1

// stateRec is a session's head and frame.
type stateRec struct {
	V             int    `msgpack:"v"`
	Head          uint64 `msgpack:"h,omitempty"` // last seq
	Turn          uint64 `msgpack:"t,omitempty"` // turn of the last event
	FrameVersion  uint64 `msgpack:"f,omitempty"`
	CompactedTo   uint64 `msgpack:"c,omitempty"` // roots cover exactly [1, CompactedTo]
	Roots         int    `msgpack:"r,omitempty"` // number of roots
	NextNode      uint64 `msgpack:"n,omitempty"` // last node id used
	NextCk        uint64 `msgpack:"k,omitempty"` // last checkpoint id used
	NextAudit     uint64 `msgpack:"a,omitempty"` // last audit id used
	RefusedTo     uint64 `msgpack:"x,omitempty"` // end of the last refused depth-1 span starting at CompactedTo+1
	RefusedTurn   uint64 `msgpack:"y,omitempty"` // turn of the event at RefusedTo
	FoldRefusedTo uint64 `msgpack:"z,omitempty"` // end of the last refused fold: the policy folds only roots after it
	// FoldRefusedPrev is FoldRefusedTo before the refusal that set it: a
	// retry of that fold that commits restores it, so that the policy goes
	// on as if the fold had committed the first time.
	FoldRefusedPrev uint64 `msgpack:"zp,omitempty"`
	// Bytes, CompactedBytes and RefusedBytes are the bytes the events
	// 1..Head, 1..CompactedTo and 1..RefusedTo take in a resumed context
	// (checkpoint.EventTextLen), summed: the tail's size is their
	// difference, read in O(1) however long the tail (Info.TailTokens).
	Bytes          uint64 `msgpack:"b,omitempty"`
	CompactedBytes uint64 `msgpack:"cb,omitempty"`
	RefusedBytes   uint64 `msgpack:"xb,omitempty"`
	// Parent, ForkAt and ForkMarker are a fork's origin (DB.Fork): the
	// session it was forked from, the parent's head at the fork — the
	// fork's events 1..ForkAt are the parent's, read from it — and the
	// parent's marker whose frame it took. Empty for a session of its own.
	Parent     string `msgpack:"p,omitempty"`
	ForkAt     uint64 `msgpack:"pq,omitempty"`
	ForkMarker uint64 `msgpack:"pm,omitempty"`
	// ForkCheckpoint is, for a fork at a fallback (DB.ForkFallback), the
	// parent's checkpoint it took, which the fork holds under the same id,
	// and ForkReason why the parent's resume fell back to it: the fork
	// resumes from it, saying so, until it commits a frame of its own.
	ForkCheckpoint uint64 `msgpack:"pk,omitempty"`
	ForkReason     string `msgpack:"pr,omitempty"`
}

type eventRec struct {
	V      int       `msgpack:"v"`
	Seq    uint64    `msgpack:"q"`
	Turn   uint64    `msgpack:"t,omitempty"`
	Time   int64     `msgpack:"m,omitempty"`
	Kind   tier.Kind `msgpack:"k"`
	ID     string    `msgpack:"i,omitempty"`
	Key    string    `msgpack:"y,omitempty"`
	Name   string    `msgpack:"n,omitempty"`
	Failed bool      `msgpack:"f,omitempty"`
	By     string    `msgpack:"b,omitempty"`
	Text   string    `msgpack:"x,omitempty"`
	Opener uint64    `msgpack:"o,omitempty"`
	Prior  uint64    `msgpack:"pf,omitempty"` // tier.Event.PriorFailure
	Ref    string    `msgpack:"r,omitempty"`
}

func toEventRec(e *tier.Event) eventRec {
	return eventRec{V: recordVersion, Seq: e.Seq, Turn: e.Turn, Time: e.Time, Kind: e.Kind,
		ID: e.ID, Key: e.Key, Name: e.Name, Failed: e.Failed, By: e.By, Text: e.Text, Opener: e.Opener, Prior: e.PriorFailure, Ref: e.Ref}
}

func (r *eventRec) event() tier.Event {
	return tier.Event{Seq: r.Seq, Turn: r.Turn, Time: r.Time, Kind: r.Kind,
		ID: r.ID, Key: r.Key, Name: r.Name, Failed: r.Failed, By: r.By, Text: r.Text, Opener: r.Opener, PriorFailure: r.Prior, Ref: r.Ref}
}

// refRec is an entry of the Refs table, keyed by a source record's ref:
// the seqs of the events made from it, consecutive.
type refRec struct {
	V     int    `msgpack:"v"`
	First uint64 `msgpack:"f"`
	Last  uint64 `msgpack:"l"`
}

type nodeRec struct {
	V            int         `msgpack:"v"`
	ID           uint64      `msgpack:"i"`
	Depth        tier.Depth  `msgpack:"d"`
	From         uint64      `msgpack:"f"`
	To           uint64      `msgpack:"t"`
	Children     []uint64    `msgpack:"c,omitempty"`
	Narrative    string      `msgpack:"n,omitempty"`
	Claims       tier.Claims `msgpack:"l"`
	FrameVersion uint64      `msgpack:"fv,omitempty"`
	Summarizer   string      `msgpack:"s,omitempty"`
	Tokens       int         `msgpack:"tk,omitempty"`
	Budget       int         `msgpack:"b,omitempty"`
	SpanHash     []byte      `msgpack:"h,omitempty"`
	Parent       uint64      `msgpack:"p,omitempty"`
	SupersededBy uint64      `msgpack:"sb,omitempty"`
	Unchecked    bool        `msgpack:"uc,omitempty"`
	Repairs      uint64      `msgpack:"rp,omitempty"`
	// Facts is what the node's raw span required (less what only
	// validation needs), computed when it was committed: what is open at
	// its boundary, where the next span starts, and on a node over a
	// prefix 1..To what a digest extends (tier.ExtendPrefix).
	Facts *factsRec `msgpack:"x,omitempty"`
	// FactsInClaims stands for Facts when they were exactly the node's
	// claims (an extractive summary): the facts are not stored twice.
	FactsInClaims bool `msgpack:"xc,omitempty"`
	// Successes are the facts' Successes when FactsInClaims: they are no
	// claim.
	Successes []tier.Success `msgpack:"xs,omitempty"`
}

// facts returns the facts recorded with a node over a prefix, or nil.
func (r *nodeRec) facts() *factsRec {
	if r.FactsInClaims {
		c := &r.Claims
		return &factsRec{Unresolved: c.Unresolved, Failures: c.Failures, Dispositions: c.Dispositions,
			Constraints: c.Constraints, Artifacts: c.Artifacts, Requests: c.Requests, RequestsLeftOut: c.RequestsLeftOut,
			Plan: c.Plan, PlanAt: c.PlanAt, Successes: r.Successes}
	}
	return r.Facts
}

// setFacts records f with the node: as a flag when they are its claims.
func (r *nodeRec) setFacts(f *factsRec) {
	c := &r.Claims
	if slices.Equal(f.Unresolved, c.Unresolved) && slices.Equal(f.Failures, c.Failures) && slices.Equal(f.Dispositions, c.Dispositions) &&
		slices.Equal(f.Constraints, c.Constraints) && slices.Equal(f.Artifacts, c.Artifacts) &&
		slices.Equal(f.Requests, c.Requests) && f.RequestsLeftOut == c.RequestsLeftOut &&
		slices.Equal(f.Plan, c.Plan) && f.PlanAt == c.PlanAt {
		r.Facts, r.FactsInClaims, r.Successes = nil, true, f.Successes
		return
	}
	r.Facts, r.FactsInClaims, r.Successes = f, false, nil
}

// factsRec is the Required of a prefix span 1..To, less Resolved (nothing
// is open before seq 1) and ResolvedInside.
type factsRec struct {
	Unresolved   []tier.Open        `msgpack:"u,omitempty"`
	Failures     []tier.Resolution  `msgpack:"f,omitempty"`
	Dispositions []tier.Disposition `msgpack:"d,omitempty"`
	Constraints  []tier.Constraint  `msgpack:"c,omitempty"`
	Artifacts    []tier.Artifact    `msgpack:"a,omitempty"`
	// The user's requests, the plan at To, and the first success on each
	// target (what fixes a failure before a digest's next span).
	Requests        []tier.Request  `msgpack:"rq,omitempty"`
	RequestsLeftOut int             `msgpack:"rl,omitempty"`
	Plan            []tier.PlanItem `msgpack:"p,omitempty"`
	PlanAt          uint64          `msgpack:"pa,omitempty"`
	Successes       []tier.Success  `msgpack:"s,omitempty"`
}

func toFactsRec(r *tier.Required) *factsRec {
	return &factsRec{Unresolved: r.Unresolved, Failures: r.Failures, Dispositions: r.Dispositions, Constraints: r.Constraints, Artifacts: r.Artifacts,
		Requests: r.Requests, RequestsLeftOut: r.RequestsLeftOut, Plan: r.Plan, PlanAt: r.PlanAt, Successes: r.Successes}
}

// required returns the Required of the span 1..to that f records.
func (f *factsRec) required(to uint64) tier.Required {
	return tier.Required{From: 1, To: to, Unresolved: f.Unresolved, Failures: f.Failures, Dispositions: f.Dispositions,
		Constraints: f.Constraints, Artifacts: f.Artifacts, Requests: f.Requests, RequestsLeftOut: f.RequestsLeftOut,
		Plan: f.Plan, PlanAt: f.PlanAt, Successes: f.Successes}
}

func toNodeRec(n *tier.Node) nodeRec {
	return nodeRec{V: recordVersion, ID: n.ID, Depth: n.Depth, From: n.From, To: n.To, Children: n.Children,
		Narrative: n.Narrative, Claims: n.Claims, FrameVersion: n.FrameVersion, Summarizer: n.Summarizer,
		Tokens: n.Tokens, Budget: n.Budget, SpanHash: n.SpanHash, Parent: n.Parent, SupersededBy: n.SupersededBy,
		Unchecked: n.Unchecked, Repairs: n.Repairs}
}

func (r *nodeRec) node() tier.Node {
	return tier.Node{ID: r.ID, Depth: r.Depth, From: r.From, To: r.To, Children: r.Children,
		Narrative: r.Narrative, Claims: r.Claims, FrameVersion: r.FrameVersion, Summarizer: r.Summarizer,
		Tokens: r.Tokens, Budget: r.Budget, SpanHash: r.SpanHash, Parent: r.Parent, SupersededBy: r.SupersededBy,
		Unchecked: r.Unchecked, Repairs: r.Repairs}
}

type rootRec struct {
	V     int        `msgpack:"v"`
	From  uint64     `msgpack:"f"` // also the key
	Node  uint64     `msgpack:"n"`
	To    uint64     `msgpack:"t"`
	Depth tier.Depth `msgpack:"d"`
}

type markerRec struct {
	V             int           `msgpack:"v"`
	ID            uint64        `msgpack:"i"`
	Node          uint64        `msgpack:"n"`
	Depth         tier.Depth    `msgpack:"d"`
	FrameVersion  uint64        `msgpack:"f,omitempty"`
	Boundary      uint64        `msgpack:"b"`
	Status        marker.Status `msgpack:"s"`
	Reason        string        `msgpack:"r,omitempty"`
	InvalidatedAt uint64        `msgpack:"x,omitempty"`
	Unchecked     bool          `msgpack:"u,omitempty"`
}

type checkpointRec struct {
	V             int      `msgpack:"v"`
	ID            uint64   `msgpack:"i"`
	Seq           uint64   `msgpack:"q"`
	Prefix        []uint64 `msgpack:"p,omitempty"`
	FrameVersion  uint64   `msgpack:"f,omitempty"`
	Why           string   `msgpack:"w,omitempty"`
	Status        uint8    `msgpack:"s"`
	Reason        string   `msgpack:"r,omitempty"`
	InvalidatedAt uint64   `msgpack:"x,omitempty"`
}

// Refusal is the audit record of a refused compaction: the span, what the
// plan was, every failed condition, and the checkpoint written for it.
type Refusal struct {
	ID           uint64           `msgpack:"i" json:"id"`
	Depth        tier.Depth       `msgpack:"d" json:"depth"`
	From         uint64           `msgpack:"f" json:"from"`
	To           uint64           `msgpack:"t" json:"to"`
	FrameVersion uint64           `msgpack:"fv,omitempty" json:"frame_version"`
	Summarizer   string           `msgpack:"s,omitempty" json:"summarizer"`
	Attempt      int              `msgpack:"a,omitempty" json:"attempt"`
	Checkpoint   uint64           `msgpack:"k" json:"checkpoint"`
	Failures     []marker.Failure `msgpack:"r" json:"failures"`
}

type auditRec struct {
	V int `msgpack:"v"`
	Refusal
}

type indexRec struct {
	V  int    `msgpack:"v"`
	ID uint64 `msgpack:"i"`
}
