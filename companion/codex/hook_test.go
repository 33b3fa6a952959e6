package codex_test

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
	"github.com/strata-go/strata/companion/codex"
	"github.com/strata-go/strata/companion/internal/hooktest"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/store/storetest"
	"github.com/strata-go/strata/tier"
)

// The files recorded from the real Codex 0.171.0 (README there).
const (
	realclientDir     = "../../../shared/data/realclient"
	realclientRollout = "codex-0.171.0-rollout-exec-auto-compact.jsonl"
	realclientInputs  = "codex-0.171.0-hook-inputs.jsonl"
)

// hookRun is one hook input Codex gave, and how many lines its rollout
// held when the hook ran.
type hookRun struct {
	in    companion.Input
	lines int
}

// linesAt reads "lines=N" of a recorded probe.
var linesAt = regexp.MustCompile(`\blines=(\d+)\b`)

// readRecorded reads the recorded rollout's lines and the hook inputs of
// its run (cx3) in the order Codex ran them, each pointed at path; it
// skips t when the files are absent.
func readRecorded(t *testing.T, path string) ([][]byte, []hookRun) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(realclientDir, realclientRollout))
	if err != nil {
		t.Skipf("%s is absent: %v", realclientDir, err)
	}
	var lines [][]byte
	for _, l := range bytes.SplitAfter(raw, []byte("\n")) {
		if len(l) > 0 {
			lines = append(lines, l)
		}
	}
	f, err := os.Open(filepath.Join(realclientDir, realclientInputs))
	if err != nil {
		t.Skipf("%s is absent: %v", realclientInputs, err)
	}
	defer f.Close()
	var runs []hookRun
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Run   string          `json:"run"`
			Stdin json.RawMessage `json:"stdin"`
			Probe string          `json:"probe"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(l.Run, "cx3 ") {
			continue
		}
		in, err := companion.ReadInput(codex.Agent{}, bytes.NewReader(l.Stdin))
		if err != nil {
			t.Fatalf("a recorded input: %v", err)
		}
		m := linesAt.FindStringSubmatch(l.Probe)
		if m == nil {
			t.Fatalf("probe %q: no lines=", l.Probe)
		}
		n, _ := strconv.Atoi(m[1])
		in.TranscriptPath = path
		runs = append(runs, hookRun{in, n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 5 {
		t.Fatalf("%d hook inputs of cx3, want 5", len(runs))
	}
	return lines, runs
}

// writeTo makes the file at path hold lines, appending what it lacks.
func writeTo(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	have, _ := os.ReadFile(path)
	all := bytes.Join(lines, nil)
	if !bytes.HasPrefix(all, have) {
		t.Fatalf("%s holds what lines do not begin with", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(all[len(have):]); err != nil {
		t.Fatal(err)
	}
}

func newHook(t testing.TB, db *store.DB) *companion.Hook {
	t.Helper()
	h, err := companion.New(db, codex.Agent{}, companion.Options{DB: ".codex/strata.db"})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHook_LiveOrder drives the hook inputs Codex 0.171.0 gave, in the
// order it ran them, against its recorded rollout as the file stood at
// each (the recorded probe counts its lines): PreCompact compacts at the
// head; Codex writes its compacted record, then runs PostCompact, which
// checks the record's summary — it names neither the failed ls nor the
// file written — and SessionStart(compact), which injects the state at
// the cut. Run again, or on the grown rollout, no hook stores anything
// twice, and the injection Codex records as a hook's developer message
// is never the user's words.
func TestHook_LiveOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollout.jsonl")
	lines, runs := readRecorded(t, path)
	db := dbtest.Open(t, store.Options{NoSync: true})
	h := newHook(t, db)
	session := runs[0].in.SessionID
	const (
		failed  = "FAILED `ls /nonexistent/dir` (exec_command)"
		written = "migrations/003_down.sql"
		task    = "TASK-A: write the down migration for the widgets table"
	)
	var head uint64
	var text string
	for _, hr := range runs {
		writeTo(t, path, lines[:hr.lines])
		r := hooktest.Run(t, h, hr.in)
		switch (codex.Agent{}).Action(&hr.in) {
		case companion.ActionIgnore:
			if !r.Ignored || r.Output != nil {
				t.Errorf("%s source %s: %s; want it ignored", hr.in.HookEventName, hr.in.Source, r.Line())
			}
		case companion.ActionCompact:
			if len(r.Compactions) == 0 || !r.Compactions[0].Committed() || r.Output != nil {
				t.Fatalf("PreCompact: %s; want a marker at the head", r.Line())
			}
			head = r.Import.Last
		case companion.ActionCheck:
			c := r.Check
			if c == nil || c.Summary == 0 || c.Boundary != head || r.Output != nil {
				t.Fatalf("PostCompact: %s; want the compacted record's summary checked at PreCompact's head %d", r.Line(), head)
			}
			if got := strings.Join(c.Unmentioned, "|"); !strings.Contains(got, failed) || !strings.Contains(got, "artifact "+written) {
				t.Errorf("PostCompact: the summary's unmentioned facts %q, want the failed ls and %s", c.Unmentioned, written)
			}
		case companion.ActionInject:
			text = hooktest.AdditionalContext(t, r.Output, companion.EventSessionStart)
			if r.State == nil || r.State.Boundary != head || r.Unwritten || r.NoBoundary {
				t.Fatalf("SessionStart(compact): %s; want the state at the cut, seq %d", r.Line(), head)
			}
		}
	}
	for _, want := range []string{failed, "artifact: " + written, task} {
		if !strings.Contains(text, want) {
			t.Errorf("the injected state lacks %q:\n%s", want, text)
		}
	}
	checks := func() (n int) {
		for _, e := range storetest.Events(t, db, session) {
			if _, _, ok := companion.ParseCheck(e); ok {
				n++
			}
		}
		return n
	}
	if n := checks(); n != 1 {
		t.Errorf("%d checks stored, want PostCompact's once", n)
	}

	// Every hook again on the whole rollout: the follow-up turn is
	// imported once, the injection Codex recorded (a developer message of
	// a hook's output) is not, and nothing is checked twice.
	writeTo(t, path, lines)
	before := len(storetest.Events(t, db, session))
	added := 0
	for _, hr := range runs[2:] {
		added += hooktest.Run(t, h, hr.in).Import.Events
	}
	if again := hooktest.Run(t, h, runs[4].in); again.Import.Events != 0 {
		t.Errorf("a hook run again stored %d events", again.Import.Events)
	}
	evs := storetest.Events(t, db, session)
	if len(evs) != before+added || checks() != 1 {
		t.Errorf("%d events after %d and %d added, %d checks", len(evs), before, added, checks())
	}
	var users []string
	compactions := 0
	for _, e := range evs {
		switch {
		case e.Kind == tier.KindUser:
			users = append(users, e.Text)
		case (codex.Agent{}).IsCompaction(e):
			compactions++
		}
	}
	if strings.Join(users, "|") != task+"|Follow-up 2: what is the state of the work, and did anything fail?" || compactions != 1 {
		t.Errorf("user events %q, %d compactions; want the two prompts and one", users, compactions)
	}
}

// A summary that names the failed command and the file written mentions
// every fact: the check reads an exec_command's command from its cmd, and
// a file by its path under the session's directory.
func TestHook_SummaryThatMentionsAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollout.jsonl")
	lines, runs := readRecorded(t, path)
	for i, l := range lines {
		l = bytes.ReplaceAll(l, []byte("Errors: none. Every step succeeded."), []byte("Errors: `ls /nonexistent/dir` failed."))
		lines[i] = bytes.ReplaceAll(l, []byte("Files: none of note."), []byte("Files: wrote migrations/003_down.sql."))
	}
	h := newHook(t, dbtest.Open(t, store.Options{NoSync: true}))
	var check *companion.Check
	for _, hr := range runs[:3] {
		writeTo(t, path, lines[:hr.lines])
		if r := hooktest.Run(t, h, hr.in); r.Check != nil {
			check = r.Check
		}
	}
	if check == nil || check.Facts != 2 || len(check.Unmentioned) != 0 {
		t.Fatalf("check %+v; want both facts mentioned", check)
	}
}

// The hook's log names Codex's own record: PostCompact on the rollout as
// it stood at PreCompact, its compacted record not there, says
// "compacted_not_written_yet"; SessionStart(compact) with no compaction
// at all says "no_compacted nothing_injected".
func TestHook_LogNamesCompacted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollout.jsonl")
	lines, runs := readRecorded(t, path)
	var pre, post, start companion.Input
	var at int
	for _, hr := range runs {
		switch hr.in.HookEventName {
		case codex.EventPreCompact:
			pre, at = hr.in, hr.lines
		case codex.EventPostCompact:
			post = hr.in
		case codex.EventSessionStart:
			if hr.in.Source == codex.SourceCompact {
				start = hr.in
			}
		}
	}
	writeTo(t, path, lines[:at])
	db := dbtest.Open(t, store.Options{NoSync: true})
	h := newHook(t, db)
	if r := hooktest.Run(t, h, start); !r.NoBoundary || !strings.HasSuffix(r.Line(), " no_compacted nothing_injected") {
		t.Errorf("SessionStart(compact) before any compaction: %s", r.Line())
	}
	hooktest.Run(t, h, pre)
	if r := hooktest.Run(t, h, post); !r.Unwritten || !strings.HasSuffix(r.Line(), " compacted_not_written_yet") || strings.Contains(r.Line(), "compact_boundary") {
		t.Errorf("PostCompact before the compacted record: %s", r.Line())
	}
}
