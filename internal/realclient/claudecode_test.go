package realclient_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/internal/fakemodel"
	"github.com/strata-go/strata/transcript"
)

// The scripted task: a failing command, a written file, and a summary
// that mentions neither.
const (
	ccTask       = "TASK-A: write the down migration for the widgets table"
	ccFollowUp   = "FOLLOW-UP: what is the state of the work, and did anything fail?"
	failingCmd   = "ls /nonexistent/strata-dir"
	writtenFile  = "migrations/003_down.sql"
	omitsSummary = "Summary of the conversation so far:\n- The user asked to prepare the database migration work.\n- Errors: none. Every step succeeded.\n- Files: none of note.\n- Pending: nothing."
)

// claudeScript is the model of the Claude Code test: Bash with a failing
// command, then Write, then done; a summary that omits both when asked
// for one; a plain answer to anything else.
func claudeScript(project string) fakemodel.Script {
	return func(r *fakemodel.Request) fakemodel.Reply {
		switch {
		case isSummaryRequest(r):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: omitsSummary}}}
		case !r.Tools:
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "ok"}}}
		case strings.Contains(r.Last, "toolu_strata_write"):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "Done with TASK-A."}}}
		case strings.Contains(r.Last, "toolu_strata_bash"):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "That path does not exist; I'll write the down migration."},
				{Tool: "Write", ID: "toolu_strata_write", Input: map[string]any{
					"file_path": filepath.Join(project, writtenFile), "content": "-- down migration\nDROP TABLE IF EXISTS widgets;\n"}}}}
		case strings.Contains(r.Last, ccTask):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "I'll look at the migrations directory first."},
				{Tool: "Bash", ID: "toolu_strata_bash", Input: map[string]any{"command": failingCmd, "description": "List the directory"}}}}
		}
		return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "Follow-up answered."}}}
	}
}

// isSummaryRequest reports whether a request asks the model for the
// summary of a compaction: Claude Code's and Codex's prompts ask for a
// summary of the conversation.
func isSummaryRequest(r *fakemodel.Request) bool {
	l := strings.ToLower(r.LastUser)
	return strings.Contains(l, "summary") && (strings.Contains(l, "conversation") || strings.Contains(l, "compaction") || strings.Contains(l, "handoff"))
}

func TestClaudeCode_RealClientCompacts(t *testing.T) {
	claude := client(t, "STRATA_TEST_CLAUDE")
	bin := buildStrata(t)
	root := t.TempDir()
	project := filepath.Join(root, "project")
	if err := os.MkdirAll(filepath.Join(project, "migrations"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := fakemodel.Start(t, claudeScript(project))
	env := append(baseEnv(t, root, bin),
		"ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY=sk-ant-test-dummy", "IS_SANDBOX=1",
		"CLAUDE_CONFIG_DIR="+filepath.Join(root, "home", ".claude"),
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	run(t, project, env, time.Minute, filepath.Join(bin, "strata"), "claude-code", "install")

	claudeRun := func(args ...string) map[string]any {
		t.Helper()
		out := run(t, project, env, 2*time.Minute, claude, append([]string{"--dangerously-skip-permissions", "--output-format", "json"}, args...)...)
		var res map[string]any
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("claude's output is not one JSON document: %v\n%s", err, out)
		}
		return res
	}
	res := claudeRun("-p", ccTask)
	id, _ := res["session_id"].(string)
	if id == "" {
		t.Fatalf("no session_id in %v", res)
	}
	if _, err := os.Stat(filepath.Join(project, writtenFile)); err != nil {
		t.Fatalf("the scripted Write did not run: %v", err)
	}
	claudeRun("-p", "/compact", "--resume", id)
	n := len(srv.Requests())
	claudeRun("-p", ccFollowUp, "--resume", id)
	var next *fakemodel.Request
	for _, r := range srv.Requests()[n:] {
		if r.Tools {
			next = r
			break
		}
	}
	if next == nil {
		t.Fatal("no model request of the agent's loop after the compaction")
	}
	block := strataBlock(t, next.Text)
	for _, want := range []string{"FAILED `" + failingCmd + "` (Bash)", "/nonexistent/strata-dir", "artifact: " + writtenFile, ccTask} {
		if !strings.Contains(block, want) {
			t.Errorf("strata's block in the next model request does not name %q:\n%s", want, block)
		}
	}

	transcriptPath := filepath.Join(root, "home", ".claude", "projects", "*", id+".jsonl")
	files, _ := filepath.Glob(transcriptPath)
	if len(files) != 1 {
		t.Fatalf("transcripts %v, want the one of %s", files, transcriptPath)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	checkHooksRan(t, raw, filepath.Join(project, ".claude", "strata.log"))
	ss, _, err := transcript.Read(transcript.ClaudeCode, bytes.NewReader(raw), transcript.Options{File: files[0]})
	if err != nil {
		t.Fatal(err)
	}
	checkImplied(t, block, ss)
	checkSummaryOmitted(t, project, env, filepath.Join(bin, "strata"), "claude-code", []string{"FAILED `" + failingCmd + "` (Bash)", writtenFile})
}

// checkHooksRan checks that Claude Code ran strata's hooks and each exited
// 0: the transcript's hook attachments (hook_success with exitCode 0, no
// hook error), and strata's log, which has a line per hook run.
func checkHooksRan(t *testing.T, raw []byte, logPath string) {
	t.Helper()
	ok := 0
	for _, line := range bytes.Split(raw, []byte("\n")) {
		var rec struct {
			Attachment struct {
				Type      string `json:"type"`
				HookEvent string `json:"hookEvent"`
				ExitCode  *int   `json:"exitCode"`
				Command   string `json:"command"`
			} `json:"attachment"`
		}
		if json.Unmarshal(line, &rec) != nil || !strings.HasPrefix(rec.Attachment.Type, "hook_") {
			continue
		}
		a := rec.Attachment
		switch {
		case strings.Contains(a.Type, "error") || strings.Contains(a.Type, "cancel"):
			t.Errorf("a hook failed: %s", line)
		case a.Type == "hook_success" && strings.Contains(a.Command, "strata claude-code hook"):
			if a.ExitCode == nil || *a.ExitCode != 0 {
				t.Errorf("hook_success without exit code 0: %s", line)
			}
			ok++
		}
	}
	if ok == 0 {
		t.Errorf("the transcript records no successful run of strata's hook")
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("strata's log: %v", err)
	}
	for _, want := range []string{" PreCompact trigger=manual ", " SessionStart source=compact "} {
		if !strings.Contains(string(log), want) {
			t.Errorf("strata's log has no %q line:\n%s", want, log)
		}
	}
}
