package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
)

// defaultHookCommand is the command install writes in a project's
// settings without --db.
const defaultHookCommand = `strata claude-code hook --db "$CLAUDE_PROJECT_DIR"/.claude/strata.db`

// settingsCases are settings files as people keep them, each to come back
// byte for byte from install then uninstall: the files of
// companion/claudecode/testdata/settings, by name.
func settingsCases(t testing.TB) map[string]string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0) // this file: a test may have changed the directory
	dir := filepath.Join(filepath.Dir(self), "..", "..", "companion", "claudecode", "testdata", "settings")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no settings cases in %s: %v", dir, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = string(b)
	}
	return out
}

// newProject returns a project directory holding .claude/settings.json
// with text (none when text is nil), and the settings' path.
func newProject(t testing.TB, text *string) (dir, settings string) {
	t.Helper()
	dir = t.TempDir()
	settings = filepath.Join(dir, ".claude", "settings.json")
	if text != nil {
		if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(settings, []byte(*text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, settings
}

// claudeSettingsShape is the part of Claude Code's settings that its hooks
// reference describes.
type claudeSettingsShape struct {
	Hooks map[string][]struct {
		Matcher *string `json:"matcher"`
		Hooks   []struct {
			Type    string   `json:"type"`
			Command string   `json:"command"`
			Timeout *float64 `json:"timeout"`
		} `json:"hooks"`
	} `json:"hooks"`
}

// checkInstalledShape fails t unless text is settings that Claude Code's
// hooks reference describes — "hooks": an object of events, each a list
// of {"matcher"?, "hooks": [{"type": "command", "command", "timeout"}]} —
// with strata's hook running command under PreCompact without a matcher
// (every trigger) and under SessionStart with the matcher compact, each
// once.
func checkInstalledShape(t testing.TB, text []byte, command string) {
	t.Helper()
	var doc claudeSettingsShape
	if err := json.Unmarshal(text, &doc); err != nil {
		t.Fatalf("the installed settings are not JSON Claude Code reads: %v\n%s", err, text)
	}
	want := map[string]string{"PreCompact": "", "SessionStart": "compact"}
	for event, groups := range doc.Hooks {
		n := 0
		for _, g := range groups {
			for _, h := range g.Hooks {
				if !companion.IsStrataHook(claudecode.Agent{}, h.Command) {
					continue
				}
				n++
				matcher := ""
				if g.Matcher != nil {
					matcher = *g.Matcher
				}
				if h.Type != "command" || h.Command != command || h.Timeout == nil || *h.Timeout != claudecode.HookTimeout || matcher != want[event] {
					t.Errorf("%s: strata's hook is type %q command %q timeout %v matcher %q:\n%s", event, h.Type, h.Command, h.Timeout, matcher, text)
				}
			}
		}
		if _, ours := want[event]; ours && n != 1 {
			t.Errorf("%s holds strata's hook %d times:\n%s", event, n, text)
		}
	}
	for event := range want {
		if _, ok := doc.Hooks[event]; !ok {
			t.Errorf("no %s hooks:\n%s", event, text)
		}
	}
}

// withoutStrata returns the JSON value of settings text with strata's
// handlers taken out, and a group emptied by that, as a comparable value.
func withoutStrata(t testing.TB, text []byte) any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(text, &v); err != nil {
		t.Fatal(err)
	}
	hooks, _ := v["hooks"].(map[string]any)
	for event, groups := range hooks {
		var kept []any
		for _, g := range groups.([]any) {
			g := g.(map[string]any)
			var hs []any
			for _, h := range g["hooks"].([]any) {
				if c, _ := h.(map[string]any)["command"].(string); !companion.IsStrataHook(claudecode.Agent{}, c) {
					hs = append(hs, h)
				}
			}
			if len(hs) > 0 {
				g["hooks"] = hs
				kept = append(kept, g)
			}
		}
		hooks[event] = kept
		if len(kept) == 0 {
			delete(hooks, event) // the empty lists compare as absent
		}
	}
	if hooks != nil && len(hooks) == 0 {
		delete(v, "hooks")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestClaudeCodeInstall_RoundTrip(t *testing.T) {
	t.Parallel()
	cases := map[string]*string{"no file": nil}
	for name, text := range settingsCases(t) {
		cases[name] = &text
	}
	for name, orig := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, settings := newProject(t, orig)
			out := mustCLI(t, "claude-code", "install", "--dir", dir)
			shown := filepath.Join(dir, ".claude", "settings.json")
			for _, want := range []string{"added PreCompact: " + defaultHookCommand, "added SessionStart (matcher compact): " + defaultHookCommand,
				"store: " + filepath.Join(dir, ".claude", "strata.db") + " (none yet"} {
				if !strings.Contains(out, want) {
					t.Errorf("install says:\n%s\nwithout %q", out, want)
				}
			}
			if head := map[bool]string{true: "created " + shown, false: "changed " + shown}[orig == nil]; !strings.HasPrefix(out, head) {
				t.Errorf("install says:\n%s\nnot first %q", out, head)
			}
			installed := readBytes(t, settings)
			checkInstalledShape(t, installed, defaultHookCommand)
			if orig != nil {
				if got, want := withoutStrata(t, installed), withoutStrata(t, []byte(*orig)); got != want {
					t.Errorf("install changed what was there:\n%s\nwas\n%s", got, want)
				}
				if strings.Contains(*orig, "\r\n") && strings.Count(string(installed), "\n") != strings.Count(string(installed), "\r\n") {
					t.Errorf("a line of the CRLF file ends in LF alone:\n%q", installed)
				}
			}

			// Again: nothing changes, and it says so.
			again := mustCLI(t, "claude-code", "install", "--dir", dir)
			if !strings.HasPrefix(again, shown+" holds strata's hooks already: nothing changed\n") ||
				strings.Count(again, "unchanged ") != 3 {
				t.Errorf("a second install says:\n%s", again)
			}
			if got := readBytes(t, settings); string(got) != string(installed) {
				t.Errorf("a second install changed the file:\n%s", firstDiff(string(got), string(installed)))
			}

			// Another store: the commands of strata's entries change, and
			// nothing else.
			other := filepath.Join(t.TempDir(), "other store.db")
			moved := mustCLI(t, "claude-code", "install", "--dir", dir, "--db", other)
			otherCommand := "strata claude-code hook --db " + shellQuote(other)
			if !strings.Contains(moved, "updated PreCompact: "+otherCommand+" (was "+defaultHookCommand+")") {
				t.Errorf("install --db says:\n%s", moved)
			}
			updated := readBytes(t, settings)
			checkInstalledShape(t, updated, otherCommand)
			if want := strings.ReplaceAll(string(installed), jsonString(defaultHookCommand), jsonString(otherCommand)); string(updated) != want {
				t.Errorf("install --db changed more than the commands:\n%s", firstDiff(string(updated), want))
			}

			// The hook made the store: uninstall says it stays.
			if err := os.WriteFile(other, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			removed := mustCLI(t, "claude-code", "uninstall", "--dir", dir)
			for _, want := range []string{"removed strata's hooks from " + shown, "removed PreCompact: " + otherCommand,
				"removed SessionStart (matcher compact): " + otherCommand, "the store stays: " + other + "; to delete it: rm -f " + shellQuote(other)} {
				if !strings.Contains(removed, want) {
					t.Errorf("uninstall says:\n%s\nwithout %q", removed, want)
				}
			}
			if orig == nil {
				if _, err := os.Stat(filepath.Join(dir, ".claude")); !os.IsNotExist(err) {
					t.Errorf("uninstall left .claude, which install created: %v", err)
				}
				if !strings.Contains(removed, "removed "+shown+": install created it") {
					t.Errorf("uninstall says:\n%s", removed)
				}
				return
			}
			if got := string(readBytes(t, settings)); got != *orig {
				t.Errorf("install then uninstall:\n%q\nwas\n%q", got, *orig)
			}
			if _, err := os.Stat(filepath.Join(dir, ".claude", companion.InstallRecordName)); !os.IsNotExist(err) {
				t.Errorf("uninstall left install's record: %v", err)
			}
			if r := mustCLI(t, "claude-code", "uninstall", "--dir", dir); r != shown+" holds no hook of strata's: nothing changed\n" {
				t.Errorf("a second uninstall says %q", r)
			}
		})
	}
}

// The events install adds strata's group to may gain the user's own groups
// and handlers after it: uninstall takes out strata's alone, and keeps the
// lists that hold the user's.
func TestClaudeCodeUninstall_KeepsWhatCameAfter(t *testing.T) {
	t.Parallel()
	dir, settings := newProject(t, nil)
	mustCLI(t, "claude-code", "install", "--dir", dir)
	text := string(readBytes(t, settings))
	// The user adds a group after strata's under PreCompact, and a handler
	// beside strata's in its SessionStart group.
	text = strings.Replace(text, "        ]\n      }\n    ],\n    \"SessionStart\"",
		"        ]\n      },\n      {\"matcher\": \"auto\", \"hooks\": [{\"type\": \"command\", \"command\": \"echo auto\"}]}\n    ],\n    \"SessionStart\"", 1)
	text = strings.Replace(text, "\"timeout\": 30\n          }\n        ]\n      }\n    ],\n    \"PostCompact\"",
		"\"timeout\": 30\n          },\n          {\"type\": \"command\", \"command\": \"echo after\"}\n        ]\n      }\n    ],\n    \"PostCompact\"", 1)
	if err := os.WriteFile(settings, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	checkInstalledShape(t, []byte(text), defaultHookCommand)
	mustCLI(t, "claude-code", "uninstall", "--dir", dir)
	want := `{
  "hooks": {
    "PreCompact": [
      {"matcher": "auto", "hooks": [{"type": "command", "command": "echo auto"}]}
    ],
    "SessionStart": [
      {
        "matcher": "compact",
        "hooks": [
          {"type": "command", "command": "echo after"}
        ]
      }
    ]
  }
}
`
	if got := string(readBytes(t, settings)); got != want {
		t.Errorf("uninstall left:\n%s\nwant\n%s", got, want)
	}
}

// A strata hook wherever it stands — another event, a group of the user's,
// another path to strata — is strata's: uninstall finds it by its command.
func TestClaudeCodeUninstall_ByCommand(t *testing.T) {
	t.Parallel()
	text := `{
  "hooks": {
    "Stop": [
      {"hooks": [{"type": "command", "command": "echo stop"}, {"type": "command", "command": "'/opt/my tools/strata' claude-code hook --db /srv/s.db"}]}
    ],
    "PreCompact": [
      {"matcher": "auto", "hooks": [{"type": "command", "command": "/usr/local/bin/strata claude-code hook"}]}
    ],
    "UserPromptSubmit": [
      {"hooks": [{"type": "command", "command": "strata claude-code hooked"}, {"type": "command", "command": "strata-other claude-code hook"}]}
    ]
  }
}
`
	dir, settings := newProject(t, &text)
	out := mustCLI(t, "claude-code", "uninstall", "--dir", dir)
	if strings.Count(out, "  removed ") != 2 || !strings.Contains(out, "removed Stop: '/opt/my tools/strata' claude-code hook --db /srv/s.db") ||
		!strings.Contains(out, "removed PreCompact (matcher auto): /usr/local/bin/strata claude-code hook") {
		t.Errorf("uninstall says:\n%s", out)
	}
	want := `{
  "hooks": {
    "Stop": [
      {"hooks": [{"type": "command", "command": "echo stop"}]}
    ],
    "PreCompact": [],
    "UserPromptSubmit": [
      {"hooks": [{"type": "command", "command": "strata claude-code hooked"}, {"type": "command", "command": "strata-other claude-code hook"}]}
    ]
  }
}
`
	if got := string(readBytes(t, settings)); got != want {
		t.Errorf("uninstall left:\n%s\nwant\n%s", got, want)
	}
}

func TestClaudeCodeUninstall_NotInstalled(t *testing.T) {
	t.Parallel()
	dir, settings := newProject(t, nil)
	shown := filepath.Join(dir, ".claude", "settings.json")
	if out := mustCLI(t, "claude-code", "uninstall", "--dir", dir); out != shown+": no such file: strata's hooks are not installed\n" {
		t.Errorf("uninstall of no file says %q", out)
	}
	if _, err := os.Stat(settings); !os.IsNotExist(err) {
		t.Errorf("uninstall made the settings: %v", err)
	}
	text := settingsCases(t)["4_spaces_other_hooks_under_the_same_events"]
	dir, settings = newProject(t, &text)
	if err := os.Chmod(settings, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(settings)
	if out := mustCLI(t, "claude-code", "uninstall", "--dir", dir); !strings.HasSuffix(out, "holds no hook of strata's: nothing changed\n") {
		t.Errorf("uninstall says %q", out)
	}
	after, _ := os.Stat(settings)
	if string(readBytes(t, settings)) != text || !after.ModTime().Equal(before.ModTime()) || after.Mode() != before.Mode() {
		t.Error("uninstall with nothing installed touched the file")
	}
}

// A file that is not JSON as Claude Code reads it is refused at its line
// and column, and left as it is; so is one whose hooks are not the shape
// Claude Code reads.
func TestClaudeCodeInstall_RefusesBadSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ text, where, msg string }{
		{"{\n  \"model\": \"opus\",\n}\n", ":3:1: ", "invalid character '}'"},
		{"{\n  // the model\n  \"model\": \"opus\"\n}\n", ":2:3: ", "invalid character '/'"},
		{"{\n  \"model\": \"opus\"\n", ":3:1: ", "unexpected end of JSON input"},
		{"", ":1:1: ", "unexpected end of JSON input"},
		{"\ufeff{}", ":1:1: ", "invalid character"},
		{"[]", ":1:1: ", "the settings are a list, not an object"},
		{"{\"hooks\": [\n]}", ":1:11: ", `"hooks" is a list, not an object of hook events`},
		{"{\"hooks\": {\"PreCompact\": {}}}", ":1:26: ", "hooks.PreCompact is an object, not a list"},
		{"{\n  \"hooks\": {},\n  \"hooks\": {}\n}", ":3:3: ", `"hooks" appears twice in one object (first at 2:3)`},
		{"{\"hooks\": {\"SessionStart\": [], \"SessionStart\": null}}", ":1:32: ", `"SessionStart" appears twice in one object (first at 1:12)`},
	} {
		dir, settings := newProject(t, &tc.text)
		for _, args := range [][]string{{"install"}, {"uninstall"}, {"status"}} {
			r := cli(t, "", append([]string{"claude-code"}, append(args, "--dir", dir)...)...)
			wantCode(t, r, exitError, args...)
			if want := "Error: " + filepath.Join(dir, ".claude", "settings.json") + tc.where; !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("%s of %q: stderr\n%s\nwant %q … %q", args[0], tc.text, r.stderr, want, tc.msg)
			}
			if got := string(readBytes(t, settings)); got != tc.text {
				t.Errorf("%s of %q changed it to %q", args[0], tc.text, got)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, ".claude", companion.InstallRecordName)); !os.IsNotExist(err) {
			t.Errorf("a refused install wrote its record: %v", err)
		}
	}
	// A file that does not parse says how Claude Code reads it.
	text := "{,}"
	dir, _ := newProject(t, &text)
	r := cli(t, "", "claude-code", "install", "--dir", dir)
	if !strings.Contains(r.stderr, "Hint: Claude Code reads its settings as JSON, without comments or trailing commas") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

func TestClaudeCodeInstall_DB(t *testing.T) {
	dir, settings := newProject(t, nil)
	home := t.TempDir()
	t.Setenv("HOME", home)
	outside := t.TempDir()
	for _, tc := range []struct{ db, arg, store string }{
		{filepath.Join(dir, "data", "s.db"), `"$CLAUDE_PROJECT_DIR"/data/s.db`, filepath.Join(dir, "data", "s.db")},
		{filepath.Join(home, "stores", "x.db"), `"$HOME"/stores/x.db`, filepath.Join(home, "stores", "x.db")},
		{filepath.Join(outside, "a b", "it's.db"), shellQuote(filepath.Join(outside, "a b", "it's.db")), filepath.Join(outside, "a b", "it's.db")},
		{"postgres://agent@db.internal/fleet?sslmode=verify-full", "'postgres://agent@db.internal/fleet?sslmode=verify-full'", "postgres://agent@db.internal/fleet?sslmode=verify-full"},
	} {
		mustCLI(t, "claude-code", "install", "--dir", dir, "--db", tc.db)
		command := "strata claude-code hook --db " + tc.arg
		checkInstalledShape(t, readBytes(t, settings), command)
		// The hook's command, as sh reads it with Claude Code's variables,
		// names the store.
		s, err := companion.FindSettings(claudecode.Agent{}, false, dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := s.StoreOf(command); !ok || got != tc.store {
			t.Errorf("--db %s: the command names %q %v", tc.db, got, ok)
		}
		if strings.HasPrefix(tc.db, "postgres://") {
			continue // status would connect to it
		}
		var st companion.Status
		if err := json.Unmarshal([]byte(mustCLI(t, "claude-code", "status", "--dir", dir, "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Store != tc.store || !st.Installed || st.StoreExists {
			t.Errorf("--db %s: status says store %q installed %v exists %v, want %q", tc.db, st.Store, st.Installed, st.StoreExists, tc.store)
		}
	}
	r := cli(t, "", "claude-code", "install", "--dir", dir, "--db", "postgres://agent:s3cret@db.internal/fleet")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stderr, "warning: "+filepath.Join(dir, ".claude", "settings.json")+" holds the URL's password") {
		t.Errorf("no warning of the password:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "store: postgres://agent:xxxxx@db.internal/fleet\n") || strings.Contains(r.stdout, "s3cret") {
		t.Errorf("install's lines show the password, or not the store:\n%s", r.stdout)
	}
	r = cli(t, "", "claude-code", "uninstall", "--dir", dir)
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "the store stays: postgres://agent:xxxxx@db.internal/fleet\n") || strings.Contains(r.stdout, "s3cret") {
		t.Errorf("uninstall's lines show the password, or not the store:\n%s", r.stdout)
	}
	wantCode(t, cli(t, "", "claude-code", "install", "--dir", dir, "--db", "http://127.0.0.1:6060/debug/strata"), exitUsage)
	wantCode(t, cli(t, "", "claude-code", "install", "--dir", dir, "--user"), exitUsage)
}

// The command line's mistakes: each a clear error naming what is wrong,
// and nothing written.
func TestClaudeCodeInstall_Usage(t *testing.T) {
	t.Parallel()
	dir, settings := newProject(t, nil)
	absent := filepath.Join(dir, "absent")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"install", "--dir", dir, "extra"}, exitUsage, "Error: install takes no arguments, got 1 (extra)\n"},
		{[]string{"uninstall", "--dir", dir, "a", "b"}, exitUsage, "Error: uninstall takes no arguments, got 2 (a b)\n"},
		{[]string{"install", "--dir", dir, "--db", ""}, exitUsage, "Error: --db must not be empty: leave it out for the default, strata.db beside the settings\n"},
		{[]string{"status", "--dir", dir, "--db", ""}, exitUsage, "Error: --db must not be empty"},
		{[]string{"install", "--dir", absent}, exitError, "Hint: --dir names the project's directory, which must exist: give it the project's, or create it first with mkdir -p " + absent + "\n"},
		{[]string{"status", "--dir", absent}, exitError, "Hint: --dir names the project's directory"},
	} {
		r := cli(t, "", append([]string{"claude-code"}, tc.args...)...)
		wantCode(t, r, tc.code, tc.args...)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: stderr\n%s\nwithout %q", tc.args, r.stderr, tc.want)
		}
	}
	if _, err := os.Stat(settings); !os.IsNotExist(err) {
		t.Errorf("a refused command wrote the settings: %v", err)
	}
	if _, err := os.Stat(absent); !os.IsNotExist(err) {
		t.Errorf("--dir of a missing directory made it: %v", err)
	}
}

