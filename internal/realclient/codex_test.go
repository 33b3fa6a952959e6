package realclient_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/fakemodel"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/transcript"
)

const (
	cxTask     = "TASK-A: write the down migration for the widgets table"
	cxFollowUp = "FOLLOW-UP: what is the state of the work, and did anything fail?"
	cxPatch    = "*** Begin Patch\n*** Add File: " + writtenFile + "\n+-- down migration\n+DROP TABLE IF EXISTS widgets;\n*** End Patch\n"
)

// codexScript is the model of the Codex test: exec_command with a failing
// command, then apply_patch, then done, reporting a context so large that
// Codex compacts before its next turn; a summary that omits both when
// asked for one.
func codexScript() fakemodel.Script {
	return func(r *fakemodel.Request) fakemodel.Reply {
		switch {
		case strings.Contains(r.Last, cxFollowUp):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "Follow-up answered."}}}
		case isSummaryRequest(r):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: omitsSummary}}}
		case strings.Contains(r.Last, "call_strata_patch"):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "Done with TASK-A."}}, InputTokens: 400000}
		case strings.Contains(r.Last, "call_strata_exec"):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "That path does not exist; I'll write the down migration."},
				{Tool: "apply_patch", ID: "call_strata_patch", Custom: cxPatch}}}
		case strings.Contains(r.Last, cxTask):
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "I'll look at the migrations directory first."},
				{Tool: "exec_command", ID: "call_strata_exec", Input: map[string]any{"cmd": failingCmd}}}}
		}
		return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "ok"}}}
	}
}

// Codex 0.171.0 with strata's hooks installed by `strata codex install`
// in the project, beside a recorder of every hook input in CODEX_HOME's
// hooks.json: a task that runs a failing command and writes a file, then
// a follow-up turn before which Codex compacts by itself.
func TestCodex_RealClientCompacts(t *testing.T) {
	codex := client(t, "STRATA_TEST_CODEX")
	bin := buildStrata(t)
	strata := filepath.Join(bin, "strata")
	root := t.TempDir()
	srv := fakemodel.Start(t, codexScript())
	project, codexHome := newCodexHome(t, root, srv.URL)
	hookLog := filepath.Join(root, "hook-inputs.jsonl")
	recordHooks(t, filepath.Join(codexHome, "hooks.json"), hookLog)
	env := append(baseEnv(t, root, bin), "CODEX_HOME="+codexHome, "FAKE_MODEL_API_KEY=dummy")
	run(t, project, env, time.Minute, strata, "codex", "install")
	var stderr strings.Builder
	exec := func(args ...string) {
		_, e := runOut(t, project, env, 2*time.Minute, codex, append([]string{"exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--dangerously-bypass-hook-trust"}, args...)...)
		stderr.WriteString(e)
	}
	exec(cxTask)
	if _, err := os.Stat(filepath.Join(project, writtenFile)); err != nil {
		t.Fatalf("the scripted apply_patch did not run: %v", err)
	}
	exec("resume", "--last", cxFollowUp)

	// Codex asked for a summary, and the next request of the agent's loop
	// carries strata's block.
	reqs := srv.Requests()
	var next *fakemodel.Request
	for i, r := range reqs {
		if isSummaryRequest(r) {
			for _, r := range reqs[i+1:] {
				if r.Tools && !isSummaryRequest(r) {
					next = r
					break
				}
			}
		}
	}
	if next == nil {
		t.Fatal("no summary request, or no model request of the agent's loop after it: Codex did not compact")
	}
	block := strataBlock(t, next.Text)
	for _, want := range []string{"FAILED `" + failingCmd + "` (exec_command)", "artifact: " + writtenFile, cxTask} {
		if !strings.Contains(block, want) {
			t.Errorf("strata's block in the next model request does not name %q:\n%s", want, block)
		}
	}
	checkCodexHooksRan(t, stderr.String(), filepath.Join(project, ".codex", "strata.log"))

	rollouts, _ := filepath.Glob(filepath.Join(codexHome, "sessions", "*", "*", "*", "rollout-*.jsonl"))
	if len(rollouts) != 1 {
		t.Fatalf("rollouts %v, want one", rollouts)
	}
	raw, err := os.ReadFile(rollouts[0])
	if err != nil {
		t.Fatal(err)
	}
	checkCodexHookInputs(t, hookLog, rollouts[0])
	ss, rep, err := transcript.Read(transcript.Codex, bytes.NewReader(raw), transcript.Options{File: rollouts[0]})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 {
		t.Fatalf("%d sessions, want the rollout's one", len(ss))
	}
	checkCodexRollout(t, ss[0], rep, rollouts[0], raw)
	checkImplied(t, block, ss)
	checkSummaryOmitted(t, project, env, strata, "codex", []string{"FAILED `" + failingCmd + "` (exec_command)", writtenFile})
	if t.Failed() {
		t.Logf("strata's block:\n%s", block)
	}
}

