package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// dumpOptions are the flags and arguments of `strata dump`.
type dumpOptions struct {
	json    bool
	raw     bool
	session string
	timeout time.Duration
	db      string

	out      *countingWriter // the output, counted
	released int64           // output bytes at the last ReleaseMapped
	records  int             // records written
}

// releaseEvery is how many bytes dump writes between two calls of
// Snapshot.ReleaseMapped: a dump of a database larger than memory then
// keeps a bounded resident set (the pages read since the last call)
// instead of the whole mapped file. The output is about as large as the
// records it was read from.
const releaseEvery = 8 << 20

// written is called after each record written; every releaseEvery bytes
// of output it lets the kernel take back the database pages read so far.
func (o *dumpOptions) written(s *store.Snapshot) {
	o.records++
	if o.out != nil && (o.out.n-o.released >= releaseEvery || o.records%releaseRecords == 0) {
		o.released = o.out.n
		s.ReleaseMapped()
	}
}

// releaseRecords bounds the records between two calls of ReleaseMapped
// too: small records (markers, checkpoints) are read through pages that
// their output does not account for.
const releaseRecords = 2048

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

// Write implements io.Writer.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// newDumpCommand returns `strata dump`.
func newDumpCommand() *cobra.Command {
	o := &dumpOptions{}
	cmd := &cobra.Command{
		Use:   "dump [--json] [--raw] [--session ID] DB",
		Short: "Print everything a database holds, per session",
		Long: `Print everything in the database, per session, from one read transaction:
the frame (version, depth, compacted_to), the roots, every node, the markers
and checkpoints with their status and reason, the ledger at head, the audit
of refused compactions and, with --raw, the raw events.

Without --json the output is a readable tree: each root with the nodes it
covers indented below it, tier by tier. With --raw the events follow as JSONL
lines, unindented, so that 'grep "^{"' gives a log that replay accepts.

With --json the output is one JSON document:
  {"format_version":…, "sessions":[{"id":…, "head_seq":…, "frame":{…},
   "roots":[…], "nodes":[…], "markers":[…], "checkpoints":[…], "ledger":{…},
   "audit":[…], "events":[…]}]}
where "events" (present with --raw) holds the events in the form of
shared/spec/events.md: replaying them into a new database with the same
replay flags gives the same dump.`,
		Args: exactArgs("DB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.db = args[0]
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print one JSON document")
	f.BoolVar(&o.raw, "raw", false, "include the raw events")
	f.StringVar(&o.session, "session", "", "dump only this session")
	addTimeoutFlag(cmd, &o.timeout)
	return cmd
}

// validate checks the flags; its errors are bad usage.
func (o *dumpOptions) validate() error {
	if o.session != "" {
		if err := store.CheckSession(o.session); err != nil {
			return &usageError{err: err}
		}
	}
	return checkTimeout(o.timeout)
}

// run dumps the database from one read transaction.
func (o *dumpOptions) run(out io.Writer) (err error) {
	db, err := openReadOnly(o.db, o.timeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	o.out = &countingWriter{w: out}
	w := bufio.NewWriterSize(o.out, 64<<10)
	err = db.View(func(s *store.Snapshot) error {
		var ids []string
		if o.session != "" {
			if _, err := s.Info(o.session); err != nil {
				return err
			}
			ids = []string{o.session}
		} else if ids, err = s.Sessions(); err != nil {
			return err
		}
		format, err := s.FormatVersion()
		if err != nil {
			return err
		}
		if o.json {
			return o.writeJSON(w, s, format, ids)
		}
		return o.writeText(w, s, format, ids)
	})
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// The JSON forms of the dump. Lists are never null.

// dumpFrame is a session's frame in the JSON dump.
type dumpFrame struct {
	Version     uint64 `json:"version"`
	Depth       int    `json:"depth"` // the greatest depth among the roots; 0 with no root
	CompactedTo uint64 `json:"compacted_to"`
	Roots       int    `json:"roots"`
	RefusedTo   uint64 `json:"refused_to"`
}

// dumpRoot is one current root in the JSON dump.
type dumpRoot struct {
	Node  uint64 `json:"node"`
	Depth int    `json:"depth"`
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
}

// dumpClaims is a node's claims in the JSON dump, every list present.
type dumpClaims struct {
	Resolved     []string           `json:"resolved"`
	Unresolved   []tier.Open        `json:"unresolved"`
	Dispositions []tier.Disposition `json:"dispositions"`
	Constraints  []tier.Constraint  `json:"constraints"`
	Artifacts    []tier.Artifact    `json:"artifacts"`
}

// dumpNode is a summary node in the JSON dump.
type dumpNode struct {
	ID           uint64     `json:"id"`
	Depth        int        `json:"depth"`
	From         uint64     `json:"from"`
	To           uint64     `json:"to"`
	Children     []uint64   `json:"children"`
	Root         bool       `json:"root"`
	Parent       uint64     `json:"parent"`
	Superseded   bool       `json:"superseded"`
	SupersededBy uint64     `json:"superseded_by"`
	FrameVersion uint64     `json:"frame_version"`
	Summarizer   string     `json:"summarizer"`
	Tokens       int        `json:"tokens"`
	Budget       int        `json:"budget"`
	Narrative    string     `json:"narrative"`
	Claims       dumpClaims `json:"claims"`
}

// dumpMarker is a recovery marker in the JSON dump, its reason always present.
type dumpMarker struct {
	ID            uint64 `json:"id"`
	Node          uint64 `json:"node"`
	Depth         int    `json:"depth"`
	FrameVersion  uint64 `json:"frame_version"`
	Boundary      uint64 `json:"boundary"`
	Status        string `json:"status"`
	Reason        string `json:"reason"`
	InvalidatedAt uint64 `json:"invalidated_at"`
}

// dumpCheckpoint is a raw checkpoint in the JSON dump.
type dumpCheckpoint struct {
	ID            uint64   `json:"id"`
	Seq           uint64   `json:"seq"`
	Status        string   `json:"status"`
	Reason        string   `json:"reason"`
	Prefix        []uint64 `json:"prefix"`
	FrameVersion  uint64   `json:"frame_version"`
	Why           string   `json:"why"`
	InvalidatedAt uint64   `json:"invalidated_at"`
}

// dumpLedger is the ledger at head in the JSON dump.
type dumpLedger struct {
	Open         []tier.Open        `json:"open"`
	Dispositions []tier.Disposition `json:"dispositions"`
	Constraints  []tier.Constraint  `json:"constraints"`
	Artifacts    []tier.Artifact    `json:"artifacts"`
}

// dumpRefusal is an audit record of a refused compaction in the JSON dump.
type dumpRefusal struct {
	ID           uint64           `json:"id"`
	Depth        int              `json:"depth"`
	From         uint64           `json:"from"`
	To           uint64           `json:"to"`
	FrameVersion uint64           `json:"frame_version"`
	Summarizer   string           `json:"summarizer"`
	Attempt      int              `json:"attempt"`
	Checkpoint   uint64           `json:"checkpoint"`
	Reasons      string           `json:"reasons"`
	Failures     []marker.Failure `json:"failures"`
}

// nonNil returns s, or an empty slice for nil: JSON lists are never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// toDumpNode converts a node to its JSON dump form.
func toDumpNode(n *tier.Node) dumpNode {
	c := &n.Claims
	return dumpNode{
		ID: n.ID, Depth: int(n.Depth), From: n.From, To: n.To, Children: nonNil(n.Children),
		Root: n.IsRoot(), Parent: n.Parent, Superseded: n.SupersededBy != 0, SupersededBy: n.SupersededBy,
		FrameVersion: n.FrameVersion, Summarizer: n.Summarizer, Tokens: n.Tokens, Budget: n.Budget,
		Narrative: n.Narrative,
		Claims: dumpClaims{Resolved: nonNil(c.Resolved), Unresolved: nonNil(c.Unresolved),
			Dispositions: nonNil(c.Dispositions), Constraints: nonNil(c.Constraints), Artifacts: nonNil(c.Artifacts)},
	}
}

// toDumpMarker converts a marker to its JSON dump form.
func toDumpMarker(m *marker.Marker) dumpMarker {
	return dumpMarker{ID: m.ID, Node: m.Node, Depth: int(m.Depth), FrameVersion: m.FrameVersion, Boundary: m.Boundary,
		Status: m.Status.String(), Reason: m.Reason, InvalidatedAt: m.InvalidatedAt}
}

// toDumpCheckpoint converts a checkpoint to its JSON dump form.
func toDumpCheckpoint(c *checkpoint.Checkpoint) dumpCheckpoint {
	return dumpCheckpoint{ID: c.ID, Seq: c.Seq, Status: c.Status.String(), Reason: c.Reason, Prefix: nonNil(c.Prefix),
		FrameVersion: c.FrameVersion, Why: c.Why, InvalidatedAt: c.InvalidatedAt}
}

// toDumpLedger converts a ledger to its JSON dump form, sorted.
func toDumpLedger(l *tier.Ledger) dumpLedger {
	return dumpLedger{Open: l.OpenList(), Dispositions: l.DispositionList(), Constraints: l.ConstraintList(), Artifacts: l.ArtifactList()}
}

// toDumpRefusal converts an audit record to its JSON dump form.
func toDumpRefusal(r *store.Refusal) dumpRefusal {
	ie := marker.InvalidError{Failures: r.Failures}
	return dumpRefusal{ID: r.ID, Depth: int(r.Depth), From: r.From, To: r.To, FrameVersion: r.FrameVersion,
		Summarizer: r.Summarizer, Attempt: r.Attempt, Checkpoint: r.Checkpoint, Reasons: ie.Reasons(),
		Failures: nonNil(r.Failures)}
}

// frameOf returns the frame of a session: its info and the depth of its
// deepest root.
func frameOf(info store.Info, roots []tier.Node) dumpFrame {
	f := dumpFrame{Version: info.FrameVersion, CompactedTo: info.CompactedTo, Roots: info.Roots, RefusedTo: info.RefusedTo}
	for i := range roots {
		f.Depth = max(f.Depth, int(roots[i].Depth))
	}
	return f
}

// jsonWriter writes one JSON document piece by piece, indented, so that no
// more than one record (a node, an event) is held in memory at a time.
type jsonWriter struct {
	w   *bufio.Writer
	buf bytes.Buffer
	enc *json.Encoder
	err error
}

// newJSONWriter returns a jsonWriter on w that leaves <, > and & alone.
func newJSONWriter(w *bufio.Writer) *jsonWriter {
	j := &jsonWriter{w: w}
	j.enc = json.NewEncoder(&j.buf)
	j.enc.SetEscapeHTML(false)
	return j
}

// raw writes s as it is.
func (j *jsonWriter) raw(s string) {
	if j.err == nil {
		_, j.err = j.w.WriteString(s)
	}
}

// value writes v, its continuation lines indented by indent.
func (j *jsonWriter) value(indent string, v any) {
	if j.err != nil {
		return
	}
	j.buf.Reset()
	j.enc.SetIndent(indent, "  ")
	if j.err = j.enc.Encode(v); j.err != nil {
		return
	}
	_, j.err = j.w.Write(bytes.TrimSuffix(j.buf.Bytes(), []byte("\n")))
}

// key writes the start of an object member at indent; first says whether
// it is the object's first member.
func (j *jsonWriter) key(indent, name string, first bool) {
	if !first {
		j.raw(",")
	}
	j.raw("\n" + indent)
	j.value("", name)
	j.raw(": ")
}

// array writes a JSON array whose elements each() emits, one at a time,
// through the function it is given. indent is the indent of the line that
// holds the opening bracket.
func (j *jsonWriter) array(indent string, each func(emit func(v any)) error) error {
	j.raw("[")
	n := 0
	err := each(func(v any) {
		if n > 0 {
			j.raw(",")
		}
		j.raw("\n" + indent + "  ")
		j.value(indent+"  ", v)
		n++
	})
	if n > 0 {
		j.raw("\n" + indent)
	}
	j.raw("]")
	if err != nil {
		return err
	}
	return j.err
}

// writeJSON writes the JSON dump of the sessions ids.
func (o *dumpOptions) writeJSON(w *bufio.Writer, s *store.Snapshot, format int, ids []string) error {
	j := newJSONWriter(w)
	j.raw("{")
	j.key("  ", "format_version", true)
	j.value("", format)
	j.key("  ", "sessions", false)
	j.raw("[")
	for i, id := range ids {
		if i > 0 {
			j.raw(",")
		}
		j.raw("\n    ")
		if err := o.writeSessionJSON(j, s, id); err != nil {
			return err
		}
	}
	if len(ids) > 0 {
		j.raw("\n  ")
	}
	j.raw("]")
	j.raw("\n}\n")
	return j.err
}

// writeSessionJSON writes one session's object, streaming its nodes,
// markers, checkpoints, audit and events one at a time.
func (o *dumpOptions) writeSessionJSON(j *jsonWriter, s *store.Snapshot, id string) error {
	const in = "      " // the indent of the session's members
	info, err := s.Info(id)
	if err != nil {
		return err
	}
	roots, err := s.Roots(id)
	if err != nil {
		return err
	}
	j.raw("{")
	j.key(in, "id", true)
	j.value(in, id)
	j.key(in, "head_seq", false)
	j.value(in, info.Head)
	j.key(in, "turn", false)
	j.value(in, info.Turn)
	j.key(in, "frame", false)
	j.value(in, frameOf(info, roots))
	j.key(in, "roots", false)
	if err := j.array(in, func(emit func(any)) error {
		for _, r := range roots {
			emit(dumpRoot{Node: r.ID, Depth: int(r.Depth), From: r.From, To: r.To})
		}
		return nil
	}); err != nil {
		return err
	}
	if err := streamArray(o, j, s, in, "nodes", func(f func(tier.Node) error) error { return s.Nodes(id, f) },
		func(n *tier.Node) any { return toDumpNode(n) }); err != nil {
		return err
	}
	if err := streamArray(o, j, s, in, "markers", func(f func(marker.Marker) error) error { return s.Markers(id, f) },
		func(m *marker.Marker) any { return toDumpMarker(m) }); err != nil {
		return err
	}
	if err := streamArray(o, j, s, in, "checkpoints", func(f func(checkpoint.Checkpoint) error) error { return s.Checkpoints(id, f) },
		func(c *checkpoint.Checkpoint) any { return toDumpCheckpoint(c) }); err != nil {
		return err
	}
	l, err := s.Ledger(id)
	if err != nil {
		return err
	}
	j.key(in, "ledger", false)
	j.value(in, toDumpLedger(l))
	if err := streamArray(o, j, s, in, "audit", func(f func(store.Refusal) error) error { return s.Refusals(id, f) },
		func(r *store.Refusal) any { return toDumpRefusal(r) }); err != nil {
		return err
	}
	if o.raw {
		if err := streamArray(o, j, s, in, "events", func(f func(tier.Event) error) error { return s.Events(id, 1, info.Head, f) },
			func(e *tier.Event) any { return e.ToJSON(id) }); err != nil {
			return err
		}
	}
	j.raw("\n    }")
	return j.err
}

// streamArray writes key in, then the array of what each calls back with,
// converted by conv, one element at a time: nothing of the array is held in
// memory.
func streamArray[T any](o *dumpOptions, j *jsonWriter, s *store.Snapshot, in, key string, each func(func(T) error) error, conv func(*T) any) error {
	j.key(in, key, false)
	return j.array(in, func(emit func(any)) error {
		return each(func(x T) error {
			emit(conv(&x))
			o.written(s)
			return j.err
		})
	})
}

// writeText writes the readable form: per session, the frame, the tree of
// nodes under the roots, markers, checkpoints, the ledger, the audit and,
// with --raw, the events as JSONL.
func (o *dumpOptions) writeText(w *bufio.Writer, s *store.Snapshot, format int, ids []string) error {
	fmt.Fprintf(w, "strata database: format_version=%d sessions=%d\n", format, len(ids))
	for _, id := range ids {
		if err := o.writeSessionText(w, s, id); err != nil {
			return err
		}
	}
	return nil
}

// writeSessionText writes one session in the readable form.
func (o *dumpOptions) writeSessionText(w *bufio.Writer, s *store.Snapshot, id string) error {
	info, err := s.Info(id)
	if err != nil {
		return err
	}
	roots, err := s.Roots(id)
	if err != nil {
		return err
	}
	fr := frameOf(info, roots)
	fmt.Fprintf(w, "\nsession %s: head_seq=%d turn=%d\n", fieldValue(id), info.Head, info.Turn)
	fmt.Fprintf(w, "  frame: version=%d depth=%d compacted_to=%d roots=%d", fr.Version, fr.Depth, fr.CompactedTo, fr.Roots)
	if fr.RefusedTo != 0 {
		fmt.Fprintf(w, " refused_to=%d", fr.RefusedTo)
	}
	w.WriteString("\n")

	// The tree needs the session's nodes at hand; events are never held.
	nodes := map[uint64]tier.Node{}
	var order []uint64
	if err := s.Nodes(id, func(n tier.Node) error {
		nodes[n.ID] = n
		order = append(order, n.ID)
		o.written(s)
		return nil
	}); err != nil {
		return err
	}
	shown := map[uint64]bool{}
	var tree func(id uint64, indent string)
	tree = func(id uint64, indent string) {
		n, ok := nodes[id]
		if !ok {
			fmt.Fprintf(w, "%snode %d: MISSING\n", indent, id)
			return
		}
		if shown[id] {
			return
		}
		shown[id] = true
		writeNodeText(w, &n, indent)
		for _, c := range n.Children {
			tree(c, indent+"    ")
		}
	}
	fmt.Fprintf(w, "  roots: %d\n", len(roots))
	for _, r := range roots {
		tree(r.ID, "    ")
	}
	rest := 0
	for _, nid := range order {
		if !shown[nid] {
			rest++
		}
	}
	if rest > 0 {
		fmt.Fprintf(w, "  other nodes (superseded, or under a superseded node): %d\n", rest)
		for _, nid := range order {
			if !shown[nid] {
				tree(nid, "    ")
			}
		}
	}

	w.WriteString("  markers:\n")
	if err := s.Markers(id, func(m marker.Marker) error {
		fmt.Fprintf(w, "    marker %d: node=%d depth=%d frame_version=%d boundary=%d status=%s",
			m.ID, m.Node, m.Depth, m.FrameVersion, m.Boundary, m.Status)
		if m.Reason != "" {
			fmt.Fprintf(w, " reason=%q", m.Reason)
		}
		w.WriteString("\n")
		return nil
	}); err != nil {
		return err
	}
	w.WriteString("  checkpoints:\n")
	if err := s.Checkpoints(id, func(c checkpoint.Checkpoint) error {
		fmt.Fprintf(w, "    checkpoint %d: seq=%d status=%s prefix=%s why=%q", c.ID, c.Seq, c.Status, bracketIDs(c.Prefix), c.Why)
		if c.Reason != "" {
			fmt.Fprintf(w, " reason=%q", c.Reason)
		}
		w.WriteString("\n")
		return nil
	}); err != nil {
		return err
	}
	l, err := s.Ledger(id)
	if err != nil {
		return err
	}
	w.WriteString("  ledger at head:\n")
	for _, x := range l.OpenList() {
		fmt.Fprintf(w, "    open %s %s", x.Kind, fieldValue(x.ID))
		if x.Name != "" {
			fmt.Fprintf(w, " name=%s", fieldValue(x.Name))
		}
		fmt.Fprintf(w, " seq=%d\n", x.Seq)
	}
	for _, x := range l.DispositionList() {
		fmt.Fprintf(w, "    %s %s", x.State, fieldValue(x.Key))
		if x.By != "" {
			fmt.Fprintf(w, " by=%s", fieldValue(x.By))
		}
		fmt.Fprintf(w, " seq=%d", x.Seq)
		if x.Reason != "" {
			fmt.Fprintf(w, " reason=%q", x.Reason)
		}
		w.WriteString("\n")
	}
	for _, x := range l.ConstraintList() {
		fmt.Fprintf(w, "    constraint %s seq=%d", fieldValue(x.Key), x.Seq)
		if x.Text != "" {
			fmt.Fprintf(w, " text=%q", x.Text)
		}
		w.WriteString("\n")
	}
	for _, x := range l.ArtifactList() {
		fmt.Fprintf(w, "    artifact %s seq=%d", fieldValue(x.Key), x.Seq)
		if x.Text != "" {
			fmt.Fprintf(w, " text=%q", x.Text)
		}
		w.WriteString("\n")
	}
	w.WriteString("  audit:\n")
	if err := s.Refusals(id, func(r store.Refusal) error {
		ie := marker.InvalidError{Failures: r.Failures}
		fmt.Fprintf(w, "    refusal %d: depth=%d seq=%d..%d checkpoint=%d summarizer=%s attempt=%d reasons=%s\n",
			r.ID, r.Depth, r.From, r.To, r.Checkpoint, fieldValue(r.Summarizer), r.Attempt, ie.Reasons())
		for _, f := range r.Failures {
			fmt.Fprintf(w, "      %s", f)
			if f.Detail != "" {
				fmt.Fprintf(w, ": %s", oneLine(f.Detail))
			}
			w.WriteString("\n")
		}
		return nil
	}); err != nil {
		return err
	}
	if o.raw {
		fmt.Fprintf(w, "  events: %d\n", info.Head)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := s.Events(id, 1, info.Head, func(e tier.Event) error {
			o.written(s)
			return enc.Encode(e.ToJSON(id))
		}); err != nil {
			return err
		}
	}
	return nil
}

// writeNodeText writes a node's heading line, then its narrative and claims
// as a resumed context renders them, at indent.
func writeNodeText(w *bufio.Writer, n *tier.Node, indent string) {
	fmt.Fprintf(w, "%s%s node %d: seq=%d..%d", indent, n.Depth, n.ID, n.From, n.To)
	switch {
	case n.IsRoot():
		w.WriteString(" root")
	case n.SupersededBy != 0:
		fmt.Fprintf(w, " superseded_by=%d", n.SupersededBy)
	}
	if n.Parent != 0 {
		fmt.Fprintf(w, " parent=%d", n.Parent)
	}
	if len(n.Children) > 0 {
		fmt.Fprintf(w, " children=%s", bracketIDs(n.Children))
	}
	fmt.Fprintf(w, " summarizer=%s tokens=%d budget=%d frame_version=%d\n",
		fieldValue(n.Summarizer), n.Tokens, n.Budget, n.FrameVersion)
	// NodeText starts with a blank line and a heading, which the line above
	// replaces.
	body := strings.SplitN(checkpoint.NodeText(n), "\n", 3)
	if len(body) < 3 {
		return
	}
	for _, line := range strings.Split(strings.TrimRight(body[2], "\n"), "\n") {
		fmt.Fprintf(w, "%s  | %s\n", indent, line)
	}
}

// bracketIDs returns ids as "[1,2]".
func bracketIDs(ids []uint64) string { return "[" + joinIDs(ids) + "]" }

// oneLine keeps s on one line.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\n\r") {
		return fmt.Sprintf("%q", s)
	}
	return s
}