// A relative --db is taken from the current directory, as every command
// takes it, not from --dir; a store outside the project and the home
// directory stands in the settings as a path of this machine, and install
// warns of that.
func TestClaudeCodeInstall_RelativeDB(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	t.Setenv("HOME", t.TempDir())
	if err := os.Mkdir(filepath.Join(work, "np"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(work, "np", ".claude", "settings.json")
	r := cli(t, "", "claude-code", "install", "--dir", "np", "--db", "foo.db")
	wantCode(t, r, exitOK)
	abs := filepath.Join(work, "foo.db")
	checkInstalledShape(t, readBytes(t, settings), "strata claude-code hook --db "+shellQuote(abs))
	if want := "warning: " + filepath.Join("np", ".claude", "settings.json") + " names the store by a path of this machine, " + abs +
		": it is outside the project and the home directory"; !strings.Contains(r.stderr, want) {
		t.Errorf("install --dir np --db foo.db: stderr\n%s\nwithout %q", r.stderr, want)
	}
	// Inside the project, from the current directory: named from
	// $CLAUDE_PROJECT_DIR, no warning.
	r = cli(t, "", "claude-code", "install", "--dir", "np", "--db", filepath.Join("np", "data", "s.db"))
	wantCode(t, r, exitOK)
	checkInstalledShape(t, readBytes(t, settings), `strata claude-code hook --db "$CLAUDE_PROJECT_DIR"/data/s.db`)
	if strings.Contains(r.stderr, "path of this machine") {
		t.Errorf("a store inside the project: stderr\n%s", r.stderr)
	}
	// --user: outside the home directory is a path of this machine.
	r = cli(t, "", "claude-code", "install", "--user", "--db", "foo.db")
	wantCode(t, r, exitOK)
	if want := " names the store by a path of this machine, " + abs + ": it is outside the home directory, which the hooks name from $HOME"; !strings.Contains(r.stderr, want) {
		t.Errorf("install --user --db foo.db: stderr\n%s\nwithout %q", r.stderr, want)
	}
}

// Claude Code runs the hooks of every settings file it reads for a
// session — the project's, its settings.local.json, the user's — so strata's
// in two of them run twice, into two stores: install warns, naming the
// other file and how to remove them there, and status lists every file
// that holds them.
func TestClaudeCodeInstall_OtherSettings(t *testing.T) {
	project := t.TempDir()
	t.Chdir(project)
	home := t.TempDir()
	t.Setenv("HOME", home)
	user := filepath.Join(home, ".claude", "settings.json")
	shown := filepath.Join(".claude", "settings.json")
	local := filepath.Join(".claude", "settings.local.json")

	r := cli(t, "", "claude-code", "install")
	wantCode(t, r, exitOK)
	if strings.Contains(r.stderr, "holds strata's hooks too") {
		t.Errorf("the first install warns:\n%s", r.stderr)
	}
	r = cli(t, "", "claude-code", "install", "--user")
	wantCode(t, r, exitOK)
	if want := "warning: " + shown + " holds strata's hooks too: Claude Code runs those as well at each compaction, and the state is injected twice; strata claude-code uninstall removes them\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("install --user beside the project's: stderr\n%s\nwithout %q", r.stderr, want)
	}
	r = cli(t, "", "claude-code", "install")
	wantCode(t, r, exitOK)
	if want := "warning: " + user + " holds strata's hooks too: Claude Code runs those as well at each compaction, and the state is injected twice; strata claude-code uninstall --user removes them\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("install beside the user's: stderr\n%s\nwithout %q", r.stderr, want)
	}
	// One of strata's hooks in the project's local settings, which
	// uninstall removes with those of settings.json.
	localText := `{"hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": "strata claude-code hook --db /srv/mine.db"}]}]}}`
	if err := os.WriteFile(local, []byte(localText), 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "", "claude-code", "install")
	wantCode(t, r, exitOK)
	if want := "warning: " + local + " holds strata's hooks too: Claude Code runs those as well at each compaction, and the state is injected twice; take them out of it by hand, or strata claude-code uninstall removes them with those of settings.json\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("install beside the local settings: stderr\n%s\nwithout %q", r.stderr, want)
	}

	st := statusOf(t)
	if len(st.Elsewhere) != 2 || st.Elsewhere[0].Settings != user || len(st.Elsewhere[0].Hooks) != 3 ||
		st.Elsewhere[1].Settings != local || len(st.Elsewhere[1].Hooks) != 1 || st.Elsewhere[1].Hooks[0].Command != "strata claude-code hook --db /srv/mine.db" {
		t.Errorf("status: elsewhere %+v", st.Elsewhere)
	}
	out := mustCLI(t, "claude-code", "status")
	want := "hooks: installed in " + shown + "\n" +
		"  PreCompact: " + defaultHookCommand + "\n" +
		"  SessionStart (matcher compact): " + defaultHookCommand + "\n" +
		"  PostCompact: " + defaultHookCommand + "\n" +
		"hooks: also in " + user + ", which Claude Code runs too; strata claude-code uninstall --user removes them\n" +
		"  PreCompact: strata claude-code hook --db \"$HOME\"/.claude/strata.db\n" +
		"  SessionStart (matcher compact): strata claude-code hook --db \"$HOME\"/.claude/strata.db\n" +
		"  PostCompact: strata claude-code hook --db \"$HOME\"/.claude/strata.db\n" +
		"hooks: also in " + local + ", which Claude Code runs too; take them out of it by hand, or strata claude-code uninstall removes them with those of settings.json\n" +
		"  PreCompact: strata claude-code hook --db /srv/mine.db\n" +
		"store: " + filepath.Join(".claude", "strata.db") + ": none yet (the hook makes it at the first compaction)\n"
	if out != want {
		t.Errorf("status:\n%s\nwant\n%s", out, want)
	}
	if st := statusOf(t, "--user"); len(st.Elsewhere) != 2 || st.Elsewhere[0].Settings != shown || st.Elsewhere[1].Settings != local {
		t.Errorf("status --user: elsewhere %+v", st.Elsewhere)
	}
	// A local file that is not JSON is not the one status is about: it is
	// left out, and status still answers.
	if err := os.WriteFile(local, []byte("{,"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t); len(st.Elsewhere) != 1 || st.Elsewhere[0].Settings != user {
		t.Errorf("status beside a broken local file: elsewhere %+v", st.Elsewhere)
	}
	// Once the user's are removed, the project's install is alone.
	mustCLI(t, "claude-code", "uninstall", "--user")
	if err := os.Remove(local); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "", "claude-code", "install")
	wantCode(t, r, exitOK)
	if strings.Contains(r.stderr, "holds strata's hooks too") {
		t.Errorf("install alone warns:\n%s", r.stderr)
	}
	if st := statusOf(t); len(st.Elsewhere) != 0 {
		t.Errorf("status: elsewhere %+v", st.Elsewhere)
	}
}

