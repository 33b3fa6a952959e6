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
