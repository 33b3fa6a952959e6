package dump

import (
	"bufio"
	"bytes"
	"encoding/json"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// The JSON forms of the dump. Lists are never null.

// jsonRoot is one current root in the JSON dump.
type jsonRoot struct {
	Node  uint64 `json:"node"`
	Depth int    `json:"depth"`
	From  uint64 `json:"from"`
	To    uint64 `json:"to"`
}

// jsonClaims is a node's claims in the JSON dump, every list present.
type jsonClaims struct {
	Resolved     []tier.Resolution  `json:"resolved"`
	Unresolved   []tier.Open        `json:"unresolved"`
	Failures     []tier.Resolution  `json:"failures"`
	Dispositions []tier.Disposition `json:"dispositions"`
	Constraints  []tier.Constraint  `json:"constraints"`
	Artifacts    []tier.Artifact    `json:"artifacts"`
}

// jsonNode is a summary node in the JSON dump.
type jsonNode struct {
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
	Claims       jsonClaims `json:"claims"`
	Unchecked    bool       `json:"unchecked"` // committed without validation
	Repairs      uint64     `json:"repairs"`   // the refusal whose missing claims it makes good; 0 for none
}

// jsonMarker is a recovery marker in the JSON dump, its reason always present.
type jsonMarker struct {
	ID            uint64 `json:"id"`
	Node          uint64 `json:"node"`
	Depth         int    `json:"depth"`
	FrameVersion  uint64 `json:"frame_version"`
	Boundary      uint64 `json:"boundary"`
	Status        string `json:"status"`
	Reason        string `json:"reason"`
	InvalidatedAt uint64 `json:"invalidated_at"`
	Unchecked     bool   `json:"unchecked"` // committed without validation: it promises nothing
}

// jsonCheckpoint is a raw checkpoint in the JSON dump.
type jsonCheckpoint struct {
	ID            uint64   `json:"id"`
	Seq           uint64   `json:"seq"`
	Status        string   `json:"status"`
	Reason        string   `json:"reason"`
	Prefix        []uint64 `json:"prefix"`
	FrameVersion  uint64   `json:"frame_version"`
	Why           string   `json:"why"`
	InvalidatedAt uint64   `json:"invalidated_at"`
}

// jsonLedger is the ledger at head in the JSON dump.
type jsonLedger struct {
	Open         []tier.Open        `json:"open"`
	Dispositions []tier.Disposition `json:"dispositions"`
	Constraints  []tier.Constraint  `json:"constraints"`
	Artifacts    []tier.Artifact    `json:"artifacts"`
}

// jsonRefusal is an audit record of a refused compaction in the JSON dump.
type jsonRefusal struct {
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

// toJSONNode converts a node to its JSON dump form.
func toJSONNode(n *tier.Node) jsonNode {
	c := &n.Claims
	return jsonNode{
		ID: n.ID, Depth: int(n.Depth), From: n.From, To: n.To, Children: nonNil(n.Children),
		Root: n.IsRoot(), Parent: n.Parent, Superseded: n.SupersededBy != 0, SupersededBy: n.SupersededBy,
		FrameVersion: n.FrameVersion, Summarizer: n.Summarizer, Tokens: n.Tokens, Budget: n.Budget,
		Narrative: n.Narrative, Unchecked: n.Unchecked, Repairs: n.Repairs,
		Claims: jsonClaims{Resolved: nonNil(c.Resolved), Unresolved: nonNil(c.Unresolved), Failures: nonNil(c.Failures),
			Dispositions: nonNil(c.Dispositions), Constraints: nonNil(c.Constraints), Artifacts: nonNil(c.Artifacts)},
	}
}

// toJSONMarker converts a marker to its JSON dump form.
func toJSONMarker(m *marker.Marker) jsonMarker {
	return jsonMarker{ID: m.ID, Node: m.Node, Depth: int(m.Depth), FrameVersion: m.FrameVersion, Boundary: m.Boundary,
		Status: m.Status.String(), Reason: m.Reason, InvalidatedAt: m.InvalidatedAt, Unchecked: m.Unchecked}
}

// toJSONCheckpoint converts a checkpoint to its JSON dump form.
func toJSONCheckpoint(c *checkpoint.Checkpoint) jsonCheckpoint {
	return jsonCheckpoint{ID: c.ID, Seq: c.Seq, Status: c.Status.String(), Reason: c.Reason, Prefix: nonNil(c.Prefix),
		FrameVersion: c.FrameVersion, Why: c.Why, InvalidatedAt: c.InvalidatedAt}
}

// toJSONLedger converts a ledger to its JSON dump form, sorted.
func toJSONLedger(l *tier.Ledger) jsonLedger {
	return jsonLedger{Open: l.OpenList(), Dispositions: l.DispositionList(), Constraints: l.ConstraintList(), Artifacts: l.ArtifactList()}
}

// toJSONRefusal converts an audit record to its JSON dump form.
func toJSONRefusal(r *store.Refusal) jsonRefusal {
	ie := marker.InvalidError{Failures: r.Failures}
	return jsonRefusal{ID: r.ID, Depth: int(r.Depth), From: r.From, To: r.To, FrameVersion: r.FrameVersion,
		Summarizer: r.Summarizer, Attempt: r.Attempt, Checkpoint: r.Checkpoint, Reasons: ie.Reasons(),
		Failures: nonNil(r.Failures)}
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
func (d *dumper) writeJSON(format int, ids []string) error {
	j := newJSONWriter(d.w)
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
		if err := d.writeSessionJSON(j, id); err != nil {
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

// writeSessionJSON writes one session's object: its id, head_seq and
// turn, then the members of the whole dump or of a range's.
func (d *dumper) writeSessionJSON(j *jsonWriter, id string) error {
	const in = "      " // the indent of the session's members
	info, err := d.s.Info(id)
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
	if info.Fork != nil {
		j.key(in, "fork", false)
		j.value(in, info.Fork)
	}
	if d.opts.ranged() {
		err = d.writeRangeJSON(j, in, info)
	} else {
		err = d.writeWholeJSON(j, in, info)
	}
	if err != nil {
		return err
	}
	j.raw("\n    }")
	return j.err
}

// writeWholeJSON writes the members of a session's object after its
// header, streaming its nodes, markers, checkpoints, audit and events one
// at a time.
func (d *dumper) writeWholeJSON(j *jsonWriter, in string, info store.Info) error {
	s, id := d.s, info.Session
	roots, err := s.Roots(id)
	if err != nil {
		return err
	}
	j.key(in, "frame", false)
	j.value(in, frameOf(info, roots))
	j.key(in, "roots", false)
	if err := j.array(in, func(emit func(any)) error {
		for _, r := range roots {
			emit(jsonRoot{Node: r.ID, Depth: int(r.Depth), From: r.From, To: r.To})
		}
		return nil
	}); err != nil {
		return err
	}
	if err := streamArray(d, j, in, "nodes", func(f func(tier.Node) error) error { return s.Nodes(id, f) },
		func(n *tier.Node) any { return toJSONNode(n) }); err != nil {
		return err
	}
	if err := streamArray(d, j, in, "markers", func(f func(marker.Marker) error) error { return s.Markers(id, f) },
		func(m *marker.Marker) any { return toJSONMarker(m) }); err != nil {
		return err
	}
	if err := streamArray(d, j, in, "checkpoints", func(f func(checkpoint.Checkpoint) error) error { return s.Checkpoints(id, f) },
		func(c *checkpoint.Checkpoint) any { return toJSONCheckpoint(c) }); err != nil {
		return err
	}
	l, err := s.Ledger(id)
	if err != nil {
		return err
	}
	j.key(in, "ledger", false)
	j.value(in, toJSONLedger(l))
	if err := streamArray(d, j, in, "audit", func(f func(store.Refusal) error) error { return s.Refusals(id, f) },
		func(r *store.Refusal) any { return toJSONRefusal(r) }); err != nil {
		return err
	}
	if d.opts.Raw {
		if err := streamArray(d, j, in, "events", func(f func(tier.Event) error) error { return s.Events(id, 1, info.Head, f) },
			func(e *tier.Event) any { return e.ToJSON(id) }); err != nil {
			return err
		}
	}
	return j.err
}

// writeRangeJSON writes the members of a session's object after its
// header restricted to the seq range: "from", "to", "nodes", "events".
func (d *dumper) writeRangeJSON(j *jsonWriter, in string, info store.Info) error {
	s, id := d.s, info.Session
	from, to := d.opts.span(info.Head)
	j.key(in, "from", false)
	j.value(in, from)
	j.key(in, "to", false)
	j.value(in, to)
	j.key(in, "nodes", false)
	if err := j.array(in, func(emit func(any)) error {
		return s.Nodes(id, func(n tier.Node) error {
			if d.opts.overlaps(&n, info.Head) {
				emit(toJSONNode(&n))
			}
			d.written()
			return j.err
		})
	}); err != nil {
		return err
	}
	if err := streamArray(d, j, in, "events", func(f func(tier.Event) error) error { return s.Events(id, from, to, f) },
		func(e *tier.Event) any { return e.ToJSON(id) }); err != nil {
		return err
	}
	return j.err
}

// streamArray writes key in, then the array of what each calls back with,
// converted by conv, one element at a time: nothing of the array is held in
// memory.
func streamArray[T any](d *dumper, j *jsonWriter, in, key string, each func(func(T) error) error, conv func(*T) any) error {
	j.key(in, key, false)
	return j.array(in, func(emit func(any)) error {
		return each(func(x T) error {
			emit(conv(&x))
			d.written()
			return j.err
		})
	})
}
