package checkpoint

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-go/strata/tier"
)

// refWriteNode and refWriteEvent are the fmt renderings writeNode and
// writeEvent replaced: the definition they must match byte for byte.

func refParen(s string) string {
	if s == "" {
		return ""
	}
	return " (" + oneLine(s) + ")"
}

func refWriteNode(b *bytes.Buffer, n *tier.Node) {
	fmt.Fprintf(b, "\n## %s summary %d, seq %d..%d", n.Depth, n.ID, n.From, n.To)
	if n.Unchecked {
		b.WriteString(" (UNCHECKED)")
	}
	b.WriteByte('\n')
	if n.Narrative != "" {
		// The narrative is the summarizer's free text: labelled, indented,
		// its control characters escaped.
		b.WriteString(NarrativeLabel)
		for _, l := range splitLines(strings.TrimRight(n.Narrative, lineBreaks)) {
			fmt.Fprintf(b, "  %s\n", EscapeControls(l))
		}
	}
	cl := &n.Claims
	switch {
	case cl.Count() == 0:
	case n.Unchecked:
		b.WriteString(UncheckedClaimsLabel)
	default:
		b.WriteString(CheckedClaimsLabel)
	}
	on := func(target string) string {
		if target == "" {
			return ""
		}
		return " on " + oneLine(target)
	}
	for _, r := range cl.Requests {
		fmt.Fprintf(b, "- user request at seq %d: %s\n", r.Seq, oneLine(r.Text))
	}
	if cl.RequestsLeftOut > 0 {
		fmt.Fprintf(b, "- user requests not listed: %d\n", cl.RequestsLeftOut)
	}
	if cl.PlanAt != 0 && len(cl.Plan) == 0 {
		fmt.Fprintf(b, "- plan of seq %d: no open item\n", cl.PlanAt)
	}
	for _, p := range cl.Plan {
		fmt.Fprintf(b, "- plan item of seq %d, %s: %s\n", p.Seq, oneLine(p.Status), oneLine(p.Key))
	}
	opened := func(seq uint64) string {
		if seq == 0 {
			return ""
		}
		return fmt.Sprintf(", opened at seq %d", seq)
	}
	for _, o := range cl.Unresolved {
		fmt.Fprintf(b, "- UNRESOLVED %s %s%s%s%s\n", openNoun(o.Kind), oneLine(o.ID), refParen(o.Name), opened(o.Seq), on(o.Target))
	}
	for _, r := range cl.Resolved {
		outcome := "ok"
		if r.Failed {
			outcome = "FAILED"
		}
		fmt.Fprintf(b, "- resolved: %s %s%s%s: %s", openNoun(r.Kind), oneLine(r.ID), refParen(r.Name), opened(r.Seq), outcome)
		if r.At != 0 {
			fmt.Fprintf(b, " at seq %d", r.At)
		}
		b.WriteByte('\n')
	}
	for _, r := range cl.Failures {
		fmt.Fprintf(b, "- FAILED %s %s%s%s%s", openNoun(r.Kind), oneLine(r.ID), refParen(r.Name), opened(r.Seq), on(r.Target))
		if r.At != 0 {
			fmt.Fprintf(b, ", failed at seq %d", r.At)
		}
		if r.Fixed != 0 {
			fmt.Fprintf(b, ", fixed at seq %d", r.Fixed)
		}
		if r.Reason != "" {
			fmt.Fprintf(b, " — %s", oneLine(r.Reason))
		}
		b.WriteByte('\n')
	}
	for _, d := range cl.Dispositions {
		fmt.Fprintf(b, "- %s: %s", tier.StateName(d.State), oneLine(d.Key))
		if d.By != "" {
			fmt.Fprintf(b, " (by %s)", oneLine(d.By))
		}
		if d.FailedAt != 0 {
			fmt.Fprintf(b, " (failed at seq %d)", d.FailedAt)
		}
		if d.Reason != "" {
			fmt.Fprintf(b, " — %s", oneLine(d.Reason))
		}
		b.WriteByte('\n')
	}
	for _, c := range cl.Constraints {
		if c.Withdrawn {
			fmt.Fprintf(b, "- constraint withdrawn: %s\n", oneLine(c.Key))
			continue
		}
		fmt.Fprintf(b, "- constraint: %s", oneLine(c.Key))
		if c.Text != "" {
			fmt.Fprintf(b, " — %s", oneLine(c.Text))
		}
		b.WriteByte('\n')
	}
	for _, a := range cl.Artifacts {
		fmt.Fprintf(b, "- artifact: %s", oneLine(a.Key))
		if a.Text != "" {
			fmt.Fprintf(b, " — %s", oneLine(a.Text))
		}
		b.WriteByte('\n')
	}
}