// Uninstall speaks of the store only when the hook made it (or its log).
func TestClaudeCodeUninstall_Store(t *testing.T) {
	t.Parallel()
	dir, _ := newProject(t, nil)
	store := filepath.Join(dir, ".claude", "strata.db")
	log := filepath.Join(dir, ".claude", "strata.log")
	for _, tc := range []struct {
		files []string
		want  string
	}{
		{nil, ""},
		{[]string{log}, "the hook's log stays: " + log + "; to delete it: rm -f " + log + "\n"},
		{[]string{store, log}, "the store stays: " + store + "; to delete it: rm -f " + store + " " + log + "\n"},
	} {
		mustCLI(t, "claude-code", "install", "--dir", dir)
		for _, f := range tc.files {
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out := mustCLI(t, "claude-code", "uninstall", "--dir", dir)
		if tc.want == "" && strings.Contains(out, "stays") || !strings.HasSuffix(out, "nothing else is in it\n"+tc.want) {
			t.Errorf("uninstall with %q there says:\n%s", tc.files, out)
		}
	}
}

// --user: the user's settings in $HOME, the store beside them, named from
// $HOME.
func TestClaudeCodeInstall_User(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	orig := "{\n  \"theme\": \"dark\"\n}\n"
	settings := filepath.Join(home, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o700); err != nil {
		t.Fatal(err)
	}
	// The user's settings are a link into a dotfiles checkout: the link
	// stays, the file it names changes, its mode kept.
	dotfiles := filepath.Join(home, "dotfiles", "claude-settings.json")
	if err := os.MkdirAll(filepath.Dir(dotfiles), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dotfiles, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dotfiles, settings); err != nil {
		t.Fatal(err)
	}
	command := `strata claude-code hook --db "$HOME"/.claude/strata.db`
	out := mustCLI(t, "claude-code", "install", "--user")
	if !strings.HasPrefix(out, "changed "+settings+":\n") || !strings.Contains(out, "added PreCompact: "+command) ||
		!strings.Contains(out, "store: "+filepath.Join(home, ".claude", "strata.db")) {
		t.Errorf("install --user says:\n%s", out)
	}
	if fi, err := os.Lstat(settings); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is no more: %v %v", fi, err)
	}
	if fi, err := os.Stat(dotfiles); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode: %v %v", fi, err)
	}
	checkInstalledShape(t, readBytes(t, dotfiles), command)
	var st companion.Status
	if err := json.Unmarshal([]byte(mustCLI(t, "claude-code", "status", "--user", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Installed || st.Settings != settings || st.Store != filepath.Join(home, ".claude", "strata.db") || len(st.Hooks) != 3 {
		t.Errorf("status --user: %+v", st)
	}
	mustCLI(t, "claude-code", "uninstall", "--user")
	if got := string(readBytes(t, dotfiles)); got != orig {
		t.Errorf("install then uninstall --user: %q", got)
	}

	// A link to nothing is refused, and stays the link it is.
	if err := os.Remove(dotfiles); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "claude-code", "install", "--user")
	wantCode(t, r, exitError)
	if !strings.Contains(r.stderr, "Error: "+settings+" is a link to "+dotfiles+", which does not exist\nHint: make the file it names, or remove the link") {
		t.Errorf("install --user through a dangling link:\n%s", r.stderr)
	}
	if to, err := os.Readlink(settings); err != nil || to != dotfiles {
		t.Errorf("the dangling link: %q %v", to, err)
	}
}

func TestShellWords(t *testing.T) {
	t.Parallel()
	env := func(name string) string {
		return map[string]string{"CLAUDE_PROJECT_DIR": "/home/me/my app", "HOME": "/home/me"}[name]
	}
	for _, tc := range []struct {
		in   string
		want []string // nil: not read
	}{
		{`strata claude-code hook --db "$CLAUDE_PROJECT_DIR"/.claude/strata.db`, []string{"strata", "claude-code", "hook", "--db", "/home/me/my app/.claude/strata.db"}},
		{`strata claude-code hook --db ${HOME}/x.db`, []string{"strata", "claude-code", "hook", "--db", "/home/me/x.db"}},
		{`'/opt/my tools/strata' claude-code  hook --db='it'\''s.db'`, []string{"/opt/my tools/strata", "claude-code", "hook", "--db=it's.db"}},
		{`a "b \"c\" \$d" e\ f $ '$HOME'`, []string{"a", `b "c" $d`, "e f", "$", "$HOME"}},
		{`strata claude-code hook && rm -rf /`, nil},
		{`strata "unclosed`, nil},
		{`echo $(date)`, nil},
	} {
		got, ok := companion.ShellWords(tc.in, env)
		if tc.want == nil {
			if ok {
				t.Errorf("%s: read as %q", tc.in, got)
			}
			continue
		}
		if !ok || strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
			t.Errorf("%s: %q %v, want %q", tc.in, got, ok, tc.want)
		}
	}
	if got, _ := companion.ShellWords(`x "$HOME" $CLAUDE_PROJECT_DIR/a`, nil); strings.Join(got, "|") != `x|$HOME|$CLAUDE_PROJECT_DIR/a` {
		t.Errorf("without env: %q", got)
	}
}

