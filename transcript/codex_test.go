package transcript_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// codexCounts is what a rollout says, read here without the package: the
// calls, the outputs of calls a structured signal marks failed, the files
// the successful calls wrote, the plan items of update_plan calls and the
// messages the user typed (Codex's own user_message and UserMessage
// events, not the items the importer reads).
type codexCounts struct {
	calls, failures, files, planItems, userWords int
}

func readCodexCounts(t *testing.T, raw []byte) codexCounts {
	t.Helper()
	type line struct {
		Type    string         `json:"type"`
		Payload map[string]any `json:"payload"`
	}
	var lines []line
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	s := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	failed := map[string]bool{}
	changed := map[string][]string{}
	changes := func(id string, m map[string]any) {
		for p, c := range m {
			if cm, _ := c.(map[string]any); s(cm, "type") != "delete" {
				changed[id] = append(changed[id], p)
			}
		}
	}
	var c codexCounts
	for _, l := range lines { // end events first: they precede the outputs
		p := l.Payload
		if l.Type != "event_msg" {
			continue
		}
		switch s(p, "type") {
		case "exec_command_end":
			failed[s(p, "call_id")] = p["exit_code"] != float64(0)
		case "patch_apply_end":
			failed[s(p, "call_id")] = p["success"] == false
			m, _ := p["changes"].(map[string]any)
			changes(s(p, "call_id"), m)
		case "user_message":
			c.userWords++
		case "item_completed":
			it, _ := p["item"].(map[string]any)
			switch s(it, "type") {
			case "UserMessage":
				c.userWords++
			case "CommandExecution":
				failed[s(it, "id")] = it["exit_code"] != float64(0)
			case "FileChange":
				failed[s(it, "id")] = s(it, "status") == "failed"
				m, _ := it["changes"].(map[string]any)
				changes(s(it, "id"), m)
			}
		}
	}
	calls := map[string]map[string]any{}
	for _, l := range lines {
		p := l.Payload
		if l.Type != "response_item" {
			continue
		}
		switch s(p, "type") {
		case "function_call", "custom_tool_call":
			c.calls++
			calls[s(p, "call_id")] = p
			if s(p, "name") == "update_plan" {
				var a struct{ Plan []any }
				if err := json.Unmarshal([]byte(s(p, "arguments")), &a); err != nil {
					t.Fatal(err)
				}
				c.planItems += len(a.Plan)
			}
		case "function_call_output", "custom_tool_call_output":
			id := s(p, "call_id")
			var env struct {
				Metadata struct {
					ExitCode int `json:"exit_code"`
				} `json:"metadata"`
			}
			f := failed[id] || (json.Unmarshal([]byte(s(p, "output")), &env) == nil && env.Metadata.ExitCode != 0)
			call := calls[id]
			if call == nil {
				continue
			}
			if f {
				c.failures++
				continue
			}
			files := map[string]bool{}
			if s(call, "name") == "apply_patch" {
				for _, ln := range strings.Split(s(call, "input")+s(call, "arguments"), "\n") {
					for _, pre := range []string{"*** Add File: ", "*** Update File: ", "*** Move to: "} {
						if rest, ok := strings.CutPrefix(ln, pre); ok {
							files[rest] = true
						}
					}
				}
			} else {
				for _, p := range changed[id] {
					files[p] = true
				}
			}
			c.files += len(files)
		}
	}
	return c
}

// codexRollouts are the real rollouts: recorded from Codex 0.171.0 and the
// public ones of ../shared/data/transcripts/codex.
func codexRollouts(t *testing.T) []string {
	a, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "realclient", "codex-0.171.0-rollout-*.jsonl"))
	b, _ := filepath.Glob(filepath.Join("..", "..", "shared", "data", "transcripts", "codex", "*.jsonl"))
	if len(a)+len(b) == 0 {
		t.Skip("../shared/data/realclient and ../shared/data/transcripts/codex are absent")
	}
	return append(a, b...)
}

