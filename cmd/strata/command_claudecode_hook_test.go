package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/tier"
)

// ccFixture is the Claude Code session of transcript/testdata, and
// ccFixtureSession its id.
const (
	ccFixture        = "../../transcript/testdata/claude-code/session.jsonl"
	ccFixtureSession = "7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41"
	ccRealSession    = "fa812bfe-b295-4cca-9c2f-fdf01028cb46"
)

// ccRealTranscript returns the real transcript with a compaction in it,
// skipping t when the project's data is absent.
func ccRealTranscript(t testing.TB) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "data", "claude-code", ccRealSession+".jsonl")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is absent: real-transcript test skipped", p)
	}
	return p
}

// ccLines returns the lines of a transcript, each with its newline.
func ccLines(t testing.TB, path string) []string {
	t.Helper()
	ls := strings.SplitAfter(string(readBytes(t, path)), "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// ccBoundary returns the index of the line of the compact_boundary record.
func ccBoundary(t testing.TB, lines []string) int {
	t.Helper()
	for i, l := range lines {
		var r struct{ Type, Subtype string }
		if json.Unmarshal([]byte(l), &r) == nil && r.Type == "system" && r.Subtype == "compact_boundary" {
			return i
		}
	}
	t.Fatal("no compact_boundary record")
	return 0
}

// ccRawState is what the raw records before a boundary imply, computed
// here from the transcript's JSON, not by strata: the tool calls still
// open, the results flagged is_error, the uses the user refused.
type ccRawState struct {
	open, failed, rejected []string
}

func ccComputeRaw(t testing.TB, lines []string) ccRawState {
	t.Helper()
	seen := map[string]bool{}
	opened, resolved := map[string]bool{}, map[string]bool{}
	var order []string
	var st ccRawState
	for _, l := range lines {
		var r struct {
			Type, UUID    string
			IsSidechain   bool
			ToolUseResult json.RawMessage
			Message       struct{ Content json.RawMessage }
		}
		if json.Unmarshal([]byte(l), &r) != nil || r.IsSidechain || r.UUID != "" && seen[r.UUID] {
			continue
		}
		seen[r.UUID] = true
		var blocks []struct {
			Type, ID  string
			ToolUseID string `json:"tool_use_id"`
			IsError   bool   `json:"is_error"`
		}
		if json.Unmarshal(r.Message.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			switch {
			case b.Type == "tool_use" && r.Type == "assistant":
				if !opened[b.ID] {
					order = append(order, b.ID)
				}
				opened[b.ID] = true
			case b.Type == "tool_result" && opened[b.ToolUseID] && !resolved[b.ToolUseID]:
				resolved[b.ToolUseID] = true
				if b.IsError {
					st.failed = append(st.failed, b.ToolUseID)
				}
				if string(r.ToolUseResult) == `"User rejected tool use"` {
					st.rejected = append(st.rejected, b.ToolUseID)
				}
			}
		}
	}
	for _, id := range order {
		if !resolved[id] {
			st.open = append(st.open, id)
		}
	}
	return st
}

// ccInput is the hook JSON Claude Code writes for event on transcript.
func ccInput(event, session, transcript, cwd string) string {
	m := map[string]string{"session_id": session, "transcript_path": transcript, "cwd": cwd,
		"permission_mode": "default", "hook_event_name": event}
	switch event {
	case "PreCompact":
		m["trigger"], m["custom_instructions"] = "auto", ""
	case "SessionStart":
		m["source"] = "compact"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// ccOutput decodes SessionStart's stdout: exactly Claude Code's documented
// shape, {"hookSpecificOutput":{"hookEventName":"SessionStart",
// "additionalContext":"…"}}, one JSON value.
func ccOutput(t testing.TB, stdout string) string {
	t.Helper()
	var top map[string]map[string]string
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&top); err != nil || dec.More() {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	hso, ok := top["hookSpecificOutput"]
	if len(top) != 1 || !ok || len(hso) != 2 || hso["hookEventName"] != "SessionStart" || hso["additionalContext"] == "" {
		t.Fatalf("stdout is not the SessionStart output Claude Code reads:\n%s", stdout)
	}
	return hso["additionalContext"]
}

// ccLog returns the lines of the hook's log.
func ccLog(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// ccMore returns how many facts of a class a "… and N more" line counts.
func ccMore(text, noun string) int {
	m := regexp.MustCompile(`… and (\d+) more ` + noun + `s? not shown`).FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// ccFailures returns how many failed calls the facts of an injected state
// count: "once" or "N times" in each standing or fixed failure's line.
func ccFailures(text string) int {
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^- (?:FAILED .* — |fixed: .* — failed )(once|(\d+) times), newest at seq`).FindAllStringSubmatch(text, -1) {
		if m[1] == "once" {
			n++
			continue
		}
		k, _ := strconv.Atoi(m[2])
		n += k
	}
	return n
}

// TestClaudeCodeHook drives the hook as Claude Code does, on the real
// transcript and on the fixtures: the transcript written up to just before
// its compact_boundary record, PreCompact with the JSON on stdin, the rest
// appended (the boundary, Claude Code's summary, what follows), then
// SessionStart(compact). Its stdout is Claude Code's documented output,
// holding every failed call and every call open at the boundary as
// computed here from the raw transcript; running either hook again changes
// nothing; the marker it names resumes to the sha256 it gives.
func TestClaudeCodeHook(t *testing.T) {
	cases := []struct {
		name, session string
		lines         func(t *testing.T) []string
	}{
		{"real", ccRealSession, func(t *testing.T) []string { return ccLines(t, ccRealTranscript(t)) }},
		{"fixture", ccFixtureSession, func(t *testing.T) []string { return ccLines(t, ccFixture) }},
		// Without the result of the last call before the boundary: a call
		// open there.
		{"open-call", ccFixtureSession, func(t *testing.T) []string {
			return slices.DeleteFunc(ccLines(t, ccFixture), func(l string) bool { return strings.Contains(l, `"uuid": "u7"`) })
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines := c.lines(t)
			b := ccBoundary(t, lines)
			raw := ccComputeRaw(t, lines[:b])
			if c.name == "open-call" && len(raw.open) == 0 || c.name != "open-call" && len(raw.failed) == 0 {
				t.Fatalf("the case does not hold what it tests: %+v", raw)
			}
			project := t.TempDir()
			t.Setenv("CLAUDE_PROJECT_DIR", project) // the store: .claude/strata.db there
			db := filepath.Join(project, ".claude", "strata.db")
			logPath := filepath.Join(project, ".claude", "strata.log")
			transcript := filepath.Join(t.TempDir(), c.session+".jsonl")
			if err := os.WriteFile(transcript, []byte(strings.Join(lines[:b], "")), 0o600); err != nil {
				t.Fatal(err)
			}
			pre := ccInput("PreCompact", c.session, transcript, project)
			r := cli(t, pre, "claude-code", "hook")
			wantCode(t, r, exitOK, "claude-code", "hook")
			if r.stdout != "" || r.stderr != "" {
				t.Fatalf("PreCompact printed %q, %q", r.stdout, r.stderr)
			}
			log := ccLog(t, logPath)
			if len(log) != 1 || !strings.Contains(log[0], " PreCompact trigger=auto session="+c.session+" ") || !strings.Contains(log[0], " compacted=L1:1..") {
				t.Fatalf("log after PreCompact: %q", log)
			}
			dumped := mustCLI(t, "dump", db, "--raw")
			wantCode(t, cli(t, pre, "claude-code", "hook"), exitOK)
			if again := mustCLI(t, "dump", db, "--raw"); again != dumped {
				t.Fatal("PreCompact run again changed the store")
			}

			f, err := os.OpenFile(transcript, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(strings.Join(lines[b:], ""))
			f.Close()
			start := ccInput("SessionStart", c.session, transcript, project)
			r = cli(t, start, "claude-code", "hook")
			wantCode(t, r, exitOK)
			text := ccOutput(t, r.stdout)
			// Every failed call is counted in one fact of its target's,
			// standing or fixed, or is a refused tool use, shown once as
			// its rejection.
			if n := ccFailures(text) + len(regexp.MustCompile(`(?m)^- rejected: .*call \S+ (\(\S+\) )?at seq \d+`).FindAllString(text, -1)); n != len(raw.failed) {
				t.Errorf("the injected state counts %d failed calls, the transcript holds %d:\n%s", n, len(raw.failed), text)
			}
			for _, id := range raw.open {
				if !strings.Contains(text, "- UNRESOLVED call "+id+" ") {
					t.Errorf("call %s, open at the boundary, is not in the injected state:\n%s", id, text)
				}
			}
			if len(raw.rejected) > 0 && !strings.Contains(text, "- rejected: ") {
				t.Errorf("the refused tool use is not in the injected state:\n%s", text)
			}
			m := regexp.MustCompile("`strata resume --db (\\S+) --session (\\S+) --marker (\\d+)` \\(marker \\d+, sha256 ([0-9a-f]{64})\\)").FindStringSubmatch(text)
			if m == nil || m[1] != db || m[2] != c.session {
				t.Fatalf("no resume command for %s, %s in:\n%s", db, c.session, text)
			}
			if got := resume(t, db, c.session, "--marker", m[3]); got.SHA256 != m[4] || got.Source != "marker" {
				t.Errorf("strata resume --marker %s: %s sha256 %s; the injected state says sha256 %s", m[3], got.Source, got.SHA256, m[4])
			}
			log = ccLog(t, logPath)
			if last := log[len(log)-1]; !strings.Contains(last, " SessionStart source=compact ") || !strings.Contains(last, " summary_unmentioned=") {
				t.Errorf("log after SessionStart: %q", last)
			}
			if !strings.Contains(mustCLI(t, "dump", db, "--raw", "--session", c.session), "strata compared Claude Code's compact summary") {
				t.Error("dump shows no check of Claude Code's summary")
			}

			dumped = mustCLI(t, "dump", db, "--raw")
			again := cli(t, start, "claude-code", "hook")
			if again.code != exitOK || again.stdout != r.stdout {
				t.Fatalf("SessionStart again: exit %d, stdout\n%s\nwant the same bytes as\n%s", again.code, again.stdout, r.stdout)
			}
			if mustCLI(t, "dump", db, "--raw") != dumped {
				t.Fatal("SessionStart run again changed the store")
			}

			// A budget too small for every fact: each failed call is
			// shown or counted, none cut silently.
			small := ccOutput(t, cli(t, start, "claude-code", "hook", "--budget", "640").stdout)
			facts := func(text string) int {
				return strings.Count(text, "\n- FAILED `") + strings.Count(text, "\n- FAILED call ") + strings.Count(text, "\n- fixed: ")
			}
			more := func(text string) int { return ccMore(text, "standing failure") + ccMore(text, "fixed failure") }
			if len(small) > 4*640 || facts(small)+more(small) != facts(text)+more(text) {
				t.Errorf("--budget 640: %d bytes, %d failures shown and %d counted, of %d:\n%s", len(small), facts(small), more(small), facts(text)+more(text), small)
			}
		})
	}
}

// TestClaudeCodeHook_Failures: whatever fails, the hook exits 0, prints
// nothing on stdout and writes one log line naming what failed.
func TestClaudeCodeHook_Failures(t *testing.T) {
	lines := ccLines(t, ccFixture)
	b := ccBoundary(t, lines)
	cases := []struct {
		name  string
		stdin func(dir string) string
		args  func(dir string) []string
		setup func(t *testing.T, dir string) func()
		made  bool   // setup ran a hook that made the store
		want  string // its parts, between " … ", in the line; DIR the project
		never string // what the line must not hold
	}{
		{name: "bad stdin", want: "FAILED reading the hook input: not a JSON object",
			stdin: func(string) string { return "PreCompact, please" }},
		{name: "empty stdin", want: "FAILED reading the hook input",
			stdin: func(string) string { return "" }},
		{name: "garbage transcript", want: "PreCompact FAILED on ",
			stdin: func(dir string) string {
				p := filepath.Join(dir, "garbage.jsonl")
				os.WriteFile(p, []byte("\x00\x01 not a transcript\n{\"half\": \n"), 0o600)
				return ccInput("PreCompact", ccFixtureSession, p, dir)
			}},
		{name: "missing transcript", want: "FAILED reading the transcript: companion: opening the transcript: open DIR/none.jsonl: no such file or directory",
			stdin: func(dir string) string {
				return ccInput("PreCompact", ccFixtureSession, filepath.Join(dir, "none.jsonl"), dir)
			}},
		{name: "a URL's password", want: "FAILED opening the store postgres://agent:xxxxx@127.0.0.1:1/fleet", never: "secret",
			args: func(string) []string {
				return []string{"--db", "postgres://agent:secret@127.0.0.1:1/fleet?connect_timeout=5", "--timeout", "50ms"}
			}},
		// A damaged store: the hint the other commands give.
		{name: "text for a store", want: "FAILED opening the store " + "DIR/.claude/strata.db: DIR/.claude/strata.db: invalid database: store: not a strata database (hint: DIR/.claude/strata.db is text)",
			setup: func(t *testing.T, dir string) func() {
				os.MkdirAll(filepath.Join(dir, ".claude"), 0o700)
				os.WriteFile(filepath.Join(dir, ".claude", "strata.db"), bytes.Repeat([]byte("damaged!"), 4096), 0o600)
				return nil
			}},
		{name: "overwritten store", want: "(hint: the database is damaged; to list every problem it holds, run: strata verify DIR/.claude/strata.db)",
			made: true, setup: ccDamage(func(b []byte) []byte { copy(b[4*4096:], bytes.Repeat([]byte{0xa5}, 3*4096)); return b })},
		{name: "truncated store", want: "FAILED opening the store DIR/.claude/strata.db: DIR/.claude/strata.db: bbolt panicked: … (hint: the database is damaged; to list every problem it holds, run: strata verify DIR/.claude/strata.db)",
			made: true, setup: ccDamage(func(b []byte) []byte { return b[:10000] })},
		{name: "zeroed store", want: "(hint: DIR/.claude/strata.db is zero bytes where a database's first page belongs (damaged, or never written): restore a backup, or remove it to start a new one)",
			made: true, setup: ccDamage(func(b []byte) []byte { clear(b[:2*4096]); return b })},
		{name: "empty store", want: "(hint: a zero-length file is not a database: remove it to start a new one, or restore a backup)",
			made: true, setup: ccDamage(func(b []byte) []byte { return nil })},
		{name: "locked store", want: "another process holds the database: DIR/.claude/strata.db (waited 50ms): store: database is held by another process (hint: another process has it open; stop it, or read a backup) (hint: held by process ",
			args: func(string) []string { return []string{"--timeout", "50ms"} },
			setup: func(t *testing.T, dir string) func() {
				db := filepath.Join(dir, ".claude", "strata.db")
				os.MkdirAll(filepath.Dir(db), 0o700)
				mustCLI(t, "replay", db, incident(t))
				c := startChild(t, envHold+"="+db)
				if line, err := bufio.NewReader(c.stdout).ReadString('\n'); err != nil || line != "ready\n" {
					t.Fatalf("holder: %q, %v; stderr %s", line, err, c.stderr.String())
				}
				return func() { c.stdin.Close(); c.cmd.Wait() }
			}},
		{name: "bad flag", want: "FAILED (the command line): invalid argument \"many\" for \"--budget\"",
			args: func(string) []string { return []string{"--budget", "many"} }},
		{name: "small budget", want: "FAILED (the command line): --budget must be at least 640, got 10",
			args: func(string) []string { return []string{"--budget", "10"} }},
		{name: "an argument", want: "FAILED (the command line): hook takes no arguments",
			args: func(string) []string { return []string{"extra"} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("CLAUDE_PROJECT_DIR", dir)
			stdin := ""
			if c.stdin != nil {
				stdin = c.stdin(dir)
			} else {
				p := filepath.Join(dir, "t.jsonl")
				os.WriteFile(p, []byte(strings.Join(lines[:b], "")), 0o600)
				stdin = ccInput("PreCompact", ccFixtureSession, p, dir)
			}
			if c.setup != nil {
				if done := c.setup(t, dir); done != nil {
					defer done()
				}
			}
			args := []string{"claude-code", "hook"}
			if c.args != nil {
				args = append(args, c.args(dir)...)
			}
			r := cli(t, stdin, args...)
			if r.code != exitOK || r.stdout != "" || r.stderr != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and nothing printed", r.code, r.stdout, r.stderr)
			}
			log := ccLog(t, filepath.Join(dir, ".claude", "strata.log"))
			if c.made && len(log) > 0 {
				log = log[1:] // the line of the hook that made the store
			}
			want := strings.ReplaceAll(c.want, "DIR", dir)
			if len(log) != 1 || !strings.Contains(log[0], " FAILED ") {
				t.Fatalf("log %q; want one line saying %q", log, want)
			}
			for part := range strings.SplitSeq(want, " … ") {
				if !strings.Contains(log[0], part) {
					t.Fatalf("log %q; want one line saying %q", log, want)
				}
			}
			if c.never != "" && strings.Contains(log[0], c.never) {
				t.Errorf("log %q holds %q", log, c.never)
			}
			if _, err := os.Stat(filepath.Join(dir, ".claude", "strata.db")); !c.made && c.setup == nil && !os.IsNotExist(err) {
				t.Errorf("a hook that failed left a store: %v", err)
			}
		})
	}
}

// The store is there once a hook has stored something: a hook that made
// it and stored nothing — a transcript that does not parse, one that
// holds no record — removes it again, so status says "none yet"; the
// next hook with records to store makes it.
func TestClaudeCodeHook_StoreOnceStored(t *testing.T) {
	lines := ccLines(t, ccFixture)
	b := ccBoundary(t, lines)
	dir := t.TempDir()
	t.Setenv("CLAUDE_PROJECT_DIR", dir)
	db := filepath.Join(dir, ".claude", "strata.db")
	mustCLI(t, "claude-code", "install", "--dir", dir)
	for _, tc := range []struct{ name, text, log string }{
		{"garbage", "\x00\x01 not a transcript\n{\"half\": \n", "PreCompact FAILED on "},
		{"empty", "", "PreCompact "},
	} {
		p := filepath.Join(dir, tc.name+".jsonl")
		if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		wantCode(t, cli(t, ccInput("PreCompact", ccFixtureSession, p, dir), "claude-code", "hook"), exitOK, tc.name)
		if log := ccLog(t, filepath.Join(dir, ".claude", companion.LogName)); !strings.Contains(log[len(log)-1], tc.log) {
			t.Errorf("%s transcript: log %q, want a last line holding %q", tc.name, log, tc.log)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Fatalf("a hook on the %s transcript left a store: %v", tc.name, err)
		}
		if out := mustCLI(t, "claude-code", "status", "--dir", dir); !strings.Contains(out, "none yet") {
			t.Errorf("status after a hook that stored nothing:\n%s", out)
		}
	}
	p := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines[:b], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	wantCode(t, cli(t, ccInput("PreCompact", ccFixtureSession, p, dir), "claude-code", "hook"), exitOK, "PreCompact")
	var st companion.Status
	if err := json.Unmarshal([]byte(mustCLI(t, "claude-code", "status", "--dir", dir, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if !st.StoreExists || len(st.Sessions) != 1 || st.Sessions[0].ID != ccFixtureSession {
		t.Errorf("after a hook that stored the session: %+v", st)
	}
}

// ccDamage returns a setup that makes the store with a PreCompact of the
// fixture, then rewrites its file with damage.
func ccDamage(damage func([]byte) []byte) func(t *testing.T, dir string) func() {
	return func(t *testing.T, dir string) func() {
		lines := ccLines(t, ccFixture)
		p := filepath.Join(dir, "t.jsonl")
		if err := os.WriteFile(p, []byte(strings.Join(lines[:ccBoundary(t, lines)], "")), 0o600); err != nil {
			t.Fatal(err)
		}
		wantCode(t, cli(t, ccInput("PreCompact", ccFixtureSession, p, dir), "claude-code", "hook"), exitOK)
		db := filepath.Join(dir, ".claude", "strata.db")
		if err := os.WriteFile(db, damage(readBytes(t, db)), 0o600); err != nil {
			t.Fatal(err)
		}
		return nil
	}
}

// TestClaudeCodeHook_NoProject: an input without a cwd, or with a relative
// one, is not Claude Code's: without --db and $CLAUDE_PROJECT_DIR there is
// no project to make a store or a log in, and the failure goes to stderr;
// with $CLAUDE_PROJECT_DIR it goes to the log there, and no store is made
// either way.
func TestClaudeCodeHook_NoProject(t *testing.T) {
	lines := ccLines(t, ccFixture)
	transcript := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(transcript, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cwd, want string }{
		{"", "PreCompact without a cwd"},
		{"rel", `cwd "rel" is not an absolute path`},
	} {
		t.Run(c.want, func(t *testing.T) {
			var in map[string]string
			if err := json.Unmarshal([]byte(ccInput("PreCompact", ccFixtureSession, transcript, c.cwd)), &in); err != nil {
				t.Fatal(err)
			}
			if c.cwd == "" {
				delete(in, "cwd")
			}
			stdin, _ := json.Marshal(in)
			here := t.TempDir()
			t.Chdir(here)
			t.Setenv("CLAUDE_PROJECT_DIR", "")
			r := cli(t, string(stdin), "claude-code", "hook")
			want := "strata claude-code hook: PreCompact FAILED reading the hook input: " + c.want + ": companion: bad hook input\n"
			if r.code != exitOK || r.stdout != "" || r.stderr != want {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and stderr %q", r.code, r.stdout, r.stderr, want)
			}
			if ents, err := os.ReadDir(here); err != nil || len(ents) != 0 {
				t.Fatalf("the hook made %v in its directory (%v)", ents, err)
			}

			project := t.TempDir()
			t.Setenv("CLAUDE_PROJECT_DIR", project)
			if r := cli(t, string(stdin), "claude-code", "hook"); r.code != exitOK || r.stdout != "" || r.stderr != "" {
				t.Fatalf("with CLAUDE_PROJECT_DIR: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			if log := ccLog(t, filepath.Join(project, ".claude", "strata.log")); len(log) != 1 || !strings.Contains(log[0], " PreCompact FAILED reading the hook input: "+c.want) {
				t.Fatalf("log %q", log)
			}
			if _, err := os.Stat(filepath.Join(project, ".claude", "strata.db")); !os.IsNotExist(err) {
				t.Fatalf("a store was made: %v", err)
			}
			if ents, err := os.ReadDir(here); err != nil || len(ents) != 0 {
				t.Fatalf("the hook made %v in its directory (%v)", ents, err)
			}
		})
	}
}

// TestClaudeCodeHook_NoBoundary: SessionStart(compact) on a transcript
// without a compact_boundary record and no PreCompact before it is no
// failure: it stores the records, injects nothing, and its line says so.
func TestClaudeCodeHook_NoBoundary(t *testing.T) {
	lines := ccLines(t, ccFixture)
	project := t.TempDir()
	t.Setenv("CLAUDE_PROJECT_DIR", project)
	p := filepath.Join(project, "t.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines[:ccBoundary(t, lines)], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, ccInput("SessionStart", ccFixtureSession, p, project), "claude-code", "hook")
	if r.code != exitOK || r.stdout != "" || r.stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0 and nothing printed", r.code, r.stdout, r.stderr)
	}
	log := ccLog(t, filepath.Join(project, ".claude", "strata.log"))
	if len(log) != 1 || strings.Contains(log[0], "FAILED") || !regexp.MustCompile(` events=[1-9]\d* .* no_compact_boundary nothing_injected$`).MatchString(log[0]) {
		t.Fatalf("log %q; want the events imported, no boundary, nothing injected", log)
	}
	if got := sessionsOf(t, filepath.Join(project, ".claude", "strata.db")); len(got) != 1 || got[0] != ccFixtureSession {
		t.Fatalf("sessions %v", got)
	}
}

// TestClaudeCodeHook_AtOnce: hooks of two sessions on one store, each run
// twice, all at once: every one waits its turn for the lock and succeeds,
// each session stored once.
func TestClaudeCodeHook_AtOnce(t *testing.T) {
	lines := ccLines(t, ccFixture)
	b := ccBoundary(t, lines)
	project := t.TempDir()
	t.Setenv("CLAUDE_PROJECT_DIR", project)
	sessions := []string{ccFixtureSession, "5e55a0b1-0000-4000-8000-000000000002"}
	var inputs []string
	for _, s := range sessions {
		p := filepath.Join(t.TempDir(), s+".jsonl")
		body := strings.ReplaceAll(strings.Join(lines[:b], ""), ccFixtureSession, s)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		in := ccInput("PreCompact", s, p, project)
		inputs = append(inputs, in, in)
	}
	var wg sync.WaitGroup
	results := make([]result, len(inputs))
	for i, in := range inputs {
		wg.Go(func() { results[i] = cli(t, in, "claude-code", "hook", "--timeout", "2m") })
	}
	wg.Wait()
	for i, r := range results {
		if r.code != exitOK || r.stdout != "" {
			t.Errorf("hook %d: exit %d, stdout %q", i, r.code, r.stdout)
		}
	}
	log := ccLog(t, filepath.Join(project, ".claude", "strata.log"))
	if len(log) != len(inputs) || slices.ContainsFunc(log, func(l string) bool { return strings.Contains(l, "FAILED") }) {
		t.Fatalf("log:\n%s", strings.Join(log, "\n"))
	}
	db := filepath.Join(project, ".claude", "strata.db")
	var st []struct {
		ID     string `json:"id"`
		Events int    `json:"events"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "sessions", "--json", db)), &st); err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0].Events != st[1].Events || st[0].Events == 0 {
		t.Fatalf("sessions %+v; want both, with the same events once", st)
	}
}

// TestClaudeCodeHook_Ignored: SessionStart from startup, resume or clear,
// and other events: nothing done, nothing printed, no store made; a log
// line only where the log's directory is.
func TestClaudeCodeHook_Ignored(t *testing.T) {
	project := t.TempDir()
	t.Setenv("CLAUDE_PROJECT_DIR", project)
	ins := []string{
		`{"session_id":"s1","transcript_path":"/none","cwd":"/w","hook_event_name":"SessionStart","source":"startup"}`,
		`{"session_id":"s1","transcript_path":"/none","cwd":"/w","hook_event_name":"SessionStart","source":"resume"}`,
		`{"session_id":"s1","transcript_path":"/none","cwd":"/w","hook_event_name":"Stop","stop_hook_active":false}`,
	}
	hooks := func() {
		for _, in := range ins {
			r := cli(t, in, "claude-code", "hook")
			if r.code != exitOK || r.stdout != "" || r.stderr != "" {
				t.Fatalf("%s: exit %d, %q, %q", in, r.code, r.stdout, r.stderr)
			}
		}
	}
	hooks()
	if _, err := os.Stat(filepath.Join(project, ".claude")); !os.IsNotExist(err) {
		t.Fatalf("the project's .claude was made: %v", err)
	}
	if err := os.Mkdir(filepath.Join(project, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	hooks()
	if _, err := os.Stat(filepath.Join(project, ".claude", "strata.db")); !os.IsNotExist(err) {
		t.Fatalf("a store was made: %v", err)
	}
	log := ccLog(t, filepath.Join(project, ".claude", "strata.log"))
	if len(log) != 3 || !strings.HasSuffix(log[0], "SessionStart source=startup session=s1 ignored") || !strings.HasSuffix(log[2], "Stop session=s1 ignored") {
		t.Fatalf("log %q", log)
	}
}

// TestDocs_ClaudeCodeExample: the example of docs/claude-code.md is what
// the hooks as installed give on the real transcript of a project at
// /home/me/app — PreCompact before its compact_boundary record,
// SessionStart(compact) after it: the log's lines (but their time), the
// injected state, the check of Claude Code's summary, byte for byte — but
// for the project's path, and the tokens of the injected state, which are
// those of the text as printed (checked) in the log, and of the doc's text
// in the doc.
func TestDocs_ClaudeCodeExample(t *testing.T) {
	lines := ccLines(t, ccRealTranscript(t))
	b := ccBoundary(t, lines)
	page := string(readBytes(t, filepath.Join("..", "..", "docs", "claude-code.md")))
	block := func(first string) string {
		for _, bl := range docBlocks(page) {
			if bl.lang == "text" && len(bl.lines) > 0 && strings.HasPrefix(bl.lines[0], first) {
				return strings.Join(bl.lines, "\n")
			}
		}
		t.Fatalf("docs/claude-code.md: no text block starting %q", first)
		return ""
	}
	project := t.TempDir()
	t.Chdir(project)
	t.Setenv("CLAUDE_PROJECT_DIR", project)
	transcript := filepath.Join(project, "transcript.jsonl")
	if err := os.WriteFile(transcript, []byte(strings.Join(lines[:b], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	const cwd = "/home/USER/projects/spotter-worktrees/spotter-a0y" // the transcript's
	db := filepath.Join(project, ".claude", "strata.db")            // --db "$CLAUDE_PROJECT_DIR"/.claude/strata.db
	asDoc := func(s string) string { return strings.ReplaceAll(s, project, "/home/me/app") }
	wantCode(t, cli(t, ccInput("PreCompact", ccRealSession, transcript, cwd), "claude-code", "hook", "--db", db), exitOK)
	if err := os.WriteFile(transcript, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, ccInput("SessionStart", ccRealSession, transcript, cwd), "claude-code", "hook", "--db", db)
	wantCode(t, r, exitOK)
	injected := ccOutput(t, r.stdout)
	if got, want := asDoc(strings.TrimSuffix(injected, "\n")), block("# strata: the state at Claude Code's compaction"); got != want {
		t.Errorf("the injected state differs from the doc's: %s\ngot:\n%s", firstDiff(got, want), got)
	}
	log := ccLog(t, filepath.Join(project, ".claude", "strata.log"))
	doc := strings.Split(block("2026-"), "\n")
	tokens := regexp.MustCompile(` tokens=\d+ `)
	if got, want := tokens.FindString(log[1]), fmt.Sprintf(" tokens=%d ", tier.TokensOfBytes(len(injected))); got != want {
		t.Fatalf("log: %q, the injected state has %q", got, want)
	}
	log[1] = tokens.ReplaceAllString(log[1], fmt.Sprintf(" tokens=%d ", tier.TokensOfBytes(len(asDoc(injected)))))
	for i := range 2 {
		_, got, _ := strings.Cut(asDoc(log[i]), " ")
		if _, want, _ := strings.Cut(doc[i], " "); got != want {
			t.Errorf("log line %d differs from the doc's: %s\ngot:\n%s", i+1, firstDiff(got, want), got)
		}
	}
	var check string
	out := mustCLI(t, "dump", db, "--session", ccRealSession, "--raw", "--json")
	var d struct {
		Sessions []struct {
			Events []struct {
				Text string `json:"text"`
				Ref  string `json:"ref"`
			} `json:"events"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Sessions) != 1 {
		t.Fatalf("dump --json: %v", err)
	}
	for _, e := range d.Sessions[0].Events {
		if strings.HasPrefix(e.Ref, "strata:summary-check:") {
			check = e.Text
		}
	}
	if want := block("strata compared Claude Code's compact summary"); check != want {
		t.Errorf("the check of Claude Code's summary differs from the doc's: %s\ngot:\n%s", firstDiff(check, want), check)
	}
}