// FuzzClaudeCodeInstall: for any settings object, install gives JSON of
// the shape Claude Code reads, with strata's hooks, and uninstall gives the
// text back byte for byte.
func FuzzClaudeCodeInstall(f *testing.F) {
	for _, text := range settingsCases(f) {
		f.Add(text)
	}
	f.Add(`{"hooks":{"PreCompact":[ ],"x":[]},"y":[{}]}`)
	f.Add("{\n\t\"a\": [\n\t\t1\n\t]\r\n}")
	f.Fuzz(func(t *testing.T, text string) {
		mine, err := companion.StrataHooks(claudecode.Agent{}, "settings.json", []byte(text))
		if err != nil || len(mine) > 0 {
			return // refused, or strata's hooks are there: not a round trip
		}
		if json.Unmarshal([]byte(text), &claudeSettingsShape{}) != nil {
			return // hooks Claude Code does not read, which the shape check would fail on
		}
		installed, changes, created, err := companion.InstallHooks(claudecode.Agent{}, "settings.json", []byte(text), defaultHookCommand)
		if err != nil {
			t.Fatalf("install of %q: %v", text, err)
		}
		if len(changes) != len(claudecode.HookEvents) {
			t.Fatalf("install of %q: %+v", text, changes)
		}
		checkInstalledShape(t, installed, defaultHookCommand)
		back, removed, _, err := companion.UninstallHooks(claudecode.Agent{}, "settings.json", installed, created)
		if err != nil {
			t.Fatalf("uninstall of %q: %v", installed, err)
		}
		if len(removed) != len(claudecode.HookEvents) || string(back) != text {
			t.Fatalf("install then uninstall of\n%q\ngave\n%q\n(installed %q)", text, back, installed)
		}
	})
}

