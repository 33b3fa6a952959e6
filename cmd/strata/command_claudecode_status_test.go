package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/strata-go/strata/checkpoint"
	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/tier"
	"github.com/strata-go/strata/transcript"
)

// claudeCodeFixtures are the repository's Claude Code transcripts.
func claudeCodeFixtures(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.jsonl", filepath.Join("sessions", "*", "*.jsonl")} {
		m, err := filepath.Glob(filepath.Join("..", "..", "transcript", "testdata", "claude-code", pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 4 {
		t.Fatalf("the Claude Code fixtures: %q", files)
	}
	return files
}

// realClaudeCodeTranscripts are the real Claude Code transcripts of the
// project's development data; the test skips without them.
func realClaudeCodeTranscripts(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "shared", "data", "claude-code", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("the real Claude Code transcripts (../shared/data/claude-code) are absent")
	}
	return files
}

// statusOf runs status with args and decodes its JSON.
func statusOf(t testing.TB, args ...string) companion.Status {
	t.Helper()
	out := mustCLI(t, append([]string{"claude-code", "status", "--json"}, args...)...)
	var st companion.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return st
}

// checkStatusFacts fails t unless each session's line in st says what the
// store holds, computed here from its raw events: the events, the Claude
// Code compactions among them, and at the latest marker's boundary the
// ledger a replay of the events up to there gives.
func checkStatusFacts(t testing.TB, st companion.Status, db string, transcripts []string) {
	t.Helper()
	ids := sessionsOf(t, db)
	sdb, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	if len(st.Sessions) != len(ids) {
		t.Fatalf("status lists %d sessions, the store holds %d", len(st.Sessions), len(ids))
	}
	boundaries := 0
	for _, f := range transcripts {
		boundaries += len(regexp.MustCompile(`"subtype": *"compact_boundary"`).FindAll(readBytes(t, f), -1))
	}
	compactions := 0
	for i, s := range st.Sessions {
		if s.ID != ids[i] {
			t.Fatalf("session %d is %q, the store's %q", i, s.ID, ids[i])
		}
		compactions += s.Compactions
		info, err := sdb.Info(s.ID)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := sdb.Resume(s.ID, store.Latest)
		if err != nil {
			t.Fatal(err)
		}
		if rc.Source != checkpoint.SourceMarker {
			if s.LatestMarker != 0 || s.Facts != nil || s.Boundary != 0 {
				t.Errorf("%s: %+v; a resume falls back to a checkpoint (%s)", s.ID, s, rc.Reason)
			}
			continue
		}
		if s.Events != info.Head || s.LatestMarker != rc.Marker || s.MarkersValid == 0 || s.Facts == nil || s.Boundary != rc.Boundary {
			t.Errorf("%s: %+v; head %d, resume from marker %d at %d", s.ID, s, info.Head, rc.Marker, rc.Boundary)
			continue
		}
		l := tier.NewLedger()
		want := companion.Facts{}
		n := 0
		err = sdb.View(func(snap *store.Snapshot) error {
			return snap.Events(s.ID, 1, info.Head, func(e tier.Event) error {
				if transcript.IsClaudeCodeCompaction(e) {
					n++
				}
				if e.Seq > s.Boundary {
					return nil
				}
				if (e.Kind == tier.KindToolResult || e.Kind == tier.KindClose) && e.Failed {
					want.Failures++
				}
				return l.Apply(&e)
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		want.Unresolved, want.Constraints, want.Artifacts = len(l.OpenList()), len(l.ConstraintList()), len(l.ArtifactList())
		for _, d := range l.DispositionList() {
			switch d.State {
			case tier.KindRejected:
				want.Rejected++
			case tier.KindSuperseded:
				want.Superseded++
			case tier.KindFailed:
				want.FailedKeys++
			}
		}
		if *s.Facts != want || s.Compactions != n {
			t.Errorf("%s: facts %+v, compactions %d; the raw log up to seq %d implies %+v, and holds %d", s.ID, *s.Facts, s.Compactions, s.Boundary, want, n)
		}
	}
	if compactions != boundaries {
		t.Errorf("status counts %d compactions; the transcripts hold %d compact_boundary records", compactions, boundaries)
	}
}

func TestClaudeCodeStatus(t *testing.T) {
	t.Parallel()
	dir, _ := newProject(t, nil)
	store := filepath.Join(dir, ".claude", "strata.db")

	// Before install: nothing installed, no store; a state, exit 0.
	out := mustCLI(t, "claude-code", "status", "--dir", dir)
	want := "hooks: not installed: " + filepath.Join(dir, ".claude", "settings.json") + " does not exist; strata claude-code install adds them\n" +
		"store: " + store + ": none yet (the hook makes it at the first compaction)\n"
	if out != want {
		t.Errorf("status before install:\n%s\nwant\n%s", out, want)
	}
	mustCLI(t, "claude-code", "install", "--dir", dir)
	st := statusOf(t, "--dir", dir)
	if !st.Installed || len(st.Hooks) != 3 || len(st.Missing) != 0 || st.Store != store || st.StoreExists || len(st.Sessions) != 0 {
		t.Errorf("status after install: %+v", st)
	}
	for i, ev := range claudecode.HookEvents {
		if h := st.Hooks[i]; h.Event != ev.Name || h.Matcher != ev.Matcher || h.Command != defaultHookCommand {
			t.Errorf("hook %d: %+v", i, h)
		}
	}

	files := claudeCodeFixtures(t)
	// The fixtures are small beside the default policy's window: a small
	// policy compacts some of them.
	mustCLI(t, append([]string{"import", "--format", "claude-code", "--db", store, "--every-tokens", "500"}, files...)...)
	before := readBytes(t, store)
	out = mustCLI(t, "claude-code", "status", "--dir", dir)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 7 || lines[0] != "hooks: installed in "+filepath.Join(dir, ".claude", "settings.json") ||
		lines[1] != "  PreCompact: "+defaultHookCommand || lines[2] != "  SessionStart (matcher compact): "+defaultHookCommand ||
		lines[3] != "  PostCompact: "+defaultHookCommand || lines[4] != "store: "+store ||
		!regexp.MustCompile(`^SESSION +EVENTS +COMPACTIONS +MARKERS +LATEST +OPEN +FAILED +REJECTED +SUPERSEDED +ARTIFACTS +CONSTRAINTS$`).MatchString(lines[5]) {
		t.Fatalf("status:\n%s", out)
	}
	st = statusOf(t, "--dir", dir)
	if len(lines) != 6+len(st.Sessions) {
		t.Errorf("status: %d lines for %d sessions:\n%s", len(lines), len(st.Sessions), out)
	}
	withMarker := 0
	for i, s := range st.Sessions {
		cols := []string{fmt.Sprint(s.Events), fmt.Sprint(s.Compactions), fmt.Sprint(s.MarkersValid), "-", "-", "-", "-", "-", "-", "-"}
		if f := s.Facts; f != nil {
			withMarker++
			cols = append(cols[:3], fmt.Sprint(s.LatestMarker), fmt.Sprint(f.Unresolved), fmt.Sprint(f.Failures), fmt.Sprint(f.Rejected),
				fmt.Sprint(f.Superseded), fmt.Sprint(f.Artifacts), fmt.Sprint(f.Constraints))
		}
		re := `^` + regexp.QuoteMeta(s.ID) + ` +` + strings.Join(cols, " +") + `$`
		if !regexp.MustCompile(re).MatchString(lines[6+i]) {
			t.Errorf("line %q does not match %s", lines[6+i], re)
		}
	}
	if withMarker == 0 || withMarker == len(st.Sessions) {
		t.Errorf("%d of %d sessions with a marker: the fixtures have both kinds", withMarker, len(st.Sessions))
	}
	checkStatusFacts(t, st, store, files)
	// The fixture of a compaction: its failures, its rejection and the
	// call still open at the marker.
	var cc *companion.SessionStatus
	for i := range st.Sessions {
		if st.Sessions[i].ID == "7f3c2a10-5b1e-4c8e-9d2a-1f0e6b7a9c41" {
			cc = &st.Sessions[i]
		}
	}
	if cc == nil || cc.Compactions != 1 || cc.Facts.Failures != 2 || cc.Facts.Rejected != 1 || cc.Facts.Unresolved != 1 {
		t.Errorf("the session of session.jsonl: %+v", cc)
	}
	if !bytes.Equal(readBytes(t, store), before) {
		t.Error("status changed the store")
	}

	// --db names another store; one that is not there is none yet.
	if st := statusOf(t, "--dir", dir, "--db", filepath.Join(dir, "other.db")); st.StoreExists || st.Store != filepath.Join(dir, "other.db") || !st.Installed {
		t.Errorf("status --db: %+v", st)
	}
	// A file that is not a store is an error.
	notStore := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notStore, []byte("not a database, but long enough to be read as one that is not strata's"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "", "claude-code", "status", "--dir", dir, "--db", notStore)
	wantCode(t, r, exitError)
	if !strings.HasPrefix(r.stderr, "Error: ") {
		t.Errorf("stderr: %s", r.stderr)
	}
	// What the settings say comes first, whatever the store's state.
	if want := "hooks: installed in " + filepath.Join(dir, ".claude", "settings.json") + "\n  PreCompact: " + defaultHookCommand + "\n"; !strings.HasPrefix(r.stdout, want) || strings.Contains(r.stdout, "store:") {
		t.Errorf("status of a file not a store: stdout\n%s\nwant first\n%s", r.stdout, want)
	}
	wantCode(t, cli(t, "", "claude-code", "status", "--dir", dir, "--timeout", "0s"), exitUsage)

	// Hooks for one event only: partly installed.
	settings := filepath.Join(dir, ".claude", "settings.json")
	text := strings.Replace(string(readBytes(t, settings)), `"matcher": "compact"`, `"matcher": "compact", "hooks": []}, {"matcher": "x"`, 1)
	text = strings.Replace(text, `"SessionStart"`, `"Stop"`, 1)
	if err := os.WriteFile(settings, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, "--dir", dir); st.Installed || len(st.Missing) != 1 || st.Missing[0] != "SessionStart" {
		t.Errorf("status of hooks under PreCompact and Stop: %+v", st)
	}
	if out := mustCLI(t, "claude-code", "status", "--dir", dir); !strings.HasPrefix(out, "hooks: partly installed in "+settings+", none under SessionStart;") {
		t.Errorf("status:\n%s", out)
	}
}

// The real transcripts, one of them with a real compaction, imported into
// the store of a project as the hook would: status counts what they hold.
func TestClaudeCodeStatus_RealTranscripts(t *testing.T) {
	t.Parallel()
	files := realClaudeCodeTranscripts(t)
	dir, _ := newProject(t, nil)
	mustCLI(t, "claude-code", "install", "--dir", dir)
	db := filepath.Join(dir, ".claude", "strata.db")
	// A summary every 500 tokens: every failure stands before the latest
	// marker (the default policy leaves the last ~40k tokens raw).
	mustCLI(t, append([]string{"import", "--format", "claude-code", "--db", db, "--every-tokens", "500"}, files...)...)
	st := statusOf(t, "--dir", dir)
	if !st.StoreExists || len(st.Sessions) != len(files) {
		t.Fatalf("status: %+v", st)
	}
	checkStatusFacts(t, st, db, files)
	failures := 0
	for _, s := range st.Sessions {
		failures += s.Facts.Failures
	}
	// Each transcript holds 8 tool results with is_error (the data's
	// README); every one stands before its session's latest marker.
	isError := 0
	for _, f := range files {
		isError += len(regexp.MustCompile(`"is_error": *true`).FindAll(readBytes(t, f), -1))
	}
	if failures != isError {
		t.Errorf("the latest markers carry %d failures; the transcripts hold %d is_error results", failures, isError)
	}
}

// A store status cannot read — damaged, held by another process past
// --timeout — is an error, exit 1, after the hooks part; with --json the
// document comes all the same, "sessions" null, its "error" and "hints"
// those stderr gives.
func TestClaudeCodeStatus_StoreUnreadable(t *testing.T) {
	t.Parallel()
	dir, _ := newProject(t, nil)
	mustCLI(t, "claude-code", "install", "--dir", dir)
	damaged, damage := damagedDB(t)
	damage()
	held := tempDB(t)
	w, err := store.Open(held, store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, c := range []struct {
		name, db, error, hint string
	}{
		{"damaged", damaged, "store: database is damaged: ", "the database is damaged; to list every problem it holds, run: strata verify " + shellQuote(damaged)},
		{"held", held, "another process holds the database: ", "another process has it open; stop it, or read a backup"},
	} {
		r := cli(t, "", "claude-code", "status", "--dir", dir, "--db", c.db, "--timeout", "50ms", "--json")
		wantCode(t, r, exitError, c.name)
		var st companion.Status
		var raw map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || json.Unmarshal([]byte(r.stdout), &raw) != nil {
			t.Fatalf("%s: stdout is no document (%v):\n%s", c.name, err, r.stdout)
		}
		if s, ok := raw["sessions"]; !ok || s != nil {
			t.Errorf("%s: \"sessions\" %v; want null", c.name, s)
		}
		if !st.Installed || len(st.Hooks) != 3 || st.Store != c.db || !st.StoreExists ||
			!strings.HasPrefix(st.Error, c.error) || !slices.Contains(st.Hints, c.hint) {
			t.Errorf("%s: %+v", c.name, st)
		}
		var e errorJSON
		if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Error != st.Error || !slices.Equal(e.Hints, st.Hints) || e.ExitCode != exitError {
			t.Errorf("%s: stderr\n%s\nwant what the document says as JSON (%v)", c.name, r.stderr, err)
		}
		stderr := "Error: " + st.Error + "\n"
		for _, h := range st.Hints {
			stderr += "Hint: " + h + "\n"
		}
		// As text: the hooks part, then the same error on stderr.
		text := cli(t, "", "claude-code", "status", "--dir", dir, "--db", c.db, "--timeout", "50ms")
		wantCode(t, text, exitError, c.name)
		if text.stderr != stderr || !strings.HasPrefix(text.stdout, "hooks: installed in ") || strings.Contains(text.stdout, "store:") {
			t.Errorf("%s as text: stdout\n%s\nstderr\n%s\nwant the hooks part, and on stderr\n%s", c.name, text.stdout, text.stderr, stderr)
		}
	}
}

// The hooks as install writes them, run by the CLI on the inputs Claude
// Code 2.1.332 gave in its live order (PreCompact, SessionStart(compact),
// PostCompact with its compact_summary, then the records): status --json
// lists the check PostCompact stored, with the facts the summary omitted.
func TestClaudeCodeStatus_SummaryOmitted(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "data", "realclient")
	raw, err := os.ReadFile(filepath.Join(dir, "claude-code-2.1.332-print-task-compact-followup.jsonl"))
	if err != nil {
		t.Skipf("../shared/data/realclient is absent: %v", err)
	}
	hookIO, err := os.ReadFile(filepath.Join(dir, "claude-code-2.1.332-hook-io.jsonl"))
	if err != nil {
		t.Skipf("../shared/data/realclient is absent: %v", err)
	}
	var summary string
	for _, l := range strings.Split(strings.TrimSpace(string(hookIO)), "\n") {
		var rec struct {
			Stdin map[string]any `json:"stdin"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if s, ok := rec.Stdin["compact_summary"].(string); ok && summary == "" {
			summary = s
		}
	}
	lines := strings.SplitAfter(string(raw), "\n")
	b := 0
	for b < len(lines) && !strings.Contains(lines[b], `"subtype":"compact_boundary"`) {
		b++
	}
	if summary == "" || b == len(lines) {
		t.Fatalf("recorded files: no compact_summary, or no compact_boundary record")
	}
	const session, cwd = "eb72a658-51cf-440d-816b-f3ae99a9bb8e", "/home/dev/rc/cc1"
	project := t.TempDir()
	t.Chdir(project)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("CLAUDE_PROJECT_DIR", project)
	mustCLI(t, "claude-code", "install")
	transcript := filepath.Join(project, "transcript.jsonl")
	if err := os.WriteFile(transcript, []byte(strings.Join(lines[:b], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	hook := func(input string) {
		t.Helper()
		r := cli(t, input, "claude-code", "hook", "--db", filepath.Join(project, ".claude", "strata.db"))
		wantCode(t, r, exitOK)
	}
	hook(ccInput("PreCompact", session, transcript, cwd))
	hook(ccInput("SessionStart", session, transcript, cwd))
	post, _ := json.Marshal(map[string]string{"session_id": session, "transcript_path": transcript, "cwd": cwd,
		"hook_event_name": "PostCompact", "trigger": "manual", "compact_summary": summary})
	hook(string(post))
	if err := os.WriteFile(transcript, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	hook(ccInput("PreCompact", session, transcript, cwd))

	st := statusOf(t)
	if len(st.Sessions) != 1 || st.Sessions[0].Compactions != 1 || len(st.Sessions[0].SummaryChecks) != 1 {
		t.Fatalf("status: %+v; want one session, one compaction, one check", st.Sessions)
	}
	c := st.Sessions[0].SummaryChecks[0]
	want := []string{"FAILED `ls /nonexistent/dir` (Bash)", "artifact migrations/003_down.sql"}
	// The doc's figures: the check is the event after PreCompact's head,
	// seq 9 (the transcript's first 9 events), made at PostCompact.
	if c.Seq != 10 || c.Boundary != 9 || c.Facts != 2 || c.Omitted != 2 || c.SummarySeq != 0 || !slices.Equal(c.SummaryOmitted, want) {
		t.Errorf("summary check %+v; want both facts omitted: %q", c, want)
	}
	out := mustCLI(t, "claude-code", "status", "--json")
	if !strings.Contains(out, `"summary_omitted": [`) {
		t.Errorf("status --json lacks summary_omitted:\n%s", out)
	}
}