// Every real rollout: the calls, failures, written files, plan items and
// the user's words the importer finds are those an independent reading of
// the file counts; the events pass the store; no user event holds hook
// output.
func TestRead_CodexRealRollouts(t *testing.T) {
	var total codexCounts
	for _, name := range append(codexRollouts(t), "testdata/codex/rollout.jsonl") {
		t.Run(filepath.Base(name), func(t *testing.T) {
			raw, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			want := readCodexCounts(t, raw)
			evs, rep := readFile(t, transcript.Codex, name, transcript.Options{})
			got := codexEventCounts(t, evs)
			if got != want {
				t.Errorf("the importer found %+v, the file says %+v", got, want)
			}
			if rep.Calls != want.calls || rep.Failed != want.failures || rep.Artifacts != want.files {
				t.Errorf("report %s, want calls=%d failed=%d artifacts=%d", rep.String(), want.calls, want.failures, want.files)
			}
			total.calls += want.calls
			total.failures += want.failures
			total.files += want.files
			total.planItems += want.planItems
			stored(t, evs)
		})
	}
	if total.failures == 0 || total.files == 0 || total.planItems == 0 {
		t.Errorf("totals %+v: a count the check compares is zero in every file", total)
	}
}

// codexEventCounts counts what the events of a rollout hold.
func codexEventCounts(t *testing.T, evs []tier.Event) codexCounts {
	var c codexCounts
	for _, e := range evs {
		switch e.Kind {
		case tier.KindToolCall:
			c.calls++
			if e.Name == "update_plan" {
				var a struct{ Plan []any }
				if err := json.Unmarshal([]byte(e.Text), &a); err != nil {
					t.Errorf("update_plan call %s: its input is not the plan: %v", e.ID, err)
				}
				c.planItems += len(a.Plan)
			}
		case tier.KindToolResult:
			if e.Failed {
				c.failures++
			}
		case tier.KindArtifact:
			c.files++
		case tier.KindUser:
			c.userWords++
			if strings.Contains(e.Text, "# strata") {
				t.Errorf("user event %q holds a hook's injected context", e.Text)
			}
		}
	}
	return c
}

// The fixture: what each structured signal gives, and what is left out.
func TestRead_Codex(t *testing.T) {
	ss := readSessions(t, transcript.Codex, "testdata/codex/rollout.jsonl", transcript.Options{})
	if len(ss) != 1 || ss[0].ID != "0199aaaa-0000-7000-8000-000000000001" {
		t.Fatalf("sessions %v, want the one session_meta names", ids(ss))
	}
	s := ss[0]
	var failedIDs, users, systems []string
	for _, e := range s.Events {
		switch {
		case e.Kind == tier.KindToolResult && e.Failed:
			failedIDs = append(failedIDs, e.ID)
		case e.Kind == tier.KindUser:
			users = append(users, e.Text)
		case e.Kind == tier.KindSystem:
			systems = append(systems, e.Text)
		}
	}
	// make (exec_command_end 2), grep (the envelope's exit code 1), the
	// patch that did not apply, ls (CommandExecution 2); not echo, whose
	// output says "exited with code 1" and whose exit code is 0.
	if want := []string{"call_make", "call_grep", "call_bad_patch", "call_ls"}; !slices.Equal(failedIDs, want) {
		t.Errorf("failed results %q, want %q", failedIDs, want)
	}
	if want := []string{"Fix the build and plan the release.", "Did anything fail?"}; !slices.Equal(users, want) {
		t.Errorf("user events %q, want %q", users, want)
	}
	if len(systems) != 3 || !strings.HasPrefix(systems[0], "<environment_context>") || systems[1] != transcript.CodexCompacted || systems[2] != "Summary: the build was fixed." {
		t.Errorf("system events %q, want the environment, the compaction and its summary", systems)
	}
	n := 0
	for _, e := range s.Events {
		if transcript.IsCodexCompaction(e) {
			n++
		}
	}
	if n != 1 || s.Report.Compactions != 1 {
		t.Errorf("%d compaction events, report %d: want 1", n, s.Report.Compactions)
	}
	rep := s.Report
	if rep.DuplicateRecords != 1 || rep.Skipped["reasoning"] != 1 || rep.Skipped["compaction"] != 1 || rep.Skipped["hook_context"] != 2 || rep.Skipped["developer"] != 1 || rep.Skipped["compaction_output"] != 1 {
		t.Errorf("report %s: want the re-logged item, the encrypted reasoning and compaction, two hook contexts, the developer message and the summary's compaction_output item counted", rep.String())
	}
	for _, e := range s.Events {
		if e.Kind == tier.KindAssistant && strings.Contains(e.Text, "Summary:") {
			t.Errorf("assistant event %q: the compaction_output item is the summary the compacted record carries", e.Text)
		}
	}
	checkLedger(t, stored(t, s.Events), ledgerWant{artifacts: []string{"docs/release.md", "src/build.go"}})
}