// checkCodexHooksRan checks that Codex ran strata's hooks and that none
// failed — codex exec reports each hook run on stderr, "hook: EVENT" and
// then "hook: EVENT Completed" or "… Failed" — and strata's log, which
// has a line per run of its hook.
func checkCodexHooksRan(t *testing.T, stderr, logPath string) {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "hook: ") && !strings.HasSuffix(line, " Completed") && strings.Count(line, " ") > 1 {
			t.Errorf("a hook did not complete: %q", line)
		}
	}
	for _, event := range []string{"PreCompact", "PostCompact", "SessionStart"} {
		if !strings.Contains(stderr, "hook: "+event+" Completed") {
			t.Errorf("codex exec reports no completed %s hook:\n%s", event, stderr)
		}
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("strata's log: %v", err)
	}
	for _, want := range []string{" PreCompact trigger=auto ", " PostCompact trigger=auto ", " SessionStart source=compact "} {
		if !strings.Contains(string(log), want) {
			t.Errorf("strata's log has no %q line:\n%s", want, log)
		}
	}
}

// checkCodexRollout checks what the importer reads in the rollout the
// script made: a failing exec_command, an apply_patch that wrote one
// file, one compaction whose summary is the script's; the user's words
// are the two prompts, strata's injection none of them. Read again with
// what a store holds, the rollout adds nothing.
func checkCodexRollout(t *testing.T, s transcript.Session, rep transcript.Report, path string, raw []byte) {
	t.Helper()
	r := classify(s.Events)
	if r.calls != 2 || !slices.Equal(r.failed, []string{"call_strata_exec"}) || !slices.Equal(r.artifacts, []string{writtenFile}) || rep.Compactions != 1 {
		t.Errorf("calls=%d failed=%q artifacts=%q compactions=%d, want 2, the exec_command, %s, 1 (%s)", r.calls, r.failed, r.artifacts, rep.Compactions, writtenFile, rep.String())
	}
	if !slices.Equal(r.users, []string{cxTask, cxFollowUp}) {
		t.Errorf("user events %q, want the two prompts", r.users)
	}
	if rep.Skipped["hook_context"] == 0 {
		t.Errorf("report %s: strata's injection, hook output in the rollout, was not read as such", rep.String())
	}
	summary := false
	for _, s := range r.systems {
		summary = summary || strings.Contains(s, omitsSummary)
	}
	if !summary {
		t.Errorf("system events %q: none holds the compaction's summary", r.systems)
	}
	db := dbtest.Open(t, store.Options{})
	if _, err := db.Append(s.ID, s.Events...); err != nil {
		t.Fatal(err)
	}
	again, _, err := transcript.Read(transcript.Codex, bytes.NewReader(raw), transcript.Options{File: path, Target: func(conv string) (transcript.Target, error) {
		return transcript.Target{Session: conv, Stored: func(ref string) (ok bool, err error) {
			err = db.View(func(sn *store.Snapshot) (err error) { _, ok, err = sn.Ref(conv, ref); return err })
			return ok, err
		}}, nil
	}})
	if err != nil || len(again) != 1 || len(again[0].Events) != 0 {
		t.Errorf("the rollout read again against the store: %v, %d sessions, want no event", err, len(again))
	}
}

