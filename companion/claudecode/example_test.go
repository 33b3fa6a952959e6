package claudecode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
	"github.com/strata-go/strata/store"
)

// Example drives the hooks through Claude Code's adapter as Claude Code
// does: PreCompact while the transcript ends just before Claude Code's
// compaction, then SessionStart(compact) once it has written its
// compact_boundary record and its summary, whose output adds the state at
// the boundary to the compacted context.
func Example() {
	dir, _ := os.MkdirTemp("", "claudecode")
	defer os.RemoveAll(dir)
	whole, _ := os.ReadFile("../../transcript/testdata/claude-code/session.jsonl")
	cut := bytes.Index(whole, []byte(`"subtype": "compact_boundary"`))
	cut = bytes.LastIndexByte(whole[:cut], '\n') + 1
	transcript := filepath.Join(dir, "session.jsonl")
	os.WriteFile(transcript, whole[:cut], 0o600) // Claude Code is about to compact

	db, _ := store.Open(filepath.Join(dir, "strata.db"), store.Options{Create: true})
	defer db.Close()
	hook, _ := companion.New(db, claudecode.Agent{}, companion.Options{DB: ".claude/strata.db", Budget: 400})
	in := companion.Input{SessionID: "7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41", TranscriptPath: transcript,
		Cwd: "/home/dev/app", HookEventName: claudecode.EventPreCompact, Trigger: "auto"}
	pre, err := hook.Run(context.Background(), in)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("PreCompact: %d events stored, marker %d at seq %d\n", pre.Import.Events, pre.Compactions[0].Marker, pre.Compactions[0].To)

	os.WriteFile(transcript, whole, 0o600) // Claude Code compacted
	in.HookEventName, in.Trigger, in.Source = claudecode.EventSessionStart, "", claudecode.SourceCompact
	start, err := hook.Run(context.Background(), in)
	if err != nil {
		fmt.Println(err)
		return
	}
	var out struct {
		HookSpecificOutput struct{ AdditionalContext string } `json:"hookSpecificOutput"`
	}
	json.Unmarshal(start.Output, &out)
	fmt.Print(out.HookSpecificOutput.AdditionalContext)
	fmt.Println("not mentioned by Claude Code's summary:", start.Check.Unmentioned)
	// Output:
	// PreCompact: 14 events stored, marker 1 at seq 14
	// # strata: the state at Claude Code's compaction
	// Computed by strata from the raw transcript, not from a summary: what session 7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41 implies at seq 14, where Claude Code compacted it. Every line below is a fact of the raw log; none is a summarizer's words.
	// Every fact, unabridged: `strata resume --db .claude/strata.db --session 7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41 --marker 1` (marker 1, sha256 e8328801a9b26ae2e9dd8e314b6cba0e124a8a11704b1f0db733c022949c12b4) prints the whole context, 3364 bytes: the summary nodes with every fact as their claims, then the 13 raw events after the boundary.
	//
	// ## the task (the user's first request, seq 1), in the user's words:
	//   The login test is flaky; fix it. Don't touch the CI config.
	//
	// ## the user's newest request (seq 11), in the user's words:
	//   I said don't touch CI. Fix the wait in the test instead.
	//
	// ## failures that still stand, by what failed, newest first: 1
	// - FAILED `pytest tests/test_login.py -x` (Bash) — once, newest at seq 5 (call toolu_02)
	//     FAILED tests/test_login.py::test_login - TimeoutError: session not ready
	//
	// ## rejected, failed or superseded items, newest first: 1
	// - rejected: `/home/dev/app/.github/workflows/ci.yml` (Edit), call toolu_03 at seq 8 — the user rejected the tool use
	//
	// ## artifacts (files written), newest first: 1
	// - artifact: tests/test_login.py — written by Edit (call toolu_04)
	// not mentioned by Claude Code's summary: [FAILED `pytest tests/test_login.py -x` (Bash) rejected tool/Edit:.github/workflows/ci.yml artifact tests/test_login.py]
}