// A rollout read as it grew, and again whole, stores what one read of the
// whole stores; a second read adds nothing (refs are the rollout's ids).
// The rollouts: the fixture, the one recorded from Codex 0.171.0, and one
// public rollout of an older version, whose items lack ids.
func TestRead_CodexGrownAndAgain(t *testing.T) {
	names := []string{"testdata/codex/rollout.jsonl"}
	for _, n := range codexRollouts(t) {
		if strings.Contains(n, "realclient") || strings.HasSuffix(n, "tomjnsn_agentlogs_crud.jsonl") {
			names = append(names, n)
		}
	}
	for _, name := range names {
		t.Run(filepath.Base(name), func(t *testing.T) {
			full, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			read := func(raw []byte, db *store.DB) []transcript.Session {
				opts := transcript.Options{File: name}
				if db != nil {
					opts.Target = func(conv string) (transcript.Target, error) { return target(t, db, conv), nil }
				}
				ss, _, err := transcript.Read(transcript.Codex, bytes.NewReader(raw), opts)
				if err != nil {
					t.Fatal(err)
				}
				return ss
			}
			once := storeSessions(t, read(full, nil))
			lines := bytes.SplitAfter(full, []byte("\n"))
			grown := dbtest.Open(t, store.Options{})
			for i, raw := range [][]byte{bytes.Join(lines[:len(lines)/2], nil), full, full} {
				for _, s := range read(raw, grown) {
					if i == 2 && len(s.Events) > 0 {
						t.Errorf("a third read gives %d events, want none", len(s.Events))
					}
					if len(s.Events) > 0 {
						if _, err := grown.Append(s.ID, s.Events...); err != nil {
							t.Fatalf("append %s: %v", s.ID, err)
						}
					}
				}
			}
			if a, b := dumpEvents(t, once), dumpEvents(t, grown); a != b {
				t.Errorf("read as it grew:\n%s\nwant\n%s", b, a)
			}
		})
	}
}

// A compacted record, which has no id, has the same ref read whole and
// read from the middle of the rollout — as an incremental import reads it
// from the item the session holds last — so that the two reads store it
// once.
func TestRead_CodexCompactedRefIsPositionFree(t *testing.T) {
	raw, err := os.ReadFile("testdata/codex/rollout.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	refOf := func(raw []byte) string {
		ss, _, err := transcript.Read(transcript.Codex, bytes.NewReader(raw), transcript.Options{File: "rollout.jsonl"})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			for _, e := range s.Events {
				if transcript.IsCodexCompaction(e) {
					return e.Ref
				}
			}
		}
		t.Fatalf("no compaction read")
		return ""
	}
	whole := refOf(raw)
	tail := raw[bytes.Index(raw, []byte(`"id":"msg_a1"`)):]
	tail = tail[bytes.IndexByte(tail, '\n')+1:]
	if part := refOf(tail); part != whole || !strings.HasPrefix(whole, "compacted:") {
		t.Errorf("the compacted record's ref: %q read whole, %q read from the middle; want one, compacted:…", whole, part)
	}
}
