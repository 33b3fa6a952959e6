package companion

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// TestHook_SummaryInTheCompactionRecord: an agent that writes its summary
// in its record of the compaction (Codex's compacted record, read before
// PostCompact runs) has it checked from the store at the check action: the
// summary's events are those of that record after the compaction's event.
func TestHook_SummaryInTheCompactionRecord(t *testing.T) {
	ls := lines(t, "../transcript/testdata/codex/rollout.jsonl")
	cut := -1
	for i, l := range ls {
		if strings.Contains(string(l), `"type":"compacted"`) {
			cut = i
		}
	}
	path := filepath.Join(t.TempDir(), "rollout.jsonl")
	grow(t, path, ls[:cut])
	db := dbtest.Open(t, store.Options{NoSync: true})
	h, err := New(db, codexAgent{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := Input{SessionID: "codex-session", TranscriptPath: path, Cwd: "/work/app", HookEventName: "PreCompact", Trigger: "auto"}
	pre, err := h.Run(context.Background(), in)
	if err != nil || len(pre.Compactions) == 0 || pre.Check != nil {
		t.Fatalf("PreCompact: %+v %v", pre, err)
	}
	// Not the last line, which repeats the id of the one before the
	// compaction (the fixture's duplicate record): a read would start
	// after it.
	grow(t, path, ls[cut:len(ls)-1])
	in.HookEventName = "PostCompact"
	post, err := h.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	c := post.Check
	if c == nil || c.Summary == 0 || c.Boundary != pre.Compactions[0].To || c.FromInput != "" || post.Unwritten {
		t.Fatalf("PostCompact: check %+v, unwritten %v; want the compacted record's summary checked at seq %d", c, post.Unwritten, pre.Compactions[0].To)
	}
	var summary string
	if err := db.View(func(s *store.Snapshot) error {
		return s.Events("codex-session", c.Summary, c.Summary, func(e tier.Event) error {
			summary = e.Text
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if summary != "Summary: the build was fixed." {
		t.Errorf("the summary checked is %q, want the compacted record's message", summary)
	}
}

// TestHook_InjectOnce: an agent that injects at its next hook after a
// compaction gets the state once per compaction: nothing before the
// first, the state at the first hook after it, nothing at the ones after
// that, and the state at the next compaction's boundary after it.
func TestHook_InjectOnce(t *testing.T) {
	ls := lines(t, fixture)
	path := filepath.Join(t.TempDir(), "t.jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	h, err := New(db, onceAgent{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(event string) *Result {
		t.Helper()
		r, err := h.Run(context.Background(), Input{SessionID: fixtureSession, TranscriptPath: path, Cwd: "/home/dev/app", HookEventName: event})
		if err != nil {
			t.Fatalf("%s: %v", event, err)
		}
		return r
	}
	grow(t, path, ls[:8])
	if r := run("BeforeAgent"); r.Output != nil || !r.NoBoundary {
		t.Fatalf("BeforeAgent before any compaction: %s", r.Line())
	}
	pre := run("PreCompact")
	if len(pre.Compactions) == 0 {
		t.Fatalf("PreCompact: %s", pre.Line())
	}
	first := run("BeforeAgent")
	if first.Output == nil || first.State == nil || first.State.Boundary != pre.Compactions[0].To || first.Injected {
		t.Fatalf("the first BeforeAgent after PreCompact: %s", first.Line())
	}
	if again := run("BeforeAgent"); again.Output != nil || !again.Injected || !strings.Contains(again.Line(), "injected_already") {
		t.Fatalf("BeforeAgent again: %s", again.Line())
	}
	grow(t, path, ls[8:12])
	if r := run("BeforeAgent"); r.Output != nil || !r.Injected {
		t.Fatalf("BeforeAgent with new records, no compaction: %s", r.Line())
	}
	pre2 := run("PreCompact")
	next := run("BeforeAgent")
	if len(pre2.Compactions) == 0 || next.Output == nil || next.State.Boundary != pre2.Compactions[0].To || next.State.Boundary <= first.State.Boundary {
		t.Fatalf("after the second PreCompact: %s; then %s", pre2.Line(), next.Line())
	}
}
