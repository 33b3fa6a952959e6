package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// import --json: each session's line as an object, on stdout with --db (then
// the compactions and a closing summary) and on stderr without, with the
// counts the text lines give.
func TestImport_JSON(t *testing.T) {
	t.Parallel()
	f := fixture(t, "openai/chat.json")
	db := tempDB(t)
	text := mustCLI(t, "import", "--format", "openai", "--db", tempDB(t), f)
	r := cli(t, "", "import", "--format", "openai", "--json", "--db", db, f)
	wantCode(t, r, exitOK)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	var got importJSON
	var sum importSummaryJSON
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil || got.Type != "imported" {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Type != "summary" {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	want := regexp.MustCompile(`(?m)^imported file=(\S+) session=(\S+) events=(\d+) seq=(\d+)\.\.(\d+) messages=(\d+) `).FindStringSubmatch(text)
	if want == nil || got.File != want[1] || got.Session != want[2] || itoa(int64(got.Events)) != want[3] ||
		itoa(int64(got.FirstSeq)) != want[4] || itoa(int64(got.LastSeq)) != want[5] || itoa(int64(got.Report.Messages)) != want[6] || got.Report.Records == 0 ||
		got.Report.Events != got.Events || got.Events == 0 {
		t.Errorf("import --json %s\ntext %s", r.stdout, text)
	}
	if !strings.Contains(text, "imported files=1 sessions=1 events="+itoa(int64(sum.Events))+" ") || sum.Files != 1 || sum.Sessions != 1 ||
		sum.Events != got.Events || len(lines) != 2+sum.Compacted+sum.Refused {
		t.Errorf("import --json summary %+v\n%s\ntext %s", sum, r.stdout, text)
	}
	if len(sessionsOf(t, db)) != 1 {
		t.Errorf("import --json stored sessions %v", sessionsOf(t, db))
	}

	r = cli(t, "", "import", "--format", "openai", "--json", f)
	wantCode(t, r, exitOK)
	plain := cli(t, "", "import", "--format", "openai", f)
	if r.stdout != plain.stdout {
		t.Errorf("--json changed the events on stdout")
	}
	var rep importJSON
	if err := json.Unmarshal([]byte(r.stderr), &rep); err != nil || rep.Type != "imported" || rep.File != f || rep.Events == 0 || rep.FirstSeq != 0 || rep.Report.Records == 0 {
		t.Errorf("import --json report on stderr: %v\n%s", err, r.stderr)
	}
}

// Every command that prints a result takes --json, and the root help says
// so, lists every command and the URL form.
func TestJSON_EveryCommand(t *testing.T) {
	t.Parallel()
	root := mustCLI(t, "--help")
	for _, want := range []string{"--json prints a command's result as JSON", "http://127.0.0.1:6060/debug/strata", "first argument, DB"} {
		if !strings.Contains(root, want) {
			t.Errorf("root help lacks %q:\n%s", want, root)
		}
	}
	for _, c := range []string{"replay", "import", "dump", "resume", "verify", "backup", "stats", "sessions", "version", "eval"} {
		if !strings.Contains(root, "  "+c+" ") {
			t.Errorf("root help does not list %s", c)
		}
		if help := mustCLI(t, c, "--help"); !strings.Contains(help, "--json") {
			t.Errorf("%s takes no --json:\n%s", c, help)
		}
	}
	for _, c := range []string{"demo", "completion"} {
		if !strings.Contains(root, "  "+c+" ") {
			t.Errorf("root help does not list %s", c)
		}
	}
}

// The package documentation (go doc ./cmd/strata) names every command the
// root has, and the URL form.
func TestDoc_ListsEveryCommand(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, c := range newRootCommand().Commands() {
		if !strings.Contains(doc, "//\tstrata "+c.Name()+" ") {
			t.Errorf("doc.go's usage lacks strata %s", c.Name())
		}
	}
	for _, c := range []string{"completion", "version"} { // cobra adds completion on Execute
		if !strings.Contains(doc, "//\tstrata "+c+" ") {
			t.Errorf("doc.go's usage lacks strata %s", c)
		}
	}
	if !strings.Contains(doc, "http://127.0.0.1:6060/debug/strata") {
		t.Error("doc.go does not show the URL form")
	}
}

// completion: a script for each shell, and --session completes the
// session ids of the database the command line names.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		if out := mustCLI(t, "completion", sh); !strings.Contains(out, "strata") || len(out) < 500 {
			t.Errorf("completion %s: %.200q", sh, out)
		}
	}
	for _, tc := range []struct{ args, says string }{
		{"completion", "Error: strata completion needs a command: one of bash, fish, powershell, zsh\n"},
		{"completion tcsh", "Error: strata completion: unknown command \"tcsh\" (want one of bash, fish, powershell, zsh)\n"},
	} {
		r := cli(t, "", strings.Fields(tc.args)...)
		wantCode(t, r, exitUsage, strings.Fields(tc.args)...)
		if !strings.HasPrefix(r.stderr, tc.says) || r.stdout != "" {
			t.Errorf("strata %s: stdout %q, stderr:\n%s", tc.args, r.stdout, r.stderr)
		}
	}
	db := replayed(t, nil, incident(t), writeFile(t, "x.jsonl", `{"session":"mistral","kind":"user","text":"hi"}`+"\n"+
		`{"session":"other","kind":"user","text":"hi"}`+"\n"))
	for _, args := range [][]string{
		{"__complete", "dump", db, "--session", "mi"},
		{"__complete", "stats", db, "--json", "--session", "mi"},
		{"__complete", "resume", "--db", db, "--session", "mi"},
		{"__complete", "resume", db, "--session", "mi"},
	} {
		out := mustCLI(t, args...)
		if lines := strings.Split(out, "\n"); len(lines) < 3 || lines[0] != "mig" || lines[1] != "mistral" || !strings.HasPrefix(lines[2], ":") {
			t.Errorf("%v: %q", args, out)
		}
	}
	if out := mustCLI(t, "__complete", "dump", filepath.Join(t.TempDir(), "absent.db"), "--session", ""); strings.Contains(out, "mig") {
		t.Errorf("completion of a missing database: %q", out)
	}
}

