package claudecode_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
	"github.com/strata-go/strata/companion/internal/hooktest"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/store/storetest"
	"github.com/strata-go/strata/tier"
)

// The files recorded from the real Claude Code 2.1.332 (README there).
const (
	realclientDir        = "../../../shared/data/realclient"
	realclientTranscript = "claude-code-2.1.332-print-task-compact-followup.jsonl"
	realclientHookIO     = "claude-code-2.1.332-hook-io.jsonl"
)

// recorded holds the recorded transcript's lines and the hook inputs of
// its session in the order Claude Code ran them, each input pointed at
// path.
type recorded struct {
	lines    [][]byte
	boundary int // the index of the compact_boundary record's line
	inputs   []companion.Input
}

// readRecorded reads the recorded files, skipping t when they are absent.
// The run of the transcript (cc1) recorded PreCompact and SessionStart;
// PostCompact with its compact_summary was recorded in a probe run (cc5)
// of the same script, whose summary is the very text of the transcript's
// summary record: it is taken with cc1's session.
func readRecorded(t *testing.T, path string) recorded {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(realclientDir, realclientTranscript))
	if err != nil {
		t.Skipf("%s is absent: %v", realclientDir, err)
	}
	var rec recorded
	rec.boundary = -1
	for _, l := range bytes.SplitAfter(raw, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		if rec.boundary < 0 && bytes.Contains(l, []byte(`"subtype":"compact_boundary"`)) {
			rec.boundary = len(rec.lines)
		}
		rec.lines = append(rec.lines, l)
	}
	f, err := os.Open(filepath.Join(realclientDir, realclientHookIO))
	if err != nil {
		t.Skipf("%s is absent: %v", realclientHookIO, err)
	}
	defer f.Close()
	var session string
	var post *companion.Input
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Run   string          `json:"run"`
			Stdin json.RawMessage `json:"stdin"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		in, err := companion.ReadInput(claudecode.Agent{}, bytes.NewReader(l.Stdin))
		if err != nil {
			t.Fatalf("a recorded input: %v", err)
		}
		switch {
		case l.Run == "cc1":
			session = in.SessionID
			in.TranscriptPath = path
			rec.inputs = append(rec.inputs, in)
		case in.HookEventName == claudecode.EventPostCompact && post == nil:
			post = &in
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rec.boundary < 0 || len(rec.inputs) != 2 || post == nil || post.CompactSummary == "" {
		t.Fatalf("recorded files: boundary line %d, %d inputs of cc1, PostCompact %v", rec.boundary, len(rec.inputs), post)
	}
	post.SessionID, post.TranscriptPath, post.Cwd = session, path, rec.inputs[0].Cwd
	rec.inputs = append(rec.inputs, *post)
	return rec
}

func writeLines(t *testing.T, path string, ls [][]byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(bytes.Join(ls, nil)); err != nil {
		t.Fatal(err)
	}
}

// seqOf returns the seq of the event whose text is text.
func seqOf(t *testing.T, evs []tier.Event, kind tier.Kind, text string) uint64 {
	t.Helper()
	for _, e := range evs {
		if e.Kind == kind && e.Text == text {
			return e.Seq
		}
	}
	t.Fatalf("no %s event %q", kind, text)
	return 0
}

// TestHook_LiveOrder drives the hook inputs Claude Code 2.1.332 gave, in
// the order it ran them, against its recorded transcript as the file
// stood at each: PreCompact, SessionStart(compact) and PostCompact run
// before Claude Code appends compact_boundary and the summary. The state
// is injected at SessionStart, the summary is checked at PostCompact from
// its compact_summary — it names neither the failed ls nor the file
// written — and stored once: the hook that later reads the records does
// not check it again.
func TestHook_LiveOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session.jsonl")
	rec := readRecorded(t, path)
	db := dbtest.Open(t, store.Options{NoSync: true})
	h := newHook(t, db, companion.Options{DB: ".claude/strata.db"})
	pre, start, post := rec.inputs[0], rec.inputs[1], rec.inputs[2]
	session := pre.SessionID

	writeLines(t, path, rec.lines[:rec.boundary])
	r := hooktest.Run(t, h, pre)
	if r.Output != nil || len(r.Compactions) == 0 || !r.Compactions[0].Committed() {
		t.Fatalf("PreCompact: %s; want a marker at the head", r.Line())
	}
	head := r.Import.Last

	r = hooktest.Run(t, h, start)
	text := hooktest.AdditionalContext(t, r.Output, companion.EventSessionStart)
	if !r.Unwritten || r.State.Boundary != head || r.Check != nil {
		t.Fatalf("SessionStart: %s; want the state at PreCompact's head %d, no check yet", r.Line(), head)
	}
	for _, want := range []string{"- FAILED `ls /nonexistent/dir` (Bash) — once, newest at seq 4 (call toolu_01FAKE864bddc91d3ef71c)", "artifact: migrations/003_down.sql"} {
		if !strings.Contains(text, want) {
			t.Errorf("the injected state lacks %q:\n%s", want, text)
		}
	}

	r = hooktest.Run(t, h, post)
	want := []string{"FAILED `ls /nonexistent/dir` (Bash)", "artifact migrations/003_down.sql"}
	if r.Output != nil || r.Check == nil || r.Check.Summary != 0 || r.Check.Boundary != head || r.Check.Facts != 2 ||
		strings.Join(r.Check.Unmentioned, "|") != strings.Join(want, "|") {
		t.Fatalf("PostCompact: %s check %+v; want both facts unmentioned at seq %d", r.Line(), r.Check, head)
	}
	if again := hooktest.Run(t, h, post); again.Import.Events != 0 {
		t.Fatalf("PostCompact again stored %d events", again.Import.Events)
	}
	checks := func() (out []companion.Check) {
		for _, e := range storetest.Events(t, db, session) {
			if c, n, ok := companion.ParseCheck(e); ok {
				if n != len(c.Unmentioned) {
					t.Errorf("check %+v counts %d omitted", c, n)
				}
				out = append(out, c)
			}
		}
		return out
	}
	if cs := checks(); len(cs) != 1 || strings.Join(cs[0].Unmentioned, "|") != strings.Join(want, "|") || cs[0].Boundary != head {
		t.Fatalf("stored checks %+v; want PostCompact's, once", cs)
	}

	// Claude Code appends the records; the next hook reads them.
	writeLines(t, path, rec.lines[rec.boundary:])
	r = hooktest.Run(t, h, pre)
	if r.Check != nil || len(checks()) != 1 {
		t.Fatalf("the next PreCompact: %s; want the summary PostCompact checked not checked again", r.Line())
	}
	for _, e := range storetest.Events(t, db, session) {
		if e.Kind == tier.KindUser && strings.Contains(e.Text, "<command-name>") {
			t.Errorf("the /compact command's record is stored as the user's words: %+v", e)
		}
	}
}

// TestHook_LiveOrder_WithoutPostCompact: with no PostCompact hook (an
// install made before it), the summary is checked by the first hook that
// reads its record, at the last event the summary stands for: before the
// message Claude Code keeps verbatim after it (the compact_boundary
// record's preservedSegment).
func TestHook_LiveOrder_WithoutPostCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session.jsonl")
	rec := readRecorded(t, path)
	db := dbtest.Open(t, store.Options{NoSync: true})
	h := newHook(t, db, companion.Options{DB: ".claude/strata.db"})
	pre, start := rec.inputs[0], rec.inputs[1]

	writeLines(t, path, rec.lines[:rec.boundary])
	head := hooktest.Run(t, h, pre).Import.Last
	hooktest.Run(t, h, start)
	writeLines(t, path, rec.lines[rec.boundary:])
	r := hooktest.Run(t, h, start) // SessionStart again: the records are there
	evs := storetest.Events(t, db, pre.SessionID)
	kept := seqOf(t, evs, tier.KindAssistant, "Done: wrote the down migration.")
	if kept != head {
		t.Fatalf("the preserved message is seq %d, PreCompact's head %d", kept, head)
	}
	if r.Check == nil || r.Check.Boundary != kept-1 || r.Check.Summary == 0 || r.State.Boundary != head {
		t.Fatalf("%s: check %+v; want the summary record checked at seq %d, before the preserved message, the state injected at %d", r.Line(), r.Check, kept-1, head)
	}
	if strings.Join(r.Check.Unmentioned, "|") != "FAILED `ls /nonexistent/dir` (Bash)|artifact migrations/003_down.sql" {
		t.Errorf("unmentioned %q", r.Check.Unmentioned)
	}
}
