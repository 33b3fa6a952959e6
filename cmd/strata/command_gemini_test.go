package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The chat Gemini CLI 0.61.0 recorded in TestGemini_RealClientCompresses,
// and what its session is.
const (
	gmFixture = "../../transcript/testdata/gemini/session-0.61.0.jsonl"
	gmSession = "243409cf-aabd-4802-a23b-e45a4794c12a"
)

// `strata gemini hook` as Gemini CLI runs it, on the recorded chat as it
// was: exit 0 and nothing printed before the compression, even on bad
// input; the state on stdout at the first BeforeAgent after it, once; the
// summary check in `strata gemini status --json`.
func TestGeminiHook(t *testing.T) {
	raw, err := os.ReadFile(gmFixture)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(raw, []byte("\n"))
	upTo := func(s string) int {
		for i, l := range lines {
			if bytes.Contains(l, []byte(s)) {
				return i
			}
		}
		t.Fatalf("the chat holds no %q", s)
		return 0
	}
	dir := t.TempDir()
	chat := filepath.Join(dir, "chat.jsonl")
	hook := func(event string, n int) result {
		t.Helper()
		if err := os.WriteFile(chat, bytes.Join(lines[:n], nil), 0o600); err != nil {
			t.Fatal(err)
		}
		in, _ := json.Marshal(map[string]string{"session_id": gmSession, "transcript_path": chat, "cwd": dir, "hook_event_name": event, "trigger": "auto"})
		r := cli(t, string(in), "gemini", "hook")
		if r.code != exitOK || r.stderr != "" {
			t.Fatalf("%s: exit %d, stderr %q: want 0 and nothing", event, r.code, r.stderr)
		}
		return r
	}
	for _, n := range []int{upTo(`"Done with TASK-A.`), upTo("Summary of the conversation so far")} {
		if r := hook("PreCompress", n); r.stdout != "" {
			t.Errorf("PreCompress printed %q", r.stdout)
		}
	}
	next := upTo(`"NEXT: anything else to do?`)
	if r := hook("BeforeAgent", upTo(`"FOLLOW-UP`)+1); r.stdout != "" {
		t.Errorf("BeforeAgent before the compression printed %q", r.stdout)
	}
	r := hook("BeforeAgent", next)
	var out struct {
		HookSpecificOutput struct{ HookEventName, AdditionalContext string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.HookSpecificOutput.HookEventName != "BeforeAgent" ||
		!strings.Contains(out.HookSpecificOutput.AdditionalContext, "FAILED `ls /nonexistent/strata-dir` (run_shell_command)") {
		t.Fatalf("BeforeAgent after the compression printed %q (%v): want the state", r.stdout, err)
	}
	if r := hook("BeforeAgent", next); r.stdout != "" {
		t.Errorf("a second BeforeAgent printed %q: want nothing, the state is injected once", r.stdout)
	}
	if r := cli(t, "PreCompress, please", "gemini", "hook"); r.code != exitOK || r.stdout != "" {
		t.Errorf("bad input: exit %d, stdout %q: want 0 and nothing", r.code, r.stdout)
	}
	log, err := os.ReadFile(filepath.Join(dir, ".gemini", "strata.log"))
	if err != nil || !strings.Contains(string(log), " BeforeAgent ") || strings.Count(string(log), "\n") < 5 {
		t.Errorf("the log (%v):\n%s\nwant a line per run", err, log)
	}
	st := cli(t, "", "gemini", "status", "--dir", dir, "--json")
	if st.code != exitOK || !strings.Contains(st.stdout, "summary_omitted") || !strings.Contains(st.stdout, "003_down.sql") {
		t.Errorf("status --json: exit %d\n%s\nwant summary_omitted naming the file", st.code, st.stdout)
	}
}

// A chat Gemini CLI wrote as one JSON document (session-*.json, before
// its JSONL), which ends without a newline, is imported whole by the
// hook, as `strata import --format gemini` imports it.
func TestGeminiHook_JSONDocument(t *testing.T) {
	const chat = "../../../shared/data/transcripts/gemini/entireio_cli_12-cbfeaa512b-0-full.jsonl"
	raw, err := os.ReadFile(chat)
	if err != nil {
		t.Skipf("the project's data is absent: %v", err)
	}
	if bytes.HasSuffix(raw, []byte("\n")) {
		t.Fatalf("%s ends with a newline: this test is of a document without one", chat)
	}
	var doc struct{ SessionID string }
	if err := json.Unmarshal(raw, &doc); err != nil || doc.SessionID == "" {
		t.Fatalf("%s: %v, session %q", chat, err, doc.SessionID)
	}
	abs, err := filepath.Abs(chat)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in, _ := json.Marshal(map[string]string{"session_id": doc.SessionID, "transcript_path": abs, "cwd": dir, "hook_event_name": "PreCompress", "trigger": "auto"})
	if r := cli(t, string(in), "gemini", "hook"); r.code != exitOK || r.stdout != "" || r.stderr != "" {
		t.Fatalf("PreCompress: exit %d, stdout %q, stderr %q: want 0 and nothing", r.code, r.stdout, r.stderr)
	}
	log, err := os.ReadFile(filepath.Join(dir, ".gemini", "strata.log"))
	if err != nil || strings.Contains(string(log), "FAILED") {
		t.Errorf("the log (%v):\n%s\nwant the chat imported", err, log)
	}
	want := mustCLI(t, "import", "--format", "gemini", chat)
	got := mustCLI(t, "dump", "--json", "--raw", filepath.Join(dir, ".gemini", "strata.db"))
	if n := strings.Count(want, "\n"); n == 0 || !strings.Contains(got, `"head_seq": `+strconv.Itoa(n)) {
		t.Errorf("the hook stored\n%s\nwant the %d events import gives", got, n)
	}
}

// Each agent's hook --help says what the hook does at each event install
// writes, as the agent acts on it: Gemini CLI's PreCompress checks and
// compacts nothing, its first BeforeAgent after a compression injects
// once; Claude Code's PreCompact compacts, SessionStart(compact) injects,
// PostCompact checks.
func TestAgentHookHelp_SaysEachEvent(t *testing.T) {
	for _, c := range []struct {
		agent string
		want  []string
		not   []string
	}{
		{"gemini", []string{"PreCompress: import what Gemini CLI wrote since and check", "Nothing is compacted, nothing printed.", "The first BeforeAgent after a compaction, once"}, []string{"before a compaction: import", "compact the\nsession's head"}},
		{"claude-code", []string{"PreCompact, before a compaction: import", "SessionStart (matcher compact), after a compaction: import", "PostCompact: import what Claude Code wrote since and check"}, []string{"once (the injection"}},
		{"codex", []string{"PreCompact, before a compaction: import", "SessionStart (matcher compact), after a compaction: import", "PostCompact: import what Codex wrote since and check"}, nil},
	} {
		help := mustCLI(t, c.agent, "hook", "--help")
		for _, w := range c.want {
			if !strings.Contains(help, w) {
				t.Errorf("%s hook --help:\n%s\nwithout %q", c.agent, help, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(help, w) {
				t.Errorf("%s hook --help:\n%s\nsays %q", c.agent, help, w)
			}
		}
	}
}
