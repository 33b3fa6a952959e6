package store

import (
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/tier"
	"slices"
)

// FormatVersion is the newest on-disk format this strata knows. It reads
// and writes every format from 1 to FormatVersion; a database with a
// higher version is refused at Open with ErrFormatTooNew.
const FormatVersion = 5

// DefaultFormat is the format Open creates when Options.Format is zero:
// format 5 (below). Format 4's journal lets a group commit of many
// sessions write a few pages where formats 2 and 3 write one or two per
// session, and its folds fill each session's leaves as one session
// appending alone does; format 5 keeps that for the sessions that append a
// few events at a time, and keeps a session that only appends runs of
// events (a replay, an import) in its own bucket as format 2 did, where
// format 4 wrote the events bucket's branch pages and the hot bucket's
// leaf besides. Format 3, which put every session's newest records in one
// bucket without a journal, took 10% more space where sessions append in
// turn (a leaf holding one session's newest events also held its
// neighbour's, and the splits there left part-filled pages).
const DefaultFormat = 5

// ledgerTextsInEvents reports whether format f keeps the text of a
// disposition (its reason), a constraint or an artifact only in the event
// that made it, the record naming that event by seq: format 5. Formats 1 to
// 4 copy it into the record, and a text of kilobytes (the policy a tau-bench
// session starts with, a failed tool's output) took two pages of the
// session's ledger bucket beside the event's own, written again by every
// commit that touched the bucket: 1.7 of the 16.5 pages a commit wrote in
// the bulk replay of the real sessions.
func ledgerTextsInEvents(f int) bool { return f >= 5 }

