package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
)

// fixture returns the path of a transcript fixture of package transcript.
func fixture(t testing.TB, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "transcript", "testdata", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ledgerOf returns a session's ledger in the database at path.
func ledgerOf(t testing.TB, path, session string) *tier.Ledger {
	t.Helper()
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var l *tier.Ledger
	if err := db.View(func(s *store.Snapshot) (err error) { l, err = s.Ledger(session); return err }); err != nil {
		t.Fatalf("ledger of %s: %v", session, err)
	}
	return l
}

// keys returns the ids of the open calls, the artifacts' keys and the
// rejected keys of l.
func keys(l *tier.Ledger) (open, arts, rejected []string) {
	for _, o := range l.OpenList() {
		open = append(open, o.ID)
	}
	for _, a := range l.ArtifactList() {
		arts = append(arts, a.Key)
	}
	for _, d := range l.DispositionList() {
		if d.State == tier.KindRejected {
			rejected = append(rejected, d.Key)
		}
	}
	return
}

// ccSession is the session the Claude Code fixture's records name.
const ccSession = "7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41"

// The Claude Code fixture, imported to stdout and replayed, or imported
// straight into a database, gives the ledger the transcript implies, in
// the session its records name, and the same database.
func TestImport_ClaudeCodeBothWays(t *testing.T) {
	file := fixture(t, "claude-code/session.jsonl")
	r := cli(t, "", "import", "--format", "claude-code", file)
	wantCode(t, r, exitOK, "import")
	if strings.Contains(r.stdout, `"seq"`) || strings.Contains(r.stdout, `"turn"`) {
		t.Errorf("stdout carries seq or turn: replay into an existing session would refuse it")
	}
	rd := tier.NewReader(strings.NewReader(r.stdout), "stdout", tier.Limits{})
	n := 0
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("stdout is not the event format: %v", err)
		}
		if rec.Session != ccSession || rec.Event.Ref == "" {
			t.Fatalf("line %d has session %q ref %q, want the records' sessionId and a ref", rec.Line, rec.Session, rec.Event.Ref)
		}
		n++
	}
	if n != 26 {
		t.Errorf("%d events on stdout, want 26", n)
	}
	for _, want := range []string{"import: " + file + ": session=" + ccSession + " records=30 events=26", "renamed_calls=1", "orphan_results=1", "duplicate_records=1", "sidechain=2", "unknown=x-new-record-kind:1"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}

	viaReplay := tempDB(t)
	wantCode(t, cli(t, r.stdout, "replay", "--db", viaReplay, "--every-tokens", "0", "--every-events", "8", "-"), exitOK, "replay")
	direct := tempDB(t)
	out := mustCLI(t, "import", "--format", "claude-code", "--db", direct, "--every-tokens", "0", "--every-events", "8", file)
	if !strings.HasPrefix(out, "imported file="+file+" session="+ccSession+" events=26 seq=1..26 ") || !strings.Contains(out, "rejected=1") {
		t.Errorf("summary line %q", out)
	}
	if !strings.Contains(out, "\ncompacted session="+ccSession+" depth=1 ") || !strings.HasSuffix(out, "\nimported files=1 sessions=1 events=26 known=0 compacted=3 refused=0\n") {
		t.Errorf("import --db does not compact as replay does: %q", out)
	}
	for _, db := range []string{viaReplay, direct} {
		open, arts, rej := keys(ledgerOf(t, db, ccSession))
		if !slices.Equal(open, []string{"toolu_06"}) || !slices.Equal(arts, []string{"tests/conftest.py", "tests/test_login.py"}) ||
			!slices.Equal(rej, []string{"tool/Edit:.github/workflows/ci.yml"}) {
			t.Errorf("%s: open %q artifacts %q rejected %q", db, open, arts, rej)
		}
	}
	if d1, d2 := mustCLI(t, "dump", "--json", "--raw", viaReplay), mustCLI(t, "dump", "--json", "--raw", direct); d1 != d2 {
		t.Errorf("the dumps of the replayed and the imported database differ")
	}
	// Imported again, into the same database: nothing added, and said so;
	// replayed again, recognised line by line: nothing added either.
	again := mustCLI(t, "import", "--format", "claude-code", "--db", direct, file)
	if !strings.HasPrefix(again, "imported file="+file+" session="+ccSession+" events=0 known=21 ") ||
		!strings.HasSuffix(again, "imported files=1 sessions=1 events=0 known=21 compacted=0 refused=0\n") {
		t.Errorf("a second import: %q", again)
	}
	rr := cli(t, r.stdout, "replay", "--db", viaReplay, "-")
	wantCode(t, rr, exitOK, "replay again")
	if rr.stdout != "replayed files=1 events=0 sessions=1 compacted=0 refused=0 known=26\n" {
		t.Errorf("replay again: stdout %q", rr.stdout)
	}
	dbtest.MustVerify(t, direct)
	dbtest.MustVerify(t, viaReplay)
}

