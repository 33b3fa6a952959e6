package realclient_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/internal/fakemodel"
	"github.com/strata-go/strata/transcript"
)

const (
	gmNext = "NEXT: anything else to do?"
	// gmPlanItem is the item of the plan the model writes in the
	// follow-up: the call whose answer reports a context so large that
	// Gemini CLI compresses before its next turn.
	gmPlanItem = "Review the down migration"
)

// geminiScript is the model of the Gemini CLI test: run_shell_command
// with a failing command, then write_file, then done; to the follow-up,
// write_todos reporting 900 000 prompt tokens, so that Gemini CLI
// compresses before its next turn (its threshold is half of the model's
// 1 048 576); a summary that omits the failure and the file when asked
// for the <state_snapshot> (twice: Gemini CLI asks again to verify it).
func geminiScript(project string) fakemodel.Script {
	return func(r *fakemodel.Request) fakemodel.Reply {
		switch {
		case strings.Contains(r.LastUser, "<state_snapshot>"):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: omitsSummary}}}
		case !r.Tools:
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "ok"}}}
		case strings.Contains(r.Last, "strata_todos"):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "Follow-up answered."}}}
		case strings.Contains(r.Last, "strata_write"):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "Done with TASK-A."}}}
		case strings.Contains(r.Last, "strata_exec"):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "That path does not exist; I'll write the down migration."},
				{Tool: "write_file", ID: "write_file__strata_write", Input: map[string]any{
					"file_path": filepath.Join(project, writtenFile), "content": "-- down migration\nDROP TABLE IF EXISTS widgets;\n"}}}}
		case strings.Contains(r.Last, ccTask):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "I'll look at the migrations directory first."},
				{Tool: "run_shell_command", ID: "run_shell_command__strata_exec", Input: map[string]any{"command": failingCmd, "description": "List the directory"}}}}
		case strings.Contains(r.Last, ccFollowUp):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "Planning the review."},
				{Tool: "write_todos", ID: "write_todos__strata_todos", Input: map[string]any{"todos": []any{map[string]any{"description": gmPlanItem, "status": "pending"}}}}},
				InputTokens: 900000}
		}
		return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "Nothing else."}}}
	}
}

// hookFailed is what Gemini CLI prints when a hook exits with a status
// other than 0 (seen with a hook that exits 1).
var hookFailed = regexp.MustCompile(`(?i)hook execution for \w+: \d+ succeeded, [1-9]\d* failed|failed for event`)