// Bucket layout, format 5: format 4's (below), and
//
//	meta/next                   → the number the next session to turn hot
//	                              gets, and its CRC32C (encodeNext)
//	s/<id>/                     → as in format 4, and while the session is
//	                              cold, as in format 2:
//	  0xFE <seq>                → eventRec: the events it was appended
//	  0xFF                      → stateRec
//	  0xFF "open"/<id>          → the calls and resources open at head
//	disp|constr|art/<key>       → the ledger's records without their texts
//	                              (ledgerTextsInEvents)
//	h/<n> 0x02                  → a hot session's head when it turned hot:
//	                              its last event in s/<id> (8 bytes)
//
// A session is cold from its first append until its first append of a few
// events (one that format 4 would journal): while cold it has no number
// (no key 0x00) and no key in meta, j, h or e, and an append writes its own
// bucket's newest leaf, with the state and open calls after the newest
// event, as format 2 and bare bbolt with a bucket per session do. The first
// small append turns it hot (warm): it takes the next number, its state and
// open calls move to h, e gets its id key, and from then on it is a session
// of format 4 — the journal, folds into e, runs straight to
// e when it has nothing in the journal — whose oldest events stay in its
// own bucket: its raw log is those, then its events in e, then in j. A
// session is cold exactly when its bucket holds the state key: a hot one
// whose state in h is lost reads as damaged, never as a cold one with old
// state, and Verify reports any key of a cold session's number in j, h or
// e.
//
// Bucket layout (one bbolt file), format 4:
//
//	meta/format, meta/next      → as in format 3
//	j/                          → the journal: the newest events of every
//	                              session, in the order they were appended:
//	  <g>                       → <n> <seq> eventRec (g, n, seq big-endian;
//	                              g counts from 1 since the journal was last
//	                              folded)
//	h/                          → the hot records of every session:
//	  <n> 0x00                  → stateRec
//	  <n> 0x01                  → g of the session's first event in j, when
//	                              it has events there
//	  <n> 'o' <id>              → the calls and resources open at head
//	e/                          → the events folded from the journal, and
//	                              those of large appends:
//	  <n> 0xFE <seq>            → eventRec
//	  <n> 0xFF 0x00             → the session's id
//	s/<id>/                     → as in format 3
//
// An append of a few events writes them to the journal, where the appends
// of one group commit lie side by side whatever their sessions, and the
// session's state in h, where every session's state is a few dozen bytes
// beside the others': a commit of 64 sessions writes a handful of leaves
// where format 3 wrote one per session. When the journal holds
// Options.JournalEvents events, the commit that finds it so folds it: every event
// moves to its session's keys in e — many events per session at once, so
// e's leaves fill as one session's appends fill them — and the journal
// starts again empty. A session's events are those in e, then those in j
// from the event h names: reads of the raw log merge the two. An append
// of many events (directEvents) to a session with nothing in the journal
// goes straight to e.
//
// Format 3:
//
//	meta/format                 → metaRec
//	meta/next                   → the number the next session gets (4 bytes)
//	e/                          → the events of every session, keyed by
//	                              the session's number:
//	  <n> 0xFE <seq>            → eventRec (n and seq big-endian)
//	  <n> 0xFF                  → stateRec: head, turn, frame, counters
//	  <n> 0xFF 0x00             → the session's id
//	  <n> 0xFF 'o' <id>         → the calls and resources open at head
//	s/<id>/                     → a session's bucket, holding:
//	  0x00                      → its number n (4 bytes)
//	  nodes, roots, markers, ckpts, ckvalid, audit, disp, constr, art
//	                            → as in format 2
//
// One bucket holds the newest events of every session, each session's
// state and open calls right after its newest event: an append writes the
// leaf holding them and the branch pages above it, and a group commit of
// many sessions shares those branch pages, where in format 2 every session
// paid a branch page of its own (2.08 pages per event in commits of 64
// sessions, 1.46–1.53 here: bbolt's TxStats). Only the open calls of the
// ledger are there — the calls and results that change them are events an
// append writes anyway; the dispositions, constraints and artifacts there
// too made the newest leaf split more often, 6% more pages. The session's
// bucket is written only when its summaries or the rest of its ledger
// change.
//
// The session's id after its state is there for bbolt's splits as much as
// for Verify: a leaf that overflows keeps at least two keys for the new
// page and, when no key breaks its fill first, also moves the one before
// them — with only the state after the newest event, every split moved the
// event before the newest one too, and leaves were 78% full; with two
// fixed keys after it, 88% (format 2 has the state and the open bucket).
//
// Format 2:
//
//	meta/format                 → metaRec
//	s/<id>/                     → a session's bucket, holding:
//	  0xFE <seq>                → eventRec (seq big-endian)
//	  0xFF                      → stateRec: head, turn, frame, counters
//	  0xFF "open"/<id>          → the calls and resources open at head
//	  nodes/<id>                → nodeRec
//	  roots/<from>              → rootRec: the current roots in seq order
//	  markers/<id>              → markerRec (a marker's id is its node's)
//	  ckpts/<id>                → checkpointRec
//	  ckvalid/<seq,id>          → indexRec: usable checkpoints by seq
//	  audit/<id>                → auditRec: refused compactions
//	  disp|constr|art/<key>     → the rest of the ledger at head
//
// The events sort after the bucket names, and the state and the open calls
// right after the newest event: an append writes one leaf of the session's
// bucket (with its branch pages) and the root's, as bare bbolt writing one
// bucket does — a call or its result too, while the calls open at a time
// are few enough for bbolt to keep their bucket inline. (Putting the other
// ledger buckets there as well made the leaf split more often: more pages.)
// Every level of bucket nesting costs a page per commit, since a bucket's
// root page id lives in its parent's leaf.
//
// Format 1 nested the same buckets one level deeper and kept the events in a
// bucket of their own — sessions/<id>/state, sessions/<id>/l0/<seq>, the
// rest as in format 2 — two more pages per append. strata reads and writes
// format 1 files as they are.
var (
	bucketMeta = []byte("meta")
	keyFormat  = []byte("format")

	sessionPrefix = []byte("s/")       // format 2: the root's session buckets
	eventPrefix   = byte(0xFE)         // format 2: event keys in a session's bucket
	stateKey2     = []byte{0xFF}       // format 2: the state, after every event
	keyOpen2      = []byte("\xffopen") // format 2: the open bucket, after the state

	bucketEvents3 = []byte("e")    // formats 3 and 4: every session's events (3: and state and open calls)
	keyNextSess3  = []byte("next") // formats 3 to 5: in meta, the next session number
	keyNum3       = []byte{0x00}   // formats 3 to 5: in a session's bucket, its number (5: once hot)
	stateSuffix3  = byte(0xFF)     // format 3: <n> 0xFF is the state
	openSuffix3   = byte('o')      // format 3: <n> 0xFF 'o' <id> is an open call
	idSuffix3     = byte(0x00)     // format 3: <n> 0xFF 0x00 is the session's id

	bucketJournal4  = []byte("j") // format 4: the newest events of every session, in append order
	bucketHot4      = []byte("h") // format 4: every session's state, journal start and open calls
	stateSuffix4    = byte(0x00)  // format 4: in h, <n> 0x00 is the state
	journalSuffix4  = byte(0x01)  // format 4: in h, <n> 0x01 is the session's first journal key
	coldHeadSuffix5 = byte(0x02)  // format 5: in h, <n> 0x02 is the head a session had when it turned hot

	bucketSessions = []byte("sessions") // format 1
	bucketL0       = []byte("l0")       // format 1
	keyState       = []byte("state")    // format 1

	bucketNodes   = []byte("nodes")
	bucketRoots   = []byte("roots")
	bucketMarkers = []byte("markers")
	bucketCkpts   = []byte("ckpts")
	bucketCkValid = []byte("ckvalid")
	bucketAudit   = []byte("audit")
	bucketOpen    = []byte("open")
	bucketDisp    = []byte("disp")
	bucketConstr  = []byte("constr")
	bucketArt     = []byte("art")
)

// sessionBuckets lists the buckets inside a session's bucket, made with
// it: format 1 adds l0.
var sessionBuckets = [][]byte{
	bucketNodes, bucketRoots, bucketMarkers, bucketCkpts, bucketCkValid,
	bucketAudit, bucketOpen, bucketDisp, bucketConstr, bucketArt,
}