// A file with invalid JSON is refused with its line, and nothing of it is
// stored; the file before it is.
func TestImport_AllOfAFileOrNothing(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(good, []byte(`{"role":"user","content":"hi"}`+"\n"), 0o600)
	os.WriteFile(bad, []byte(`{"role":"user","content":"one"}`+"\n"+`{"role":"assistant","content":"two"}`+"\n"+`{"role":`+"\n"), 0o600)
	db := tempDB(t)
	r := cli(t, "", "import", "--format", "openai", "--db", db, good, bad)
	wantCode(t, r, exitError, "import")
	if !strings.Contains(r.stderr, "Error: "+bad+":3: ") || !strings.Contains(r.stderr, "bad JSON") {
		t.Errorf("stderr %q does not name %s:3", r.stderr, bad)
	}
	if got := sessionsOf(t, db); !slices.Equal(got, []string{"good"}) {
		t.Errorf("sessions %q, want only good's", got)
	}
	// Without --db nothing of the bad file reaches stdout either.
	r = cli(t, "", "import", "--format", "openai", good, bad)
	wantCode(t, r, exitError, "import")
	if strings.Contains(r.stdout, "one") || !strings.Contains(r.stdout, `"hi"`) {
		t.Errorf("stdout %q: want good's event and none of bad's", r.stdout)
	}
}