// Uninstall takes strata's hooks out of the project's local settings too,
// which Claude Code runs as well: exactly their text, every other byte of
// the file kept; the lists they leave empty stay (install made none of
// them), and so does the file. --user leaves the project's alone; a local
// file that is not JSON is left as it is, with a warning.
func TestClaudeCodeUninstall_LocalSettings(t *testing.T) {
	project := t.TempDir()
	t.Chdir(project)
	t.Setenv("HOME", t.TempDir())
	local := filepath.Join(".claude", "settings.local.json")
	settings := filepath.Join(".claude", "settings.json")
	const mine = `strata claude-code hook --db "$CLAUDE_PROJECT_DIR"/.claude/mine.db`
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Lists of other hooks under every event: the file comes back whole.
	orig := strings.Replace(settingsCases(t)["4_spaces_other_hooks_under_the_same_events"], `        "PostToolUse": [`,
		`        "PostCompact": [{"hooks": [{"type": "command", "command": "echo post"}]}],
        "PostToolUse": [`, 1)
	withStrata, _, _, err := companion.InstallHooks(claudecode.Agent{}, local, []byte(orig), mine)
	if err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "claude-code", "install")
	write(local, string(withStrata))
	write(filepath.Join(".claude", "mine.db"), "")
	r := cli(t, "", "claude-code", "uninstall")
	wantCode(t, r, exitOK)
	want := "removed strata's hooks from " + settings + ":\n" +
		"  removed PreCompact: " + defaultHookCommand + "\n" +
		"  removed SessionStart (matcher compact): " + defaultHookCommand + "\n" +
		"  removed PostCompact: " + defaultHookCommand + "\n" +
		"removed " + settings + ": install created it, and nothing else is in it\n" +
		"removed strata's hooks from " + local + ":\n" +
		"  removed PreCompact: " + mine + "\n" +
		"  removed SessionStart (matcher compact): " + mine + "\n" +
		"  removed PostCompact: " + mine + "\n" +
		"the store stays: " + filepath.Join(".claude", "mine.db") + "; to delete it: rm -f .claude/mine.db .claude/strata.log\n"
	if r.stdout != want || r.stderr != "" {
		t.Errorf("uninstall: stdout\n%s\nwant\n%s\nstderr\n%s", r.stdout, want, r.stderr)
	}
	if got := string(readBytes(t, local)); got != orig {
		t.Errorf("the local settings after uninstall:\n%s\nwant them as they were\n%s", got, orig)
	}
	if fi, err := os.Stat(local); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the local settings: %v, %v; want the file kept, its mode 0600", fi, err)
	}

	// Added by hand to a file without hooks, and no settings.json: the
	// hooks go, the object and lists they leave empty stay.
	write(local, "{\n  \"permissions\": {\"allow\": [\"Bash(make:*)\"]},\n  \"hooks\": {\n    \"PreCompact\": [\n      {\n        \"hooks\": [{\"type\": \"command\", \"command\": \"strata claude-code hook --db /srv/mine.db\"}]\n      }\n    ]\n  }\n}\n")
	r = cli(t, "", "claude-code", "uninstall")
	wantCode(t, r, exitOK)
	if want := settings + ": no such file: strata's hooks are not installed\n" +
		"removed strata's hooks from " + local + ":\n  removed PreCompact: strata claude-code hook --db /srv/mine.db\n"; r.stdout != want {
		t.Errorf("uninstall without settings.json: stdout\n%s\nwant\n%s", r.stdout, want)
	}
	if got, want := string(readBytes(t, local)), "{\n  \"permissions\": {\"allow\": [\"Bash(make:*)\"]},\n  \"hooks\": {\n    \"PreCompact\": []\n  }\n}\n"; got != want {
		t.Errorf("the local settings:\n%s\nwant\n%s", got, want)
	}
	// Nothing of strata's left anywhere: as before, nothing said of the
	// local file.
	r = cli(t, "", "claude-code", "uninstall")
	if want := settings + ": no such file: strata's hooks are not installed\n"; r.code != exitOK || r.stdout != want {
		t.Errorf("uninstall again: %d, stdout\n%s\nwant\n%s", r.code, r.stdout, want)
	}

	// --user: the user's settings only.
	mustCLI(t, "claude-code", "install", "--user")
	write(local, string(withStrata))
	r = cli(t, "", "claude-code", "uninstall", "--user")
	wantCode(t, r, exitOK)
	if strings.Contains(r.stdout, local) || string(readBytes(t, local)) != string(withStrata) {
		t.Errorf("uninstall --user touched the project's local settings:\n%s", r.stdout)
	}

	// A local file that is not JSON: a warning, and it stays as it is;
	// settings.json is uninstalled all the same.
	mustCLI(t, "claude-code", "install")
	write(local, "{\"hooks\": {},}\n")
	r = cli(t, "", "claude-code", "uninstall")
	wantCode(t, r, exitOK)
	if want := "warning: " + local + ":1:14: invalid character '}' looking for beginning of object key string: uninstall leaves it as it is\n"; r.stderr != want ||
		!strings.HasPrefix(r.stdout, "removed strata's hooks from "+settings+":\n") || fileExists(settings) {
		t.Errorf("uninstall beside a broken local file: stdout\n%s\nstderr\n%s\nwant on stderr\n%s", r.stdout, r.stderr, want)
	}
	if got := string(readBytes(t, local)); got != "{\"hooks\": {},}\n" {
		t.Errorf("the broken local file changed: %q", got)
	}
}

