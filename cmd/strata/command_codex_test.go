package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-go/strata/companion"
)

// codexHooksFile is the hooks.json Codex reads, as strictly as Codex
// reads it: a file with any other top-level member than description and
// hooks is refused whole.
type codexHooksFile struct {
	Description string `json:"description"`
	Hooks       map[string][]struct {
		Matcher *string `json:"matcher"`
		Hooks   []struct {
			Type    string  `json:"type"`
			Command string  `json:"command"`
			Timeout float64 `json:"timeout"`
		} `json:"hooks"`
	} `json:"hooks"`
}

// codexHooks returns strata's hook commands in a hooks.json text by
// event and matcher ("SessionStart/compact"), failing t when Codex would
// refuse the file.
func codexHooks(t *testing.T, text []byte) map[string][]string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	var f codexHooksFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("Codex would refuse the hooks.json: %v\n%s", err, text)
	}
	out := map[string][]string{}
	for event, groups := range f.Hooks {
		for _, g := range groups {
			key := event
			if g.Matcher != nil {
				key += "/" + *g.Matcher
			}
			for _, h := range g.Hooks {
				if strings.Contains(h.Command, "strata codex hook") {
					if h.Type != "command" || h.Timeout != 30 {
						t.Errorf("strata's handler under %s: type %q timeout %v", key, h.Type, h.Timeout)
					}
					out[key] = append(out[key], h.Command)
				}
			}
		}
	}
	return out
}