// A session continued in a second file: the calls the first left open are
// resolved by the second, with --db and through replay.
func TestImport_ContinuesOpenCalls(t *testing.T) {
	first := writeFile(t, "a.jsonl", `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"sh","arguments":"{}"}}]}`+"\n")
	second := writeFile(t, "b.jsonl", `{"role":"tool","tool_call_id":"c1","content":"ok"}`+"\n"+
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"sh","arguments":"{}"}}]}`+"\n")
	db := tempDB(t)
	mustCLI(t, "import", "--format", "openai", "--db", db, "--session", "s", first)
	out := mustCLI(t, "import", "--format", "openai", "--db", db, "--session", "s", second)
	if strings.Contains(out, "orphan_results") {
		t.Errorf("second file: %q: c1 was open in the session", out)
	}
	open, _, _ := keys(ledgerOf(t, db, "s"))
	if !slices.Equal(open, []string{"c1"}) {
		t.Errorf("open %q, want the second c1", open)
	}
	r := cli(t, "", "import", "--format", "openai", "--session", "p", first, second)
	wantCode(t, r, exitOK, "import")
	piped := tempDB(t)
	wantCode(t, cli(t, r.stdout, "replay", "--db", piped, "-"), exitOK, "replay")
	if open, _, _ := keys(ledgerOf(t, piped, "p")); !slices.Equal(open, []string{"c1"}) {
		t.Errorf("piped: open %q", open)
	}
}

func TestImport_Stdin(t *testing.T) {
	in, err := os.ReadFile(fixture(t, "anthropic/messages.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := cli(t, string(in), "import", "--format", "anthropic", "--dir", "/repo", "-")
	wantCode(t, r, exitOK, "import")
	if strings.Contains(r.stdout, `"session"`) || !strings.Contains(r.stdout, `"ref"`) {
		t.Errorf("stdin has no name: its events name no session, and carry their refs")
	}
	db := tempDB(t)
	wantCode(t, cli(t, r.stdout, "replay", "--db", db, "--session", "chat", "-"), exitOK, "replay")
	open, arts, rej := keys(ledgerOf(t, db, "chat"))
	if !slices.Equal(open, []string{"toolu_06"}) || !slices.Equal(arts, []string{"config.py", "tests/test_settings.py"}) ||
		!slices.Equal(rej, []string{"tool/bash:git push --force origin main"}) {
		t.Errorf("open %q artifacts %q rejected %q", open, arts, rej)
	}
	noSession := tempDB(t)
	wantCode(t, cli(t, string(in), "import", "--format", "anthropic", "--db", noSession, "-"), exitUsage, "import --db -")
	if _, err := os.Stat(noSession); !os.IsNotExist(err) {
		t.Errorf("import --db - without --session left a database: %v", err)
	}
	// A Claude Code transcript on stdin names its sessions.
	cc, err := os.ReadFile(fixture(t, "claude-code/session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	r = cli(t, string(cc), "import", "--format", "claude-code", "--db", db, "-")
	wantCode(t, r, exitOK, "import --db - of a Claude Code file")
	if !strings.Contains(r.stdout, "session="+ccSession+" events=26") {
		t.Errorf("claude-code on stdin: %q", r.stdout)
	}
}

func TestImport_Usage(t *testing.T) {
	f := fixture(t, "openai/chat.json")
	for _, args := range [][]string{
		{"import", f},
		{"import", "--format", "cline", f},
		{"import", "--format", "openai"},
		{"import", "--format", "openai", "--session", "a\nb", f},
		// A flag without effect in the combination given.
		{"import", "--format", "openai", "--sidechains", f},
		{"import", "--format", "openai", "--timeout", "5s", f},
		{"import", "--format", "openai", "--fold", "2", f},
	} {
		r := cli(t, "", args...)
		wantCode(t, r, exitUsage, args...)
		if !strings.Contains(r.stderr, "Hint: run 'strata import --help'") {
			t.Errorf("%v: stderr %q", args, r.stderr)
		}
	}
	r := cli(t, "", "import", "--format", "openai", filepath.Join(t.TempDir(), "missing.json"))
	wantCode(t, r, exitError, "import missing")
}

// progressDraw is one drawing of a progress line: "\r" + text + erase to
// the end of the line.
var progressDraw = regexp.MustCompile("\r([^\r\n\x1b]*)\x1b\\[K")

// wellFormed matches the text of a progress line.
var wellFormed = regexp.MustCompile(`^(import|replay|backup|verify): [0-9][0-9,.]*( [KMGT]?i?B)?( of [0-9][0-9,.]*( [KMGT]?i?B)?)?( events)?( \([0-9]{1,3}%\))?(, [0-9,]+ events)?(, [0-9]+/[0-9]+ sessions)?(, [0-9][0-9,.]* ([KMGT]?i?B|events)/s)?(, ETA [0-9hms.]+)?$`)

// Piped, no command draws progress; forced, each draws well-formed lines
// and erases them, leaving the rest of stderr as it would be.
func TestProgress_PipedAndForced(t *testing.T) {
	file := fixture(t, "claude-code/session.jsonl")
	db := tempDB(t)
	runs := func() []result {
		dest := filepath.Join(t.TempDir(), "copy.db")
		os.Remove(db)
		imp := cli(t, "", "import", "--format", "claude-code", file)
		return []result{
			imp,
			cli(t, imp.stdout, "replay", "--db", db, "-"),
			cli(t, "", "backup", db, dest),
			cli(t, "", "verify", db),
		}
	}
	t.Setenv(progressEnv, "")
	quiet := runs()
	for i, r := range quiet {
		wantCode(t, r, exitOK, "run", string(rune('0'+i)))
		if strings.ContainsAny(r.stderr, "\r\x1b") {
			t.Errorf("run %d piped: stderr %q has progress", i, r.stderr)
		}
	}

	t.Setenv(progressEnv, "1")
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 0
	for i, r := range runs() {
		wantCode(t, r, exitOK, "forced run", string(rune('0'+i)))
		draws := progressDraw.FindAllStringSubmatch(r.stderr, -1)
		shown := 0
		for _, d := range draws {
			if d[1] == "" {
				continue // an erase
			}
			shown++
			if !wellFormed.MatchString(d[1]) {
				t.Errorf("run %d: progress line %q is not well formed", i, d[1])
			}
		}
		if shown == 0 && i != 3 { // verify of a tiny database may finish before its first report
			t.Errorf("run %d: forced, yet no progress in %q", i, r.stderr)
		}
		if rest := progressDraw.ReplaceAllString(r.stderr, ""); rest != quiet[i].stderr {
			t.Errorf("run %d: stderr without the progress lines is %q, want %q", i, rest, quiet[i].stderr)
		}
		if shown > 0 && !strings.HasSuffix(r.stderr, "\r\x1b[K") && !strings.HasSuffix(r.stderr, "\n") {
			t.Errorf("run %d: the last progress line is left on the terminal: %q", i, r.stderr)
		}
	}
}

func TestProgress_Line(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &progress{label: "replay", unit: "bytes", total: 100 << 20, done: 50 << 20, events: 12345, start: t0}
	if got, want := p.line(t0.Add(10*time.Second)), "replay: 50.0 MiB of 100.0 MiB (50%), 12,345 events, 5.0 MiB/s, ETA 10s"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	p = &progress{label: "verify", unit: "events", total: 8499, done: 1000, note: "3/273 sessions", start: t0}
	if got, want := p.line(t0.Add(2*time.Second)), "verify: 1,000 of 8,499 events (11%), 3/273 sessions, 500 events/s, ETA 15s"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	p = &progress{label: "import", unit: "bytes", done: 512, start: t0}
	if got, want := p.line(t0.Add(time.Second)), "import: 512 B, 512 B/s"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	for _, l := range []string{"replay: 50.0 MiB of 100.0 MiB (50%), 12,345 events, 5.0 MiB/s, ETA 10s", "verify: 1,000 of 8,499 events (11%), 3/273 sessions, 500 events/s, ETA 15s", "import: 512 B, 512 B/s"} {
		if !wellFormed.MatchString(l) {
			t.Errorf("the test's own pattern refuses %q", l)
		}
	}
	var nilp *progress // progress off: every method is a no-op
	nilp.add(1)
	nilp.clear()
	nilp.finish()
	if r := strings.NewReader("x"); nilp.reader(r) != io.Reader(r) {
		t.Errorf("a nil progress wraps the reader")
	}
}

// On a terminal stdout and stderr are one screen: a progress line must be
// erased before anything else is written, to either stream, or the
// output is printed after the progress text, on its line.
func TestProgress_SharedTerminal(t *testing.T) {
	file := fixture(t, "claude-code/session.jsonl")
	db := tempDB(t)
	t.Setenv(progressEnv, "1")
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 0
	var events string
	for _, args := range [][]string{
		{"import", "--format", "claude-code", file},
		{"replay", "--db", db, "-"},
		{"import", "--format", "claude-code", "--db", db, "--session", "again", file},
		{"backup", db, filepath.Join(t.TempDir(), "copy.db")},
		{"verify", db},
	} {
		var screen bytes.Buffer
		code := run(args, strings.NewReader(events), &screen, &screen)
		if code != exitOK {
			t.Fatalf("strata %s: exit %d: %q", strings.Join(args, " "), code, screen.String())
		}
		s := screen.String()
		if args[0] == "import" && len(args) == 4 {
			events = progressDraw.ReplaceAllString(s, "")
			events = events[:strings.LastIndex(strings.TrimSuffix(events, "\n"), "\n")+1] // the report line is not an event
		}
		for _, m := range progressDraw.FindAllStringSubmatchIndex(s, -1) {
			if m[3] > m[2] && (m[1] == len(s) || s[m[1]] != '\r') {
				t.Errorf("strata %s: progress %q is followed by %q, not erased first", strings.Join(args, " "), s[m[2]:m[3]], s[m[1]:min(len(s), m[1]+40)])
				break
			}
		}
	}
}

// Text that is not UTF-8 in a transcript is read as U+FFFD and counted,
// both on stderr (to stdout) and on the line of an import into a database;
// replay then takes the events as they are.
func TestImport_InvalidUTF8Counted(t *testing.T) {
	file := writeFile(t, "chat.jsonl", "{\"role\":\"user\",\"content\":\"caf\xe9\"}\n"+
		`{"role":"assistant","content":"half a pair: \ud83d"}`+"\n")
	r := cli(t, "", "import", "--format", "openai", file)
	wantCode(t, r, exitOK, "import")
	if !strings.Contains(r.stderr, "invalid_utf8=2") {
		t.Errorf("stderr %q lacks invalid_utf8=2", r.stderr)
	}
	if !strings.Contains(r.stdout, "caf\uFFFD") || strings.Contains(r.stdout, `\ud83d`) {
		t.Errorf("stdout %q: want U+FFFD in place of each", r.stdout)
	}
	db := tempDB(t)
	wantCode(t, cli(t, r.stdout, "replay", "--db", db, "-"), exitOK, "replay")
	out := mustCLI(t, "import", "--format", "openai", "--db", tempDB(t), file)
	if !strings.Contains(out, " invalid_utf8=2") {
		t.Errorf("summary line %q lacks invalid_utf8=2", out)
	}
}