// subBuckets returns the names of the buckets inside a session's bucket in
// format f, as they are in the file (bucketName).
func subBuckets(f int) [][]byte {
	if f == 1 {
		return append([][]byte{bucketL0}, sessionBuckets...)
	}
	out := make([][]byte, 0, len(sessionBuckets))
	for _, name := range sessionBuckets {
		if f >= 3 && f < 5 && string(name) == string(bucketOpen) {
			continue // in the events bucket (3), the hot bucket (4)
		}
		out = append(out, bucketName(f, name))
	}
	return out
}

// bucketName returns the name that bucket name has inside a session's
// bucket of format f. Format 2 puts the open calls and resources after the
// state (0xFF "open"): a call or its result then changes only the leaf of
// the newest events, which the append writes anyway, as long as the calls
// open at a time are few enough for bbolt to keep the bucket inline.
func bucketName(f int, name []byte) []byte {
	if f != 1 && string(name) == string(bucketOpen) {
		return keyOpen2
	}
	return name
}

// ledgerBucket maps a ledger class to its bucket and record type.
func ledgerBucket(c tier.Class) ([]byte, recType) {
	switch c {
	case tier.ClassOpen:
		return bucketOpen, recOpen
	case tier.ClassDisposition:
		return bucketDisp, recDisp
	case tier.ClassConstraint:
		return bucketConstr, recConstraint
	default:
		return bucketArt, recArtifact
	}
}

// Record versions; a record carries its version in field "v".
const recordVersion = 1

type metaRec struct {
	V         int    `msgpack:"v"`
	Format    int    `msgpack:"f"`
	CreatedBy string `msgpack:"c,omitempty"`
	Created   int64  `msgpack:"t,omitempty"`
}

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
}

func toEventRec(e *tier.Event) eventRec {
	return eventRec{V: recordVersion, Seq: e.Seq, Turn: e.Turn, Time: e.Time, Kind: e.Kind,
		ID: e.ID, Key: e.Key, Name: e.Name, Failed: e.Failed, By: e.By, Text: e.Text, Opener: e.Opener, Prior: e.PriorFailure}
}

func (r *eventRec) event() tier.Event {
	return tier.Event{Seq: r.Seq, Turn: r.Turn, Time: r.Time, Kind: r.Kind,
		ID: r.ID, Key: r.Key, Name: r.Name, Failed: r.Failed, By: r.By, Text: r.Text, Opener: r.Opener, PriorFailure: r.Prior}
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
	// Facts, on a node over a prefix 1..To, is what its raw span required
	// (less what only validation needs), computed when it was committed:
	// the prefix a digest extends (tier.ExtendPrefix). Older versions of
	// strata skip the field, and a node without it has its facts computed
	// from the raw log when a digest needs them.
	Facts *factsRec `msgpack:"x,omitempty"`
	// FactsInClaims stands for Facts when they were exactly the node's
	// claims (an extractive summary): the facts are not stored twice.
	FactsInClaims bool `msgpack:"xc,omitempty"`
}

// facts returns the facts recorded with a node over a prefix, or nil.
func (r *nodeRec) facts() *factsRec {
	if r.FactsInClaims {
		return &factsRec{Unresolved: r.Claims.Unresolved, Failures: r.Claims.Failures, Dispositions: r.Claims.Dispositions,
			Constraints: r.Claims.Constraints, Artifacts: r.Claims.Artifacts}
	}
	return r.Facts
}

// setFacts records f with the node: as a flag when they are its claims.
func (r *nodeRec) setFacts(f *factsRec) {
	c := &r.Claims
	if slices.Equal(f.Unresolved, c.Unresolved) && slices.Equal(f.Failures, c.Failures) && slices.Equal(f.Dispositions, c.Dispositions) &&
		slices.Equal(f.Constraints, c.Constraints) && slices.Equal(f.Artifacts, c.Artifacts) {
		r.Facts, r.FactsInClaims = nil, true
		return
	}
	r.Facts, r.FactsInClaims = f, false
}

// factsRec is the Required of a prefix span 1..To, less Resolved (nothing
// is open before seq 1) and ResolvedInside.
type factsRec struct {
	Unresolved   []tier.Open        `msgpack:"u,omitempty"`
	Failures     []tier.Resolution  `msgpack:"f,omitempty"`
	Dispositions []tier.Disposition `msgpack:"d,omitempty"`
	Constraints  []tier.Constraint  `msgpack:"c,omitempty"`
	Artifacts    []tier.Artifact    `msgpack:"a,omitempty"`
}

func toFactsRec(r *tier.Required) *factsRec {
	return &factsRec{Unresolved: r.Unresolved, Failures: r.Failures, Dispositions: r.Dispositions, Constraints: r.Constraints, Artifacts: r.Artifacts}
}

// required returns the Required of the span 1..to that f records.
func (f *factsRec) required(to uint64) tier.Required {
	return tier.Required{From: 1, To: to, Unresolved: f.Unresolved, Failures: f.Failures, Dispositions: f.Dispositions,
		Constraints: f.Constraints, Artifacts: f.Artifacts}
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