func refWriteEvent(b *bytes.Buffer, e *tier.Event) {
	fmt.Fprintf(b, "[%d t%d] %s", e.Seq, e.Turn, e.Kind)
	switch {
	case e.Kind.Opens():
		fmt.Fprintf(b, " %s%s", oneLine(e.ID), refParen(e.Name))
	case e.Kind.Resolves():
		fmt.Fprintf(b, " %s", oneLine(e.ID))
		if e.Failed {
			b.WriteString(" FAILED")
		} else {
			b.WriteString(" ok")
		}
		if e.Key != "" {
			fmt.Fprintf(b, " key=%s", oneLine(e.Key))
		}
	case e.Kind.NeedsKey():
		fmt.Fprintf(b, " %s", oneLine(e.Key))
		if e.By != "" {
			fmt.Fprintf(b, " (by %s)", oneLine(e.By))
		}
	}
	if e.Text != "" {
		// Text keeps its lines, each indented, so that a line of text can
		// never look like the start of another event.
		b.WriteString(":")
		for _, l := range splitLines(e.Text) {
			b.WriteString("\n    ")
			b.WriteString(EscapeControls(l))
		}
	}
	b.WriteByte('\n')
}

// splitLines splits s at every line break, "\r\n" counting as one.
func splitLines(s string) []string {
	var out []string
	for {
		i, w := indexLineBreak(s)
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+w:]
	}
}

// FuzzRenderingMatchesRef: writeNode and writeEvent render every node and
// event as the fmt versions did, byte for byte — for every kind, with
// attacker-chosen text in each rendered field.
func FuzzRenderingMatchesRef(f *testing.F) {
	f.Add("plan", "why\nnot", "call_1", "approach/x", "ops", uint64(7), uint8(3), uint8(0))
	f.Add("", "", "", "", "", uint64(0), uint8(0), uint8(255))
	f.Add("a\u2028b\r\nc\x85", "é\x00\"", "id (x)", "k\u2029", "by\r", uint64(1<<63), uint8(9), uint8(6))
	f.Add("\n\n", "— ", " ", "\v", "\f", uint64(42), uint8(15), uint8(1))
	f.Fuzz(func(t *testing.T, narrative, text, id, key, by string, seq uint64, kind, flags uint8) {
		states := []tier.Kind{tier.KindRejected, tier.KindFailed, tier.KindSuperseded, tier.StateSucceeded}
		n := tier.Node{
			ID: seq, Depth: tier.Depth(1 + flags%5), From: seq / 2, To: seq, Narrative: narrative,
			Claims: tier.Claims{
				Unresolved:   []tier.Open{{ID: id, Kind: tier.KindToolCall, Name: by, Target: text}, {ID: key, Kind: tier.KindOpen}},
				Resolved:     []tier.Resolution{{ID: id, Kind: tier.KindToolCall, Name: by, Seq: seq / 3}, {ID: key, Kind: tier.KindOpen, Seq: seq, At: seq, Failed: true}},
				Failures:     []tier.Resolution{{ID: id, Kind: tier.KindToolCall, Name: key, Seq: seq / 3, At: seq, Failed: true, Reason: text, Target: by, Fixed: seq / 5}},
				Dispositions: []tier.Disposition{{Key: key, State: states[int(kind)%4], Reason: text, By: by, FailedAt: seq / 4}, {Key: id, State: tier.KindRejected}},
				Constraints:  []tier.Constraint{{Key: key, Text: text, Withdrawn: flags&1 != 0}, {Key: id}},
				Artifacts:    []tier.Artifact{{Key: key, Text: narrative}, {Key: by}},
				Requests:     []tier.Request{{Seq: seq, Text: text}, {Seq: seq / 2, Text: narrative}},
				Plan:         []tier.PlanItem{{Key: key, Status: "pending"}, {Key: text, Status: "in_progress"}},

				RequestsLeftOut: int(kind),
				PlanAt:          seq / 7,
			},
		}
		if flags&2 != 0 {
			n.Claims = tier.Claims{}
		}
		n.Unchecked = flags&8 != 0
		var got, want bytes.Buffer
		writeNode(&got, &n)
		refWriteNode(&want, &n)
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("node renders\n%q\nwant\n%q", got.Bytes(), want.Bytes())
		}
		for k := tier.Kind(0); k < 20; k++ {
			e := tier.Event{Seq: seq, Turn: uint64(kind), Kind: k, ID: id, Key: key, Name: narrative, By: by, Text: text, Failed: flags&4 != 0}
			got.Reset()
			want.Reset()
			writeEvent(&got, &e)
			refWriteEvent(&want, &e)
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("event of kind %d renders\n%q\nwant\n%q", k, got.Bytes(), want.Bytes())
			}
		}
	})
}
