package dump

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// writeText writes the readable form: per session, the frame, the tree of
// nodes under the roots, markers, checkpoints, the ledger, the audit and,
// with Raw, the events as JSONL.
func (d *dumper) writeText(format int, ids []string) error {
	fmt.Fprintf(d.w, "strata database: format_version=%d sessions=%d\n", format, len(ids))
	for _, id := range ids {
		if err := d.writeSessionText(id); err != nil {
			return err
		}
	}
	return nil
}

// writeSessionText writes one session in the readable form.
func (d *dumper) writeSessionText(id string) error {
	s, w := d.s, d.w
	info, err := s.Info(id)
	if err != nil {
		return err
	}
	if d.opts.ranged() {
		return d.writeRangeText(info)
	}
	roots, err := s.Roots(id)
	if err != nil {
		return err
	}
	fr := frameOf(info, roots)
	fmt.Fprintf(w, "\nsession %s: head_seq=%d turn=%d\n", fieldValue(id), info.Head, info.Turn)
	if f := info.Fork; f != nil {
		fmt.Fprintf(w, "  fork of %s at seq %d, %s\n", fieldValue(f.Parent), f.At, f.Point())
	}
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
		d.written()
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
		if m.Unchecked {
			w.WriteString(" UNCHECKED")
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
	if d.opts.Raw {
		fmt.Fprintf(w, "  events: %d\n", info.Head)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		if err := s.Events(id, 1, info.Head, func(e tier.Event) error {
			d.written()
			return enc.Encode(e.ToJSON(id))
		}); err != nil {
			return err
		}
	}
	return nil
}

// writeRangeText writes one session restricted to the seq range: the
// nodes overlapping it, then its events as JSONL lines.
func (d *dumper) writeRangeText(info store.Info) error {
	s, w, id := d.s, d.w, info.Session
	from, to := d.opts.span(info.Head)
	fmt.Fprintf(w, "\nsession %s: head_seq=%d turn=%d seq=%d..%d\n", fieldValue(id), info.Head, info.Turn, from, to)
	var nodes []tier.Node
	if err := s.Nodes(id, func(n tier.Node) error {
		if d.opts.overlaps(&n, info.Head) {
			nodes = append(nodes, n)
		}
		d.written()
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "  nodes overlapping: %d\n", len(nodes))
	for i := range nodes {
		writeNodeText(w, &nodes[i], "    ")
	}
	n := uint64(0)
	if from <= to {
		n = to - from + 1
	}
	fmt.Fprintf(w, "  events: %d\n", n)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return s.Events(id, from, to, func(e tier.Event) error {
		d.written()
		return enc.Encode(e.ToJSON(id))
	})
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
	fmt.Fprintf(w, " summarizer=%s tokens=%d budget=%d frame_version=%d",
		fieldValue(n.Summarizer), n.Tokens, n.Budget, n.FrameVersion)
	if n.Repairs != 0 {
		fmt.Fprintf(w, " repairs=%d", n.Repairs)
	}
	if n.Unchecked {
		w.WriteString(" UNCHECKED")
	}
	w.WriteString("\n")
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
