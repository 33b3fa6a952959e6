package companion

import (
	"strings"
	"testing"
)

// The injected state counts the raw events after the boundary that the
// resume command it names prints, in words: one event, or many.
func TestStateRender_CountsRawEvents(t *testing.T) {
	for n, want := range map[int]string{
		0: "then the 0 raw events after the boundary.",
		1: "then the 1 raw event after the boundary.",
		2: "then the 2 raw events after the boundary.",
	} {
		s := &State{Agent: "Claude Code", Session: "s", Boundary: 9, Marker: 1, SHA256: "ab", Bytes: 900, Events: n}
		if text := s.Render("/p/strata.db", 0).Text; !strings.Contains(text, want) {
			t.Errorf("%d events:\n%s\nwithout %q", n, text, want)
		}
	}
}

// A check's log fields name the summary by its event's seq, or, for a
// summary the hook input carried (PostCompact's compact_summary, checked
// before the agent wrote its record), by that input: a seq of 0 names no
// event.
func TestResultLine_NamesTheSummary(t *testing.T) {
	for _, c := range []struct {
		check     Check
		want, not string
	}{
		{Check{Summary: 11, Boundary: 9, Facts: 2}, " summary_seq=11 summary_boundary=9 summary_unmentioned=0/2", "summary_from="},
		{Check{FromInput: "PostCompact", Boundary: 9, Facts: 2, Unmentioned: []string{"artifact a.sql"}}, " summary_from=PostCompact summary_boundary=9 summary_unmentioned=1/2", "summary_seq="},
	} {
		r := &Result{Input: Input{HookEventName: "PostCompact", Action: ActionCheck, Trigger: "manual"}, Check: &c.check}
		if line := r.Line(); !strings.Contains(line, c.want) || strings.Contains(line, c.not) {
			t.Errorf("%+v: log line %q, want %q and no %q", c.check, line, c.want, c.not)
		}
	}
}
