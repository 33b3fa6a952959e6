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
