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

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/internal/fakemodel"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
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

func TestCodex_RealClientCompactsAndTheRolloutImports(t *testing.T) {
	codex := client(t, "STRATA_TEST_CODEX")
	root := t.TempDir()
	project := filepath.Join(root, "project")
	codexHome := filepath.Join(root, "home", ".codex")
	for _, d := range []string{filepath.Join(project, "migrations"), codexHome} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srv := fakemodel.Start(t, codexScript())
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
`, srv.URL, project)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	hookLog := filepath.Join(root, "hook-inputs.jsonl")
	recordHooks(t, filepath.Join(codexHome, "hooks.json"), hookLog)
	env := append(baseEnv(t, root, filepath.Dir(codex)), "CODEX_HOME="+codexHome, "FAKE_MODEL_API_KEY=dummy")
	exec := func(args ...string) string {
		return run(t, project, env, 2*time.Minute, codex, append([]string{"exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--dangerously-bypass-hook-trust"}, args...)...)
	}
	exec(cxTask)
	if _, err := os.Stat(filepath.Join(project, writtenFile)); err != nil {
		t.Fatalf("the scripted apply_patch did not run: %v", err)
	}
	exec("resume", "--last", cxFollowUp)
	compacted := false
	for _, r := range srv.Requests() {
		compacted = compacted || isSummaryRequest(r)
	}
	if !compacted {
		t.Fatal("Codex asked for no summary: it did not compact")
	}

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
	var users, failed, artifacts, systems []string
	calls := 0
	for _, e := range ss[0].Events {
		switch {
		case e.Kind == tier.KindUser:
			users = append(users, e.Text)
		case e.Kind == tier.KindToolCall:
			calls++
		case e.Kind == tier.KindToolResult && e.Failed:
			failed = append(failed, e.ID)
		case e.Kind == tier.KindArtifact:
			artifacts = append(artifacts, e.Key)
		case e.Kind == tier.KindSystem:
			systems = append(systems, e.Text)
		}
	}
	// What the script made Codex do: a failing exec_command, an
	// apply_patch that wrote one file, one compaction whose summary is the
	// script's; the user's words are the two prompts.
	if calls != 2 || !slices.Equal(failed, []string{"call_strata_exec"}) || !slices.Equal(artifacts, []string{writtenFile}) || rep.Compactions != 1 {
		t.Errorf("calls=%d failed=%q artifacts=%q compactions=%d, want 2, the exec_command, %s, 1 (%s)", calls, failed, artifacts, rep.Compactions, writtenFile, rep.String())
	}
	if !slices.Equal(users, []string{cxTask, cxFollowUp}) {
		t.Errorf("user events %q, want the two prompts", users)
	}
	summary := false
	for _, s := range systems {
		summary = summary || strings.Contains(s, omitsSummary)
	}
	if !summary {
		t.Errorf("system events %q: none holds the compaction's summary", systems)
	}
	// Read again with what a store holds, the rollout adds nothing.
	db := dbtest.Open(t, store.Options{})
	if _, err := db.Append(ss[0].ID, ss[0].Events...); err != nil {
		t.Fatal(err)
	}
	again, _, err := transcript.Read(transcript.Codex, bytes.NewReader(raw), transcript.Options{File: rollouts[0], Target: func(conv string) (transcript.Target, error) {
		return transcript.Target{Session: conv, Stored: func(ref string) (ok bool, err error) {
			err = db.View(func(s *store.Snapshot) (err error) { _, ok, err = s.Ref(conv, ref); return err })
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