// With --json an error goes to stderr as one JSON line — the message and
// hints of the text form — with the text form's exit code: a failure, bad
// usage (also a flag cobra could not parse), and a replay's bad line after
// its JSON summary on stdout.
func TestJSON_Errors(t *testing.T) {
	t.Parallel()
	db := replayed(t, nil, incident(t))
	missing := filepath.Join(t.TempDir(), "missing.db")
	bad := writeFile(t, "bad.jsonl", `{"session":"s","kind":"dance"}`+"\n")
	for _, args := range [][]string{
		{"dump", missing},
		{"stats", "--session", "nope", db},
		{"resume", db, "--session", "nope"},
		{"dump", "--session", "mig", "--from", "5", "--to", "4", db},
		{"sessions", "--bogus", db},
		{"dump", "--session", "mig", "--from", "70", db},
		{"replay", tempDB(t), bad},
		{"compact", db, "--session", "nope"},
		{"copy", db, db},
	} {
		text := cli(t, "", args...)
		r := cli(t, "", append(args, "--json")...)
		if r.code == exitOK || r.code != text.code {
			t.Errorf("%v --json: exit %d, without --json %d", args, r.code, text.code)
			continue
		}
		var e struct {
			Error    string   `json:"error"`
			Hints    []string `json:"hints"`
			ExitCode int      `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v --json: stderr is not one JSON line (%v):\n%s", args, err, r.stderr)
			continue
		}
		want := "Error: " + e.Error + "\n"
		for _, h := range e.Hints {
			want += "Hint: " + h + "\n"
		}
		if e.ExitCode != r.code || want != text.stderr || e.Hints == nil {
			t.Errorf("%v --json: stderr %s, exit %d; the text form:\n%s", args, r.stderr, r.code, text.stderr)
		}
	}
	r := cli(t, "", "replay", tempDB(t), bad, "--json")
	if !strings.HasPrefix(r.stdout, `{"type":"replayed",`) || !strings.HasPrefix(r.stderr, `{"error":"`+bad+`:1: `) {
		t.Errorf("replay --json of a bad line: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// asText returns stderr in the text form: the line of an error printed
// with --json (errorJSON) as the Error: and Hint: lines it holds; any
// other stderr as it is.
func asText(t testing.TB, stderr string) string {
	t.Helper()
	var e errorJSON
	if !strings.HasPrefix(stderr, `{"error":`) {
		return stderr
	}
	if err := json.Unmarshal([]byte(stderr), &e); err != nil {
		t.Fatalf("stderr is no JSON error (%v): %s", err, stderr)
	}
	text := "Error: " + e.Error + "\n"
	for _, h := range e.Hints {
		text += "Hint: " + h + "\n"
	}
	return text
}
