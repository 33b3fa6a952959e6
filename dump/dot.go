package dump

import (
	"bufio"
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// Colours of the picture: what a reader should notice is red.
const (
	dotValid   = "darkgreen"
	dotInvalid = "red"
	dotRefused = "darkorange3"
	dotFaded   = "gray50"
	dotRootBG  = "lightblue"
)

// dotWrap is the width, in characters, at which long texts (reasons) are
// broken into lines.
const dotWrap = 44

// dotMaxLines bounds the lines of failures a refusal's note lists.
const dotMaxLines = 6

// writeDot writes the Graphviz picture of the sessions ids.
func (d *dumper) writeDot(format int, ids []string) error {
	w := d.w
	fmt.Fprintf(w, "// strata dump --dot: format_version=%d sessions=%d\n", format, len(ids))
	w.WriteString("digraph strata {\n")
	w.WriteString("\tgraph [rankdir=BT, remincross=false, fontname=\"Helvetica\", fontsize=11, nodesep=0.25, ranksep=0.45];\n")
	w.WriteString("\tnode [fontname=\"Helvetica\", fontsize=10];\n")
	w.WriteString("\tedge [fontname=\"Helvetica\", fontsize=9];\n")
	if len(ids) == 0 {
		w.WriteString("\tempty [shape=plaintext, label=\"no sessions\"];\n")
	}
	index := map[string]int{}
	for i, id := range ids {
		index[id] = i
		if err := d.writeSessionDot(i, id); err != nil {
			return err
		}
	}
	// The tree of forks: an edge from each fork's first raw box to its
	// parent's, when both are drawn.
	for i, id := range ids {
		info, err := d.s.Info(id)
		if err != nil {
			return err
		}
		if f := info.Fork; f != nil {
			if p, ok := index[f.Parent]; ok {
				fmt.Fprintf(w, "	s%d_l0_0 -> s%d_l0_0 [style=bold, color=blue, label=%s];\n", i, p,
					dotLines([]string{fmt.Sprintf("fork at seq %d", f.At), f.Point()}))
			}
		}
	}
	_, err := w.WriteString("}\n")
	return err
}

// span is a range of raw events drawn as one L0 box.
type span struct{ from, to uint64 }

// sessionDot is what one session's picture needs at hand.
type sessionDot struct {
	w      *bufio.Writer
	prefix string // of the session's graph ids, "s<index>_"
	info   store.Info
	nodes  []tier.Node
	spans  []span // the L0 boxes, in seq order; the tail last
	tail   bool   // the last span is the uncompacted tail
}

// id returns the graph id of the session's element kind+n.
func (g *sessionDot) id(kind string, n uint64) string {
	return fmt.Sprintf("%s%s%d", g.prefix, kind, n)
}

// box returns the graph id of the L0 box that holds seq: the first that
// contains it, else the last box that starts before it, else the first.
func (g *sessionDot) box(seq uint64) string {
	best := 0
	for i, sp := range g.spans {
		if sp.from <= seq && seq <= sp.to {
			return g.id("l0_", uint64(i))
		}
		if sp.from <= seq {
			best = i
		}
	}
	return g.id("l0_", uint64(best))
}

// writeSessionDot writes one session's cluster.
func (d *dumper) writeSessionDot(index int, id string) error {
	s := d.s
	info, err := s.Info(id)
	if err != nil {
		return err
	}
	roots, err := s.Roots(id)
	if err != nil {
		return err
	}
	g := &sessionDot{w: d.w, prefix: fmt.Sprintf("s%d_", index), info: info}
	if err := s.Nodes(id, func(n tier.Node) error {
		g.nodes = append(g.nodes, n)
		d.written()
		return nil
	}); err != nil {
		return err
	}
	var markers []marker.Marker
	if err := s.Markers(id, func(m marker.Marker) error {
		markers = append(markers, m)
		d.written()
		return nil
	}); err != nil {
		return err
	}
	var ckpts []checkpoint.Checkpoint
	if err := s.Checkpoints(id, func(c checkpoint.Checkpoint) error {
		ckpts = append(ckpts, c)
		d.written()
		return nil
	}); err != nil {
		return err
	}
	var refusals []store.Refusal
	if err := s.Refusals(id, func(r store.Refusal) error {
		refusals = append(refusals, r)
		d.written()
		return nil
	}); err != nil {
		return err
	}

	// The L0 boxes: each span a node covers directly (a node without
	// children summarizes raw events), then the uncompacted tail.
	for _, n := range g.nodes {
		if len(n.Children) == 0 {
			g.spans = append(g.spans, span{n.From, n.To})
		}
	}
	slices.SortFunc(g.spans, func(a, b span) int {
		if a.from != b.from {
			return cmp.Compare(a.from, b.from)
		}
		return cmp.Compare(a.to, b.to)
	})
	g.spans = slices.Compact(g.spans)
	if info.Head > info.CompactedTo || len(g.spans) == 0 {
		g.spans = append(g.spans, span{info.CompactedTo + 1, info.Head})
		g.tail = true
	}

	w := d.w
	fr := frameOf(info, roots)
	head := []string{"session " + id, fmt.Sprintf("head_seq %d, turn %d", info.Head, info.Turn),
		fmt.Sprintf("frame version %d, depth %d, %d roots", fr.Version, fr.Depth, fr.Roots),
		fmt.Sprintf("compacted_to %d", fr.CompactedTo)}
	if fr.RefusedTo != 0 {
		head[3] += fmt.Sprintf(", refused_to %d", fr.RefusedTo)
	}
	fmt.Fprintf(w, "\n\tsubgraph cluster_%d {\n", index)
	fmt.Fprintf(w, "\t\tlabel=%s;\n", dotLines(head))
	w.WriteString("\t\tlabeljust=l; labelloc=b; style=rounded; color=gray40;\n")

	// L0: the boxes in one row, in seq order.
	w.WriteString("\n\t\t// L0: the raw log, one box per compacted span and the uncompacted tail\n")
	for i, sp := range g.spans {
		attrs := "shape=box"
		label := []string{fmt.Sprintf("L0 seq %d..%d", sp.from, sp.to), plural(sp.to-sp.from+1, "event")}
		if sp.from > sp.to {
			label = []string{"L0", "no events"}
		}
		if g.tail && i == len(g.spans)-1 {
			attrs = "shape=box, style=dashed"
			label = append(label, "uncompacted tail")
		}
		fmt.Fprintf(w, "\t\t%s [%s, label=%s];\n", g.id("l0_", uint64(i)), attrs, dotLines(label))
	}
	g.row(func(emit func(string)) {
		for i := range g.spans {
			emit(g.id("l0_", uint64(i)))
		}
	})

	// Summary nodes, one row per depth, each with its marker beside it.
	byNode := map[uint64]*marker.Marker{}
	for i := range markers {
		byNode[markers[i].Node] = &markers[i]
	}
	var depths []tier.Depth
	for _, n := range g.nodes {
		depths = append(depths, n.Depth)
	}
	slices.Sort(depths)
	depths = slices.Compact(depths)
	for _, depth := range depths {
		fmt.Fprintf(w, "\n\t\t// %s\n", depth)
		for i := range g.nodes {
			if n := &g.nodes[i]; n.Depth == depth {
				g.writeNode(n)
				if m := byNode[n.ID]; m != nil {
					g.writeMarker(m)
				}
			}
		}
		g.row(func(emit func(string)) {
			for _, n := range g.nodes {
				if n.Depth == depth {
					emit(g.id("n", n.ID))
					if m := byNode[n.ID]; m != nil {
						emit(g.id("m", m.ID))
					}
				}
			}
		})
	}
	// A marker whose node is missing (damage) is still drawn.
	known := map[uint64]bool{}
	for _, n := range g.nodes {
		known[n.ID] = true
	}
	for i := range markers {
		if !known[markers[i].Node] {
			g.writeMarker(&markers[i])
		}
	}

	if len(ckpts) > 0 {
		w.WriteString("\n\t\t// checkpoints, below the raw box their replay starts in\n")
	}
	for i := range ckpts {
		g.writeCheckpoint(&ckpts[i])
	}
	if len(refusals) > 0 {
		w.WriteString("\n\t\t// refused compactions (the audit), below the raw box their span starts in\n")
	}
	for i := range refusals {
		g.writeRefusal(&refusals[i])
	}
	// The row below the raw log, in the seq order of where each attaches.
	type below struct {
		seq uint64
		id  string
	}
	var row []below
	for _, c := range ckpts {
		row = append(row, below{c.Seq + 1, g.id("c", c.ID)})
	}
	for _, r := range refusals {
		row = append(row, below{r.From, g.id("r", r.ID)})
	}
	slices.SortStableFunc(row, func(a, b below) int { return cmp.Compare(a.seq, b.seq) })
	g.row(func(emit func(string)) {
		for _, b := range row {
			emit(b.id)
		}
	})
	w.WriteString("\t}\n")
	return nil
}

// row puts the ids emitted on one rank, left to right in the order
// emitted (invisible edges keep the order: a flat edge's tail is drawn to
// the left of its head).
func (g *sessionDot) row(each func(emit func(string))) {
	var ids []string
	each(func(id string) { ids = append(ids, id) })
	if len(ids) < 2 {
		return
	}
	fmt.Fprintf(g.w, "\t\t{ rank=same; %s; }\n", strings.Join(ids, "; "))
	fmt.Fprintf(g.w, "\t\t%s [style=invis];\n", strings.Join(ids, " -> "))
}

// writeNode writes a summary node and the edges from what it covers: its
// children, or the raw span it summarizes.
func (g *sessionDot) writeNode(n *tier.Node) {
	state := "root"
	attrs := fmt.Sprintf("style=\"rounded,filled\", fillcolor=%s, penwidth=2", dotRootBG)
	switch {
	case n.SupersededBy != 0:
		state = fmt.Sprintf("superseded by node %d", n.SupersededBy)
		attrs = fmt.Sprintf("style=\"rounded,dashed\", color=%s, fontcolor=%s", dotFaded, dotFaded)
	case n.Parent != 0:
		state = fmt.Sprintf("folded into node %d", n.Parent)
		attrs = "style=rounded"
	case !n.IsRoot():
		state = "not a root"
		attrs = "style=rounded"
	}
	label := []string{fmt.Sprintf("%s node %d", n.Depth, n.ID), fmt.Sprintf("seq %d..%d, %s", n.From, n.To, state),
		fmt.Sprintf("%s, %d/%d tokens", n.Summarizer, n.Tokens, n.Budget)}
	if n.Repairs != 0 {
		label = append(label, fmt.Sprintf("repairs refusal %d", n.Repairs))
	}
	if n.Unchecked {
		label = append(label, "UNCHECKED: never validated")
		attrs += fmt.Sprintf(", color=%s", dotInvalid)
	}
	id := g.id("n", n.ID)
	fmt.Fprintf(g.w, "\t\t%s [shape=box, %s, label=%s];\n", id, attrs, dotLines(label))
	if len(n.Children) == 0 {
		fmt.Fprintf(g.w, "\t\t%s -> %s;\n", g.boxOf(n), id)
	}
	for _, c := range n.Children {
		fmt.Fprintf(g.w, "\t\t%s -> %s;\n", g.id("n", c), id)
	}
}

// boxOf returns the graph id of the L0 box of exactly n's span.
func (g *sessionDot) boxOf(n *tier.Node) string {
	for i, sp := range g.spans {
		if sp.from == n.From && sp.to == n.To && !(g.tail && i == len(g.spans)-1) {
			return g.id("l0_", uint64(i))
		}
	}
	return g.box(n.From)
}

// writeMarker writes a marker as a note tied to its node.
func (g *sessionDot) writeMarker(m *marker.Marker) {
	color := dotValid
	label := []string{fmt.Sprintf("marker %d: %s", m.ID, m.Status), fmt.Sprintf("boundary seq %d, frame version %d", m.Boundary, m.FrameVersion)}
	if m.Status != marker.StatusValid {
		color = dotInvalid
		label = append(label, wrap(m.Reason)...)
	}
	if m.Unchecked {
		color = dotInvalid
		label = append(label, "UNCHECKED: promises nothing")
	}
	id := g.id("m", m.ID)
	fmt.Fprintf(g.w, "\t\t%s [shape=note, color=%s, fontcolor=%s, label=%s];\n", id, color, color, dotLines(label))
	fmt.Fprintf(g.w, "\t\t%s -> %s [style=dotted, dir=none, color=%s];\n", g.id("n", m.Node), id, color)
}

// writeCheckpoint writes a checkpoint below the L0 box where its replay of
// raw events starts.
func (g *sessionDot) writeCheckpoint(c *checkpoint.Checkpoint) {
	color := dotValid
	label := []string{fmt.Sprintf("checkpoint %d: %s", c.ID, c.Status), fmt.Sprintf("seq %d, prefix %s", c.Seq, bracketIDs(c.Prefix))}
	label = append(label, wrap(c.Why)...)
	if !c.Usable() {
		color = dotInvalid
		label = append(label, wrap("invalid: "+c.Reason)...)
	}
	id := g.id("c", c.ID)
	fmt.Fprintf(g.w, "\t\t%s [shape=component, color=%s, fontcolor=%s, label=%s];\n", id, color, color, dotLines(label))
	fmt.Fprintf(g.w, "\t\t%s -> %s [style=dashed, color=%s, label=%s];\n", id, g.box(c.Seq+1), color,
		dotString(fmt.Sprintf("raw after %d", c.Seq)))
}

// writeRefusal writes an audit record as a note below the L0 box where its
// span starts.
func (g *sessionDot) writeRefusal(r *store.Refusal) {
	label := []string{fmt.Sprintf("refused %s seq %d..%d", r.Depth, r.From, r.To),
		fmt.Sprintf("%s, attempt %d, checkpoint %d", r.Summarizer, r.Attempt, r.Checkpoint)}
	var lines []string
	for _, f := range r.Failures {
		if s := f.String(); len(lines) == 0 || lines[len(lines)-1] != s {
			lines = append(lines, s)
		}
	}
	if len(lines) > dotMaxLines {
		lines = append(lines[:dotMaxLines-1], fmt.Sprintf("... and %d more", len(lines)-dotMaxLines+1))
	}
	label = append(label, lines...)
	id := g.id("r", r.ID)
	fmt.Fprintf(g.w, "\t\t%s [shape=note, color=%s, fontcolor=%s, label=%s];\n", id, dotRefused, dotRefused, dotLines(label))
	fmt.Fprintf(g.w, "\t\t%s -> %s [style=dashed, color=%s];\n", id, g.box(r.From), dotRefused)
}

// dotLines returns lines as one DOT label, centred lines.
func dotLines(lines []string) string { return dotString(strings.Join(lines, "\n")) }

// dotString returns s as a quoted DOT string: quotes and backslashes
// escaped, line breaks as \n, other control characters and invalid UTF-8
// replaced, so that no text from the database can break the graph.
func dotString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, string(utf8.RuneError)) {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r == 0x7f:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// wrap breaks s into lines of at most dotWrap characters at spaces (a
// longer word stays whole), each line of s on its own.
func wrap(s string) []string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			switch {
			case line == "":
				line = word
			case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > dotWrap:
				out = append(out, line)
				line = word
			default:
				line += " " + word
			}
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// plural returns "1 event", "2 events".
func plural(n uint64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