func TestGemini_RealClientCompresses(t *testing.T) {
	gem := client(t, "STRATA_TEST_GEMINI")
	bin := buildStrata(t)
	strata := filepath.Join(bin, "strata")
	root := t.TempDir()
	project := filepath.Join(root, "project")
	userDir := filepath.Join(root, "home", ".gemini")
	for _, d := range []string{filepath.Join(project, "migrations"), userDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srv := fakemodel.Start(t, geminiScript(project))
	// The user's settings: the API key's auth, a model of a known context
	// window; strata's hooks are the project's, installed by strata.
	user, err := json.Marshal(map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"model":    map[string]any{"name": "gemini-2.5-flash"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(userDir, "settings.json"), user, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(baseEnv(t, root, bin), "GOOGLE_GEMINI_BASE_URL="+srv.URL, "GEMINI_API_KEY=dummy-key", "GEMINI_CLI_TRUST_WORKSPACE=true")
	run(t, project, env, time.Minute, strata, "gemini", "install")

	var printed strings.Builder
	gemini := func(args ...string) {
		t.Helper()
		out := run(t, project, env, 3*time.Minute, gem, append([]string{"--yolo", "--output-format", "json"}, args...)...)
		printed.WriteString(out)
	}
	gemini("-p", ccTask)
	if _, err := os.Stat(filepath.Join(project, writtenFile)); err != nil {
		t.Fatalf("the scripted write_file did not run: %v", err)
	}
	gemini("--resume", "latest", "-p", ccFollowUp)
	compressed := false
	for _, r := range srv.Requests() {
		compressed = compressed || strings.Contains(r.LastUser, "<state_snapshot>")
	}
	if !compressed {
		t.Fatal("Gemini CLI asked for no <state_snapshot>: it did not compress")
	}
	n := len(srv.Requests())
	gemini("--resume", "latest", "-p", gmNext)
	var next *fakemodel.Request
	for _, r := range srv.Requests()[n:] {
		if r.Tools && strings.Contains(r.Last, gmNext) {
			next = r
			break
		}
	}
	if next == nil {
		t.Fatal("no model request of the agent's loop for the next prompt")
	}
	block := strataBlock(t, next.Last)
	// The file write_file wrote by its absolute path is named relative to
	// the project, the hook input's cwd.
	for _, want := range []string{"FAILED `" + failingCmd + "` (run_shell_command)", "artifact: " + writtenFile, ccTask, "[pending] " + gmPlanItem} {
		if !strings.Contains(block, want) {
			t.Errorf("strata's block in the next model request does not name %q:\n%s", want, block)
		}
	}
	if hookFailed.MatchString(printed.String()) {
		t.Errorf("Gemini CLI reports a hook that failed:\n%s", printed.String())
	}
	checkGeminiLog(t, filepath.Join(project, ".gemini", "strata.log"))

	chats, _ := filepath.Glob(filepath.Join(userDir, "tmp", "*", "chats", "session-*.jsonl"))
	var chat string
	for _, c := range chats { // a resume in another minute leaves a file of two records beside the chat
		if fi, err := os.Stat(c); err == nil && (chat == "" || fi.Size() > mustSize(t, chat)) {
			chat = c
		}
	}
	if chat == "" {
		t.Fatalf("no chat under %s", userDir)
	}
	raw, err := os.ReadFile(chat)
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("STRATA_GEMINI_KEEP"); dir != "" {
		// The run's chat and strata's log, for the fixture of
		// transcript/testdata/gemini and the example of docs/gemini.md.
		log, _ := os.ReadFile(filepath.Join(project, ".gemini", "strata.log"))
		if err := errors.Join(os.WriteFile(filepath.Join(dir, "chat.jsonl"), raw, 0o644), os.WriteFile(filepath.Join(dir, "strata.log"), log, 0o644)); err != nil {
			t.Fatal(err)
		}
	}
	ss := checkGeminiChat(t, chat, raw, project)
	checkImplied(t, block, ss)
	checkSummaryOmitted(t, project, env, strata, "gemini", []string{"FAILED `" + failingCmd + "` (run_shell_command)", writtenFile})
}

func mustSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// checkGeminiLog checks strata's log: a line per hook run, PreCompress
// (trigger auto) and BeforeAgent among them, the injection once, no
// failure.
func checkGeminiLog(t *testing.T, path string) {
	t.Helper()
	log, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("strata's log: %v", err)
	}
	s := string(log)
	for _, want := range []string{" PreCompress trigger=auto ", " BeforeAgent "} {
		if !strings.Contains(s, want) {
			t.Errorf("strata's log has no %q line:\n%s", want, s)
		}
	}
	if n := strings.Count(s, " marker="); n < 1 || strings.Contains(s, " error") {
		t.Errorf("strata's log: %d injections, want one and no error:\n%s", n, s)
	}
}

// checkGeminiChat reads the chat Gemini CLI recorded with the importer,
// files named relative to the project as the hook names them (its
// input's cwd), and checks what it holds against what the script made
// Gemini CLI do: three calls, the failed run_shell_command, the file
// write_file wrote,
// one compression holding the script's summary, the three prompts as the
// user's words (strata's injection not among them); read again against
// a store holding it, it adds nothing.
func checkGeminiChat(t *testing.T, path string, raw []byte, project string) []transcript.Session {
	t.Helper()
	ss, rep, err := transcript.Read(transcript.Gemini, bytes.NewReader(raw), transcript.Options{File: path, Dir: project})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 {
		t.Fatalf("%d sessions, want the chat's one", len(ss))
	}
	r := classify(ss[0].Events)
	if r.calls != 3 || !slices.Equal(r.failed, []string{"run_shell_command__strata_exec"}) || !slices.Equal(r.artifacts, []string{writtenFile}) || rep.Compactions != 1 {
		t.Errorf("calls=%d failed=%q artifacts=%q compactions=%d, want 3, the run_shell_command, %s, 1 (%s)", r.calls, r.failed, r.artifacts, rep.Compactions, writtenFile, rep.String())
	}
	if !slices.Equal(r.users, []string{ccTask, ccFollowUp, gmNext}) {
		t.Errorf("user events %q, want the three prompts", r.users)
	}
	if rep.Skipped["hook_context"] != 1 {
		t.Errorf("report %s: want strata's injection skipped as the hook's context once", rep.String())
	}
	if !slices.ContainsFunc(r.systems, func(s string) bool { return strings.Contains(s, omitsSummary) }) {
		t.Errorf("system events %q: none holds the compression's summary", r.systems)
	}
	readAgainAddsNothing(t, transcript.Gemini, path, raw, ss[0])
	return ss
}