// install keeps the store and its log, which hold transcripts, out of git:
// in the project's .gitignore when it has one, else in one it creates
// beside them, and says where; uninstall takes out a .gitignore it created
// while nothing of strata's is there, and keeps the rules of a store the
// hook made.
func TestClaudeCodeInstall_IgnoresTheStore(t *testing.T) {
	t.Parallel()
	dir, _ := newProject(t, nil)
	out := mustCLI(t, "claude-code", "install", "--dir", dir)
	ignore := filepath.Join(dir, ".claude", ".gitignore")
	if got := string(readBytes(t, ignore)); got != "/strata.db\n/strata.log\n/strata.log.1\n" ||
		!strings.Contains(out, "git ignores the store and its log: created "+filepath.Join(dir, ".claude", ".gitignore")+" with /strata.db /strata.log /strata.log.1\n") {
		t.Fatalf("install says:\n%s\n.gitignore: %q", out, got)
	}
	if out := mustCLI(t, "claude-code", "install", "--dir", dir); !strings.Contains(out, "lists them already") {
		t.Errorf("a second install says:\n%s", out)
	}
	if err := os.WriteFile(filepath.Join(dir, ".claude", "strata.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "claude-code", "uninstall", "--dir", dir)
	if _, err := os.Stat(ignore); err != nil {
		t.Errorf("uninstall removed the rules of the store that stays: %v", err)
	}

	// A project with its own .gitignore: the rules go there.
	dir, _ = newProject(t, nil)
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("node_modules/"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = mustCLI(t, "claude-code", "install", "--dir", dir)
	if got := string(readBytes(t, filepath.Join(dir, ".gitignore"))); got != "node_modules/\n/.claude/strata.db\n/.claude/strata.log\n/.claude/strata.log.1\n" ||
		!strings.Contains(out, "git ignores the store and its log: added /.claude/strata.db /.claude/strata.log /.claude/strata.log.1 to ") {
		t.Errorf("install says:\n%s\n.gitignore: %q", out, got)
	}
}

// fileExists reports whether there is a file (or anything) at path.
func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