// recordHooks writes a Codex hooks.json whose hooks append their input to
// log, one line each: PreCompact, PostCompact and SessionStart.
func recordHooks(t *testing.T, path, log string) {
	t.Helper()
	cmd := fmt.Sprintf("cat >> %q; echo >> %q", log, log)
	entry := []map[string]any{{"hooks": []map[string]any{{"type": "command", "command": cmd, "timeout": 30}}}}
	raw, err := json.Marshal(map[string]any{"hooks": map[string]any{"PreCompact": entry, "PostCompact": entry, "SessionStart": entry}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkCodexHookInputs checks the inputs Codex gave the hooks: in order,
// SessionStart startup, PreCompact and PostCompact (trigger auto, with the
// turn), SessionStart resume and SessionStart compact, each naming the
// session and the rollout.
func checkCodexHookInputs(t *testing.T, log, rollout string) {
	t.Helper()
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the hooks recorded nothing: %v", err)
	}
	var got []string
	session := ""
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var in struct {
			SessionID      string `json:"session_id"`
			TurnID         string `json:"turn_id"`
			TranscriptPath string `json:"transcript_path"`
			Cwd            string `json:"cwd"`
			Event          string `json:"hook_event_name"`
			Model          string `json:"model"`
			Source         string `json:"source"`
			Trigger        string `json:"trigger"`
		}
		if err := json.Unmarshal(line, &in); err != nil {
			t.Fatalf("hook input %q: %v", line, err)
		}
		if session == "" {
			session = in.SessionID
		}
		if in.SessionID != session || in.TranscriptPath != rollout || in.Cwd == "" || in.Model != "gpt-5.5" {
			t.Errorf("hook input %s: want session %s, the rollout %s, the cwd and the model", line, session, rollout)
		}
		if (in.Event == "PreCompact" || in.Event == "PostCompact") && in.TurnID == "" {
			t.Errorf("hook input %s: no turn_id", line)
		}
		got = append(got, in.Event+":"+in.Source+in.Trigger)
	}
	want := []string{"SessionStart:startup", "PreCompact:auto", "PostCompact:auto", "SessionStart:resume", "SessionStart:compact"}
	if !slices.Equal(got, want) {
		t.Errorf("hooks ran %q, want %q", got, want)
	}
	if !strings.Contains(rollout, session) {
		t.Errorf("the hooks' session %s is not the rollout's %s", session, rollout)
	}
}

// Codex gives the model a hook's additional context whole only up to
// about 2,500 tokens: a context of strata's default budget (2,000 tokens
// at 4 bytes a token) reaches the model whole, one of 12,000 bytes is cut
// to a preview, the whole saved to a file (docs/codex.md).
func TestCodex_HookContextLimit(t *testing.T) {
	codex := client(t, "STRATA_TEST_CODEX")
	root := t.TempDir()
	srv := fakemodel.Start(t, func(*fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Blocks: []fakemodel.Block{{Text: "ok"}}}
	})
	project, codexHome := newCodexHome(t, root, srv.URL)
	sizes := []int{companion.DefaultBudget * 4, 12000}
	var groups []map[string]any
	for i, n := range sizes {
		text := fmt.Sprintf("BEGIN%d ", i) + strings.Repeat("word ", (n-16)/5) + fmt.Sprintf(" END%d", i)
		out, err := companion.AdditionalContext("SessionStart", text)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(root, fmt.Sprintf("context-%d.json", i))
		if err := os.WriteFile(file, out, 0o644); err != nil {
			t.Fatal(err)
		}
		groups = append(groups, map[string]any{"hooks": []map[string]any{{"type": "command", "command": "cat " + file, "timeout": 30}}})
	}
	raw, err := json.Marshal(map[string]any{"hooks": map[string]any{"SessionStart": groups}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "hooks.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(baseEnv(t, root, root), "CODEX_HOME="+codexHome, "FAKE_MODEL_API_KEY=dummy")
	run(t, project, env, time.Minute, codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", "hi")
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	text := reqs[0].Text
	whole := fmt.Sprintf("BEGIN0 %s END0", strings.Repeat("word ", (sizes[0]-16)/5))
	if !strings.Contains(text, whole) {
		t.Errorf("a context of %d bytes did not reach the model whole", sizes[0])
	}
	if !strings.Contains(text, "Warning: truncated output") || strings.Contains(text, "BEGIN1 "+strings.Repeat("word ", (sizes[1]-16)/5)) {
		t.Errorf("a context of %d bytes reached the model whole, or without Codex's warning of its cut", sizes[1])
	}
}

// newCodexHome makes a project under root, trusted, with a migrations
// directory, and a CODEX_HOME whose config.toml sends Codex to the
// scripted model at url (a model_providers entry of the Responses API, a
// known model slug, for which Codex offers apply_patch) and makes it
// compact at 100,000 tokens. It returns the two directories.
func newCodexHome(t *testing.T, root, url string) (project, codexHome string) {
	t.Helper()
	project = filepath.Join(root, "project")
	codexHome = filepath.Join(root, "home", ".codex")
	for _, d := range []string{filepath.Join(project, "migrations"), codexHome} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	config := fmt.Sprintf(`model = "gpt-5.5"
model_provider = "fake"
model_auto_compact_token_limit = 100000
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "fake"
base_url = "%s/v1"
wire_api = "responses"
env_key = "FAKE_MODEL_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[projects.%q]
trust_level = "trusted"
`, url, project)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return project, codexHome
}