// `strata codex install --user` writes $CODEX_HOME/hooks.json, Codex's
// home when the variable names one: strata's three hooks beside the
// user's own, every other byte kept; installing again changes nothing;
// uninstall gives the file back byte for byte.
func TestCodexInstall_User(t *testing.T) {
	home, codexHome := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CODEX_HOME", codexHome)
	path := filepath.Join(codexHome, "hooks.json")
	mine := "{\n\t\"description\": \"my hooks\",\n\t\"hooks\": {\n\t\t\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send done\"}]}],\n" +
		"\t\t\"SessionStart\": [\n\t\t\t{\"matcher\": \"startup\", \"hooks\": [{\"type\": \"command\", \"command\": \"echo hi\"}]}\n\t\t]\n\t}\n}\n"
	if err := os.WriteFile(path, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, "codex", "install", "--user")
	if !strings.Contains(out, "changed "+path) {
		t.Errorf("install's output does not name %s:\n%s", path, out)
	}
	installed := readBytes(t, path)
	got := codexHooks(t, installed)
	command := "strata codex hook --db " + filepath.Join(codexHome, companion.StoreName)
	for _, key := range []string{"PreCompact", "SessionStart/compact", "PostCompact"} {
		if len(got[key]) != 1 || got[key][0] != command {
			t.Errorf("%s: strata's commands %q, want %q once", key, got[key], command)
		}
	}
	for _, keep := range []string{`"description": "my hooks"`, `"command": "notify-send done"`, `{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}`} {
		if !bytes.Contains(installed, []byte(keep)) {
			t.Errorf("install lost %s:\n%s", keep, installed)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".codex")); !os.IsNotExist(err) {
		t.Errorf("install --user with CODEX_HOME set made ~/.codex: %v", err)
	}
	mustCLI(t, "codex", "install", "--user")
	if again := readBytes(t, path); !bytes.Equal(again, installed) {
		t.Errorf("installing again changed the file:\n%s", again)
	}
	var st companion.Status
	if err := json.Unmarshal([]byte(mustCLI(t, "codex", "status", "--user", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Installed || st.Settings != path || len(st.Hooks) != 3 {
		t.Errorf("status: %+v", st)
	}
	mustCLI(t, "codex", "uninstall", "--user")
	if after := readBytes(t, path); string(after) != mine {
		t.Errorf("uninstall left\n%s\nwant\n%s", after, mine)
	}
}

// A project's install writes .codex/hooks.json of the shape Codex reads,
// and uninstall removes the file it created.
func TestCodexInstall_Project(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	mustCLI(t, "codex", "install", "--dir", dir)
	path := filepath.Join(dir, ".codex", "hooks.json")
	got := codexHooks(t, readBytes(t, path))
	if len(got) != 3 || len(got["PreCompact"]) != 1 || len(got["SessionStart/compact"]) != 1 || len(got["PostCompact"]) != 1 {
		t.Errorf("strata's hooks %q, want PreCompact, SessionStart (matcher compact) and PostCompact once each", got)
	}
	mustCLI(t, "codex", "uninstall", "--dir", dir)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("uninstall left the hooks.json install created: %v", err)
	}
}

// Codex names the project in no variable for its hooks, so a project
// outside the home directory has its store, inside the project, named by
// its absolute path: install warns that it is outside the home directory,
// not "outside the project".
func TestCodexInstall_ProjectOutsideHome(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	r := cli(t, "", "codex", "install", "--dir", dir)
	wantCode(t, r, exitOK)
	store := filepath.Join(dir, ".codex", "strata.db")
	want := " names the store by a path of this machine, " + store +
		": it is outside the home directory, which the hooks name from $HOME (Codex names the project in no variable for its hooks)"
	if !strings.Contains(r.stderr, want) {
		t.Errorf("install --dir %s: stderr\n%s\nwithout %q", dir, r.stderr, want)
	}
	if strings.Contains(r.stderr, "outside the project") {
		t.Errorf("install: stderr says the store in the project is outside it:\n%s", r.stderr)
	}
}

// `strata codex hook` on the inputs the real Codex 0.171.0 gave, against
// its recorded rollout as the file stood at each: every run exits 0,
// SessionStart(compact) prints the state naming the failed command and
// the file written, and status --json gives the check of Codex's summary
// PostCompact stored. Input that is not Codex's exits 0 too, and is
// logged.
func TestCodexHook_Recorded(t *testing.T) {
	const dir = "../../../shared/data/realclient"
	raw, err := os.ReadFile(filepath.Join(dir, "codex-0.171.0-rollout-exec-auto-compact.jsonl"))
	if err != nil {
		t.Skipf("%s is absent: %v", dir, err)
	}
	inputs, err := os.ReadFile(filepath.Join(dir, "codex-0.171.0-hook-inputs.jsonl"))
	if err != nil {
		t.Skipf("%s is absent: %v", dir, err)
	}
	lines := bytes.SplitAfter(raw, []byte("\n"))
	project := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	rollout := filepath.Join(project, "rollout.jsonl")
	db := filepath.Join(project, ".codex", "strata.db")
	linesAt := regexp.MustCompile(`\blines=(\d+)\b`)
	var injected string
	sc := bufio.NewScanner(bytes.NewReader(inputs))
	for sc.Scan() {
		var rec struct {
			Run   string         `json:"run"`
			Stdin map[string]any `json:"stdin"`
			Probe string         `json:"probe"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(rec.Run, "cx3 ") {
			continue
		}
		n, _ := strconv.Atoi(linesAt.FindStringSubmatch(rec.Probe)[1])
		if err := os.WriteFile(rollout, bytes.Join(lines[:n], nil), 0o600); err != nil {
			t.Fatal(err)
		}
		rec.Stdin["transcript_path"], rec.Stdin["cwd"] = rollout, project
		in, _ := json.Marshal(rec.Stdin)
		r := cli(t, string(in), "codex", "hook", "--db", db)
		wantCode(t, r, exitOK, "codex", "hook")
		if rec.Stdin["source"] == "compact" {
			injected = r.stdout
		} else if r.stdout != "" {
			t.Errorf("%s printed %q", rec.Stdin["hook_event_name"], r.stdout)
		}
	}
	var o struct {
		HookSpecificOutput struct {
			HookEventName     string `json:"hookEventName"`
			AdditionalContext string `json:"additionalContext"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(injected), &o); err != nil || o.HookSpecificOutput.HookEventName != "SessionStart" {
		t.Fatalf("SessionStart(compact) printed %q: %v", injected, err)
	}
	for _, want := range []string{"FAILED `ls /nonexistent/dir` (exec_command)", "artifact: migrations/003_down.sql"} {
		if !strings.Contains(o.HookSpecificOutput.AdditionalContext, want) {
			t.Errorf("the injected state lacks %q:\n%s", want, o.HookSpecificOutput.AdditionalContext)
		}
	}
	var st companion.Status
	if err := json.Unmarshal([]byte(mustCLI(t, "codex", "status", "--dir", project, "--db", db, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Sessions) != 1 || st.Sessions[0].Compactions != 1 || len(st.Sessions[0].SummaryChecks) != 1 ||
		strings.Join(st.Sessions[0].SummaryChecks[0].SummaryOmitted, "|") != "FAILED `ls /nonexistent/dir` (exec_command)|artifact migrations/003_down.sql" {
		t.Errorf("status: %+v", st.Sessions)
	}

	r := cli(t, `{"hook_event_name":"PreCompact","session_id":"s1"}`, "codex", "hook", "--db", db)
	wantCode(t, r, exitOK, "codex", "hook")
	if log := string(readBytes(t, filepath.Join(project, ".codex", companion.LogName))); !strings.Contains(log, "PreCompact FAILED reading the hook input") {
		t.Errorf("the log has no line of the bad input:\n%s", log)
	}
}

// The help of install, uninstall and status names the file --user would
// edit: $CODEX_HOME/hooks.json when CODEX_HOME is set, ~/.codex/hooks.json
// when it is not.
func TestCodexInstall_HelpNamesUserFile(t *testing.T) {
	home, codexHome := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	for _, command := range []string{"install", "uninstall", "status"} {
		t.Setenv("CODEX_HOME", codexHome)
		out := mustCLI(t, "codex", command, "--help")
		if want := filepath.Join(codexHome, "hooks.json"); !strings.Contains(out, want) || strings.Contains(out, "~/.codex/hooks.json") {
			t.Errorf("%s --help with CODEX_HOME=%s does not name %s alone:\n%s", command, codexHome, want, out)
		}
		t.Setenv("CODEX_HOME", "")
		if out := mustCLI(t, "codex", command, "--help"); !strings.Contains(out, "~/.codex/hooks.json") {
			t.Errorf("%s --help without CODEX_HOME does not name ~/.codex/hooks.json:\n%s", command, out)
		}
	}
}

// Codex refuses a hooks.json with a top-level member other than hooks and
// description, and runs none of its hooks: install, uninstall and status
// refuse it at the member, naming the rule, with a hint, and leave it as
// it is. The members Codex allows are fine.
func TestCodexInstall_RefusesOtherMembers(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	path := filepath.Join(dir, ".codex", "hooks.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	text := "{\"hooks\": {}, \"x\": 1}\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, command := range []string{"install", "uninstall", "status"} {
		r := cli(t, "", "codex", command, "--dir", dir)
		wantCode(t, r, exitError, command)
		for _, want := range []string{"Error: " + path + ":1:15: top-level member \"x\": Codex will not read this file",
			"other than hooks and description", "Hint: take \"x\" out of the file"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr\n%s\nwant %q", command, r.stderr, want)
			}
		}
		if got := string(readBytes(t, path)); got != text {
			t.Errorf("%s changed the file to %q", command, got)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".codex", companion.InstallRecordName)); !os.IsNotExist(err) {
		t.Errorf("a refused install wrote its record: %v", err)
	}
	if err := os.WriteFile(path, []byte("{\"description\": \"mine\", \"hooks\": {}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "codex", "install", "--dir", dir)
	if got := codexHooks(t, readBytes(t, path)); len(got) != 3 {
		t.Errorf("install beside description: strata's hooks %q", got)
	}
}
