package claudecode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/strata-go/strata/companion"
	"github.com/strata-go/strata/companion/claudecode"
	"github.com/strata-go/strata/companion/internal/hooktest"
	"github.com/strata-go/strata/internal/dbtest"
	"github.com/strata-go/strata/marker"
	"github.com/strata-go/strata/store"
	"github.com/strata-go/strata/store/storetest"
	"github.com/strata-go/strata/tier"
)

const session = "0b6c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3"

// cc makes the lines of a Claude Code transcript, as Claude Code writes
// them: one JSON object a line, each with a uuid and the session's id.
type cc struct {
	lines []string
	n     int
}

func (c *cc) add(rec map[string]any) string {
	c.n++
	uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", c.n)
	rec["uuid"], rec["sessionId"], rec["cwd"] = uuid, session, "/work/app"
	rec["timestamp"] = time.Date(2026, 2, 1, 10, 0, c.n, 0, time.UTC).Format(time.RFC3339)
	b, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	c.lines = append(c.lines, string(b)+"\n")
	return uuid
}

func (c *cc) user(text string) {
	c.add(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
}

func (c *cc) call(id, name string, input map[string]any) {
	c.add(map[string]any{"type": "assistant", "message": map[string]any{"role": "assistant",
		"content": []any{map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}}}})
}

func (c *cc) result(id, text string, isError bool) {
	c.add(map[string]any{"type": "user", "message": map[string]any{"role": "user",
		"content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": text, "is_error": isError}}}})
}

// compact adds Claude Code's compaction: its compact_boundary record and
// the summary record after it, whose uuids it returns.
func (c *cc) compact(summary string) (boundary, summaryRecord string) {
	boundary = c.add(map[string]any{"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
		"compactMetadata": map[string]any{"trigger": "auto", "preTokens": 160000}})
	return boundary, c.add(map[string]any{"type": "user", "isCompactSummary": true, "message": map[string]any{"role": "user", "content": summary}})
}

// write writes lines from..to of c to the file at path (appending).
func (c *cc) write(t testing.TB, path string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(c.lines[from:to], "")); err != nil {
		t.Fatal(err)
	}
}

// session builds a session: a failed build, a call left running, a
// written file, then Claude Code's compaction, whose summary names the
// file and the command of the running call but not the failure.
func sessionTranscript() (c *cc, boundary int) {
	c = &cc{}
	c.user("Make the build pass.")
	c.call("toolu_build", "Bash", map[string]any{"command": "make build"})
	c.result("toolu_build", "Exit code 2\nmain.go:3: undefined: x", true)
	c.call("toolu_write", "Write", map[string]any{"file_path": "/work/app/main.go", "content": "package main\n"})
	c.result("toolu_write", "File created successfully at: /work/app/main.go", false)
	c.call("toolu_serve", "Bash", map[string]any{"command": "go run ./cmd/server", "run_in_background": true})
	boundary = len(c.lines)
	c.compact("The user asked to make the build pass. main.go was rewritten; `go run ./cmd/server` is running.")
	c.user("Go on.")
	return c, boundary
}

func hookInput(path, event string) companion.Input {
	in := companion.Input{SessionID: session, TranscriptPath: path, Cwd: "/work/app", HookEventName: event}
	if event == claudecode.EventPreCompact {
		in.Trigger = "auto"
	} else {
		in.Source = claudecode.SourceCompact
	}
	return in
}

func newHook(t testing.TB, db *store.DB, opts companion.Options) *companion.Hook {
	t.Helper()
	h, err := companion.New(db, claudecode.Agent{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHook_Run: PreCompact then SessionStart(compact) as Claude Code runs
// them, the transcript growing between: a marker at the boundary, the
// state there injected, the summary checked, and each hook run again
// changes nothing.
func TestHook_Run(t *testing.T) {
	c, boundary := sessionTranscript()
	path := filepath.Join(t.TempDir(), session+".jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	h := newHook(t, db, companion.Options{DB: ".claude/strata.db"})

	c.write(t, path, 0, boundary)
	pre := hooktest.Run(t, h, hookInput(path, claudecode.EventPreCompact))
	if pre.Output != nil || len(pre.Compactions) != 1 || !pre.Compactions[0].Committed() || pre.Compactions[0].To != pre.Import.Last {
		t.Fatalf("PreCompact: %+v; want no output and a marker at the head", pre)
	}
	head := pre.Import.Last
	if again := hooktest.Run(t, h, hookInput(path, claudecode.EventPreCompact)); again.Import.Events != 0 || len(again.Compactions) != 0 {
		t.Fatalf("PreCompact again: %+v; want nothing", again)
	}

	c.write(t, path, boundary, len(c.lines))
	start := hooktest.Run(t, h, hookInput(path, claudecode.EventSessionStart))
	st := start.State
	if st == nil || st.Boundary != head || st.Marker != pre.Compactions[0].Marker || len(start.Compactions) != 0 {
		t.Fatalf("SessionStart: state %+v compactions %+v; want the state at seq %d from PreCompact's marker", st, start.Compactions, head)
	}
	text := hooktest.AdditionalContext(t, start.Output, companion.EventSessionStart)
	for _, want := range []string{
		"## the task (the user's first request, seq 1), in the user's words:\n  Make the build pass.\n",
		"## calls open at the boundary, no result (UNRESOLVED): 1\n- UNRESOLVED call toolu_serve (Bash), opened at seq",
		"## failures that still stand, by what failed, newest first: 1\n- FAILED `make build` (Bash) — once, newest at seq 3 (call toolu_build)\n" +
			"    Exit code 2\n    main.go:3: undefined: x\n",
		"## artifacts (files written), newest first: 1\n- artifact: main.go — written by Write (call toolu_write)",
		fmt.Sprintf("`strata resume --db .claude/strata.db --session %s --marker %d` (marker %d, sha256 %s)", session, st.Marker, st.Marker, st.SHA256),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the injected state lacks %q:\n%s", want, text)
		}
	}
	rc, err := db.Resume(session, st.Marker)
	if err != nil {
		t.Fatal(err)
	}
	if rc.SHA256() != st.SHA256 {
		t.Errorf("resume --marker %d: sha256 %s, the state says %s", st.Marker, rc.SHA256(), st.SHA256)
	}
	// The summary names main.go and the server's command, not the failure.
	if c := start.Check; c == nil || c.Facts != 3 || len(c.Unmentioned) != 1 || c.Unmentioned[0] != "FAILED `make build` (Bash)" {
		t.Fatalf("check: %+v; want the failure alone unmentioned of 3 facts", start.Check)
	}
	evs := storetest.Events(t, db, session)
	last := evs[len(evs)-1]
	if last.Kind != tier.KindSystem || !strings.Contains(last.Text, "it does not mention 1 of them:\n- FAILED `make build` (Bash)") {
		t.Fatalf("the last event is %+v; want the check", last)
	}

	if want := fmt.Sprintf(") prints the whole context, %d bytes: the summary nodes with every fact as their claims, then the %d raw event%s after the boundary.\n",
		len(rc.Text()), len(rc.Events), map[bool]string{true: "s"}[len(rc.Events) != 1]); !strings.Contains(text, want) || len(rc.Events) == 0 {
		t.Errorf("the injected state does not say what resume prints (%q):\n%s", want, text)
	}

	again := hooktest.Run(t, h, hookInput(path, claudecode.EventSessionStart))
	if string(again.Output) != string(start.Output) || len(storetest.Events(t, db, session)) != len(evs) {
		t.Fatalf("SessionStart again: output %s, %d events; want the same output, no event added", again.Output, len(storetest.Events(t, db, session)))
	}
	// PreCompact again with nothing new in the transcript: strata's own
	// check at the head is no reason to compact, and SessionStart after it
	// gives the same bytes.
	markers := func() int {
		n := 0
		if err := db.View(func(s *store.Snapshot) error {
			return s.Markers(session, func(marker.Marker) error { n++; return nil })
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := markers()
	if pre := hooktest.Run(t, h, hookInput(path, claudecode.EventPreCompact)); pre.Import.Events != 0 || len(pre.Compactions) != 0 {
		t.Fatalf("PreCompact after SessionStart, nothing new: %+v; want nothing imported or compacted", pre)
	}
	again = hooktest.Run(t, h, hookInput(path, claudecode.EventSessionStart))
	if string(again.Output) != string(start.Output) || again.Unwritten || len(storetest.Events(t, db, session)) != len(evs) || markers() != before {
		t.Fatalf("SessionStart after PreCompact again: %s (line %q), %d events, %d markers; want the same output, nothing added",
			again.Output, again.Line(), len(storetest.Events(t, db, session)), markers())
	}

	// Records that reach the transcript after SessionStart are compacted
	// by the next PreCompact, strata's check with them.
	c.user("And the tests.")
	c.write(t, path, len(c.lines)-1, len(c.lines))
	next := hooktest.Run(t, h, hookInput(path, claudecode.EventPreCompact))
	if next.Import.Events != 1 || len(next.Compactions) != 1 || !next.Compactions[0].Committed() || next.Compactions[0].From != head+1 || next.Compactions[0].To != next.Import.Last {
		t.Fatalf("PreCompact after a new record: %+v; want seq %d..%d compacted", next, head+1, next.Import.Last)
	}
}

// TestHook_Run_WithoutPreCompact: SessionStart(compact) alone — PreCompact
// did not run, or failed — makes the marker at the boundary itself.
func TestHook_Run_WithoutPreCompact(t *testing.T) {
	c, boundary := sessionTranscript()
	path := filepath.Join(t.TempDir(), session+".jsonl")
	c.write(t, path, 0, len(c.lines))
	db := dbtest.Open(t, store.Options{NoSync: true})
	r := hooktest.Run(t, newHook(t, db, companion.Options{}), hookInput(path, claudecode.EventSessionStart))
	if len(r.Compactions) != 1 || !r.Compactions[0].Committed() || r.State.Marker != r.Compactions[0].Marker || r.Compactions[0].To != r.State.Boundary {
		t.Fatalf("compactions %+v, state %+v; want a marker made at the boundary", r.Compactions, r.State)
	}
	_ = boundary
	if !strings.Contains(hooktest.AdditionalContext(t, r.Output, companion.EventSessionStart), "UNRESOLVED call toolu_serve") {
		t.Fatal("the open call is not injected")
	}
}

// TestHook_Run_BoundaryNotWritten: Claude Code writes its records
// asynchronously; a SessionStart(compact) that finds no compact_boundary
// newer than the head PreCompact compacted — none at all, or only an
// earlier compaction's — injects the state at that head, where PreCompact
// saw Claude Code about to cut.
func TestHook_Run_BoundaryNotWritten(t *testing.T) {
	for _, earlier := range []bool{false, true} {
		t.Run(fmt.Sprintf("earlier_compaction=%v", earlier), func(t *testing.T) {
			c := &cc{}
			if earlier {
				c.user("Start.")
				c.compact("The user said start.")
			}
			c.user("Make the build pass.")
			c.call("toolu_build", "Bash", map[string]any{"command": "make build"})
			c.result("toolu_build", "Exit code 2", true)
			path := filepath.Join(t.TempDir(), session+".jsonl")
			c.write(t, path, 0, len(c.lines))
			db := dbtest.Open(t, store.Options{NoSync: true})
			h := newHook(t, db, companion.Options{})
			pre := hooktest.Run(t, h, hookInput(path, claudecode.EventPreCompact))
			r := hooktest.Run(t, h, hookInput(path, claudecode.EventSessionStart))
			if !r.Unwritten || r.State.Boundary != pre.Import.Last || r.Check != nil || !strings.Contains(r.Line(), " compact_boundary_not_written_yet ") {
				t.Fatalf("%+v, line %q; want the state at seq %d, PreCompact's head, and no check", r, r.Line(), pre.Import.Last)
			}
			if !strings.Contains(hooktest.AdditionalContext(t, r.Output, companion.EventSessionStart), "- FAILED `make build` (Bash) — once") {
				t.Fatal("the failure is not injected")
			}
		})
	}
}

// TestHook_Run_NoBoundary: SessionStart(compact) on a transcript without a
// compact_boundary record, PreCompact not run: the records are imported,
// as the next PreCompact would, nothing is compacted or injected, and the
// line says so.
func TestHook_Run_NoBoundary(t *testing.T) {
	c, boundary := sessionTranscript()
	path := filepath.Join(t.TempDir(), session+".jsonl")
	c.write(t, path, 0, boundary)
	db := dbtest.Open(t, store.Options{NoSync: true})
	r := hooktest.Run(t, newHook(t, db, companion.Options{}), hookInput(path, claudecode.EventSessionStart))
	if !r.NoBoundary || r.Output != nil || r.State != nil || len(r.Compactions) != 0 || r.Import.Events == 0 ||
		len(storetest.Events(t, db, session)) != r.Import.Events || !strings.HasSuffix(r.Line(), " no_compact_boundary nothing_injected") {
		t.Fatalf("%+v, line %q; want the records imported, nothing else", r, r.Line())
	}
}

// compacted runs sessionTranscript as Claude Code would: PreCompact on
// the records before its compaction, then SessionStart on the whole file,
// whose summary it checks.
func compacted(t *testing.T) (c *cc, boundary int, path string, db *store.DB, h *companion.Hook, start *companion.Result) {
	t.Helper()
	c, boundary = sessionTranscript()
	path = filepath.Join(t.TempDir(), session+".jsonl")
	db = dbtest.Open(t, store.Options{NoSync: true})
	h = newHook(t, db, companion.Options{})
	c.write(t, path, 0, boundary)
	hooktest.Run(t, h, hookInput(path, claudecode.EventPreCompact))
	c.write(t, path, boundary, len(c.lines))
	start = hooktest.Run(t, h, hookInput(path, claudecode.EventSessionStart))
	if start.Check == nil || start.Unwritten {
		t.Fatalf("SessionStart: %q; want the summary checked", start.Line())
	}
	return c, boundary, path, db, h, start
}

// TestHook_Run_BoundaryFromStore: SessionStart finds Claude Code's
// compaction in the store, where the import stored its records, not in
// the file: run again on a transcript rewritten to hold only the records
// after the summary, it finds the same boundary and summary, and gives the
// same output.
func TestHook_Run_BoundaryFromStore(t *testing.T) {
	c, boundary, path, _, h, start := compacted(t)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	c.write(t, path, boundary+2, len(c.lines))
	again := hooktest.Run(t, h, hookInput(path, claudecode.EventSessionStart))
	if string(again.Output) != string(start.Output) || again.Unwritten || again.NoBoundary || again.Check == nil ||
		again.Check.Summary != start.Check.Summary || again.State.Boundary != start.State.Boundary || again.Import.Events != 0 {
		t.Fatalf("SessionStart on the rewritten file: %q; want the boundary and summary of the store, the same output as %q", again.Line(), start.Line())
	}
}

// TestHook_Run_SummaryNotWrittenYet: Claude Code has written its
// compact_boundary record but not the summary after it: the state at the
// boundary is injected, no summary is checked; SessionStart run again once
// the summary is written checks it, and stores the check once.
func TestHook_Run_SummaryNotWrittenYet(t *testing.T) {
	c, boundary := sessionTranscript()
	path := filepath.Join(t.TempDir(), session+".jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	h := newHook(t, db, companion.Options{})
	c.write(t, path, 0, boundary)
	pre := hooktest.Run(t, h, hookInput(path, claudecode.EventPreCompact))
	c.write(t, path, boundary, boundary+1)
	r := hooktest.Run(t, h, hookInput(path, claudecode.EventSessionStart))
	if r.Unwritten || r.Check != nil || r.State == nil || r.State.Boundary != pre.Import.Last || strings.Contains(r.Line(), "summary_seq=") {
		t.Fatalf("%q; want the state at seq %d, no check", r.Line(), pre.Import.Last)
	}
	evs := storetest.Events(t, db, session)
	if last := evs[len(evs)-1]; !strings.HasPrefix(last.Text, "Claude Code compacted the conversation") {
		t.Fatalf("the last event is %+v; want the compaction's, no check after it", last)
	}
	c.write(t, path, boundary+1, len(c.lines))
	r = hooktest.Run(t, h, hookInput(path, claudecode.EventSessionStart))
	if r.Check == nil || r.Check.Summary != pre.Import.Last+2 || r.State.Boundary != pre.Import.Last {
		t.Fatalf("with the summary written: %q; want it checked at seq %d", r.Line(), pre.Import.Last+2)
	}
	checks := func() int {
		n := 0
		for _, e := range storetest.Events(t, db, session) {
			if strings.HasPrefix(e.Ref, "strata:summary-check:") {
				n++
			}
		}
		return n
	}
	if n := checks(); n != 1 {
		t.Fatalf("%d checks stored, want 1", n)
	}
	hooktest.Run(t, h, hookInput(path, claudecode.EventSessionStart))
	if n := checks(); n != 1 {
		t.Fatalf("run again: %d checks stored, want 1", n)
	}
}

// TestHook_Run_NoSummaryRecord: a compact_boundary record followed by
// none flagged isCompactSummary — the next record is the user's — has no
// summary to check: the user's message is not taken for one.
func TestHook_Run_NoSummaryRecord(t *testing.T) {
	c, boundary := sessionTranscript()
	c.lines = c.lines[:boundary+1] // the compact_boundary record, then no summary
	c.user("Go on.")
	path := filepath.Join(t.TempDir(), session+".jsonl")
	c.write(t, path, 0, len(c.lines))
	db := dbtest.Open(t, store.Options{NoSync: true})
	r := hooktest.Run(t, newHook(t, db, companion.Options{}), hookInput(path, claudecode.EventSessionStart))
	if r.Check != nil || r.State == nil || r.NoBoundary || r.Unwritten || len(r.Compactions) != 1 || r.Compactions[0].To != r.State.Boundary {
		t.Fatalf("%q; want a marker at the boundary, no check", r.Line())
	}
}

// TestHook_Run_BoundaryWalk: SessionStart walks back from the head to the
// compaction a block of events at a time: however many events follow the
// summary — none, a block's worth, the compact_boundary's event and the
// summary's in two blocks — the boundary and the summary are the same.
func TestHook_Run_BoundaryWalk(t *testing.T) {
	for _, after := range []int{0, 1, 61, 62, 63, 64, 65, 130} {
		t.Run(strconv.Itoa(after), func(t *testing.T) {
			c := &cc{}
			c.user("Make the build pass.")
			c.call("toolu_build", "Bash", map[string]any{"command": "make build"})
			c.result("toolu_build", "Exit code 2", true)
			bound, summary := c.compact("The build failed.")
			for i := range after {
				c.user(fmt.Sprintf("Step %d.", i))
			}
			path := filepath.Join(t.TempDir(), session+".jsonl")
			c.write(t, path, 0, len(c.lines))
			db := dbtest.Open(t, store.Options{NoSync: true})
			r := hooktest.Run(t, newHook(t, db, companion.Options{}), hookInput(path, claudecode.EventSessionStart))
			var b, s store.RefSpan
			if err := db.View(func(snap *store.Snapshot) error {
				var err error
				if b, _, err = snap.Ref(session, bound); err != nil {
					return err
				}
				s, _, err = snap.Ref(session, summary)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if r.State == nil || r.State.Boundary != b.First-1 || r.Check == nil || r.Check.Summary != s.First || s.First != b.First+1 {
				t.Fatalf("%q; want the boundary at seq %d, the summary at %d", r.Line(), b.First-1, s.First)
			}
		})
	}
}

// TestHook_RunTranscript_ReadsTheOpenFile: the hook reads the transcript
// it was given open, not its path again: removed after it was opened, it
// is read all the same.
func TestHook_RunTranscript_ReadsTheOpenFile(t *testing.T) {
	c, boundary := sessionTranscript()
	path := filepath.Join(t.TempDir(), session+".jsonl")
	db := dbtest.Open(t, store.Options{NoSync: true})
	h := newHook(t, db, companion.Options{})
	for _, step := range []struct {
		event    string
		from, to int
	}{{claudecode.EventPreCompact, 0, boundary}, {claudecode.EventSessionStart, boundary, len(c.lines)}} {
		c.write(t, path, step.from, step.to)
		tr, err := hookInput(path, step.event).OpenTranscript()
		if err != nil {
			t.Fatal(err)
		}
		// Moved aside: the path names no file while the hook runs.
		if err := os.Rename(path, path+".aside"); err != nil {
			t.Fatal(err)
		}
		r, err := h.RunTranscript(context.Background(), tr)
		if cerr := tr.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("%s: %v; want the open transcript read", step.event, err)
		}
		if r.Import.Events == 0 {
			t.Fatalf("%s: %q; want the open transcript read", step.event, r.Line())
		}
		if err := os.Rename(path+".aside", path); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := (companion.Input{TranscriptPath: path + ".none"}).OpenTranscript(); err == nil {
		t.Fatal("OpenTranscript of no file: no error")
	}
}

// TestHook_Run_Ignored: other events and sources do nothing.
func TestHook_Run_Ignored(t *testing.T) {
	db := dbtest.Open(t, store.Options{NoSync: true})
	h := newHook(t, db, companion.Options{})
	for _, in := range []companion.Input{
		{HookEventName: "SessionStart", Source: "startup", SessionID: session, TranscriptPath: "/nonexistent"},
		{HookEventName: "SessionStart", Source: "resume", SessionID: session},
		{HookEventName: "UserPromptSubmit", SessionID: session},
	} {
		r := hooktest.Run(t, h, in)
		if !r.Ignored || r.Output != nil || !strings.HasSuffix(r.Line(), " ignored") {
			t.Errorf("%+v: %+v, line %q; want ignored", in, r, r.Line())
		}
	}
	if ids, err := db.Sessions(); err != nil || len(ids) != 0 {
		t.Fatalf("sessions %v, %v; want none", ids, err)
	}
}

// TestState_Render_Budget: what does not fit is counted, never cut
// silently; the task and the newest request are always there; the text
// stays within the budget and is the same every time.
func TestState_Render_Budget(t *testing.T) {
	st := &companion.State{Session: session, Boundary: 500, Marker: 7, SHA256: strings.Repeat("ab", 32)}
	for i := 59; i >= 0; i-- { // newest first, as State holds them
		st.Claims.Failures = append(st.Claims.Failures, tier.Resolution{ID: fmt.Sprintf("toolu_%02d", i), Kind: tier.KindToolCall,
			Name: "Bash", Seq: uint64(2*i + 1), At: uint64(2*i + 2), Failed: true, Reason: "Exit code 1\n" + strings.Repeat("x", 20*i),
			Target: fmt.Sprintf("./check-%02d.sh", i)})
	}
	st.Claims.Artifacts = []tier.Artifact{{Key: "a.go", Text: "written by Write", Seq: 3}}
	st.Claims.Requests = []tier.Request{{Seq: 1, Text: "Make every check pass.\nStart with the oldest."}, {Seq: 200, Text: "older"}, {Seq: 400, Text: "Now the newest one."}}
	st.Claims.RequestsLeftOut = 5
	for _, budget := range []int{companion.MinBudget, 800, 5000} {
		r := st.Render("strata.db", budget)
		if r.Tokens > budget || tier.TokensOfBytes(len(r.Text)) != r.Tokens || r.Facts != 61+3+5 {
			t.Fatalf("budget %d: %d tokens, %d facts", budget, r.Tokens, r.Facts)
		}
		if again := st.Render("strata.db", budget); again != r {
			t.Fatalf("budget %d: two renderings differ", budget)
		}
		for _, want := range []string{
			"## the task (the user's first request, seq 1), in the user's words:\n  Make every check pass.\n  Start with the oldest.\n",
			"## the user's newest request (seq 400), in the user's words:\n  Now the newest one.\n",
			"## earlier requests of the user, newest first: 6\n",
		} {
			if !strings.Contains(r.Text, want) {
				t.Fatalf("budget %d: no %q:\n%s", budget, want, r.Text)
			}
		}
		shown := strings.Count(r.Text, "\n- FAILED `")
		more := 0
		if m := regexp.MustCompile(`… and (\d+) more standing failures? not shown`).FindStringSubmatch(r.Text); m != nil {
			more, _ = strconv.Atoi(m[1])
		}
		if shown+more != 60 || shown == 0 {
			t.Fatalf("budget %d: %d failures shown and %d counted, of 60:\n%s", budget, shown, more, r.Text)
		}
		prev := 60
		for _, m := range regexp.MustCompile("- FAILED `./check-(\\d+).sh` ").FindAllStringSubmatch(r.Text, -1) {
			n, _ := strconv.Atoi(m[1])
			if n >= prev {
				t.Fatalf("budget %d: check-%02d after check-%02d: not newest first:\n%s", budget, n, prev, r.Text)
			}
			prev = n
		}
		if budget == 5000 && !strings.Contains(r.Text, "- FAILED `./check-59.sh` (Bash) — once, newest at seq 120 (call toolu_59)\n    Exit code 1\n    "+strings.Repeat("x", 160)+"…(1020 more bytes)\n") {
			t.Fatalf("a long output is not cut saying so:\n%s", r.Text)
		}
	}
}

// TestState_Render_FailuresByTarget: failures of one target are one fact
// with their count and the newest output; a target a later call fixed is
// shown fixed, not standing.
func TestState_Render_FailuresByTarget(t *testing.T) {
	st := &companion.State{Session: session, Boundary: 50}
	push := func(id string, at, fixed uint64, out string) tier.Resolution {
		return tier.Resolution{ID: id, Kind: tier.KindToolCall, Name: "Bash", Seq: at - 1, At: at, Failed: true, Reason: out,
			Target: "git push", Fixed: fixed}
	}
	st.Claims.Failures = []tier.Resolution{
		push("t3", 30, 0, "error: failed to push some refs\r\nhint: pull first"),
		push("t2", 20, 0, "old"),
		{ID: "t1", Kind: tier.KindToolCall, Name: "Edit", Seq: 9, At: 10, Failed: true, Reason: "String not found", Target: "/src/a.go", Fixed: 12},
	}
	text := st.Render("db", 0).Text
	for _, want := range []string{
		"## failures that still stand, by what failed, newest first: 1\n- FAILED `git push` (Bash) — 2 times, newest at seq 30 (call t3)\n    error: failed to push some refs\n    hint: pull first\n",
		"## failures since fixed (a later call on the same target succeeded): 1\n- fixed: `/src/a.go` (Edit) — failed once, newest at seq 10; succeeded at seq 12\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `\n"`) || strings.Contains(text, "\n    old\n") {
		t.Errorf("a literal \\n, or an older output:\n%s", text)
	}
}

func TestReadInput(t *testing.T) {
	good := `{"session_id":"` + session + `","transcript_path":"/t.jsonl","cwd":"/w","hook_event_name":"PreCompact","trigger":"manual","custom_instructions":""}`
	in, err := companion.ReadInput(claudecode.Agent{}, strings.NewReader(good))
	if err != nil || in.SessionID != session || in.Trigger != "manual" || !in.Handled() {
		t.Fatalf("%+v, %v", in, err)
	}
	if in, err := companion.ReadInput(claudecode.Agent{}, strings.NewReader(`{"hook_event_name":"Stop"}`)); err != nil || in.Handled() {
		t.Fatalf("an event the hook leaves alone: %+v, %v", in, err)
	}
	for name, bad := range map[string]string{
		"not JSON":      "PreCompact please",
		"an array":      `[1]`,
		"no event":      `{"session_id":"s"}`,
		"no session":    `{"hook_event_name":"PreCompact","transcript_path":"/t"}`,
		"no transcript": `{"hook_event_name":"SessionStart","source":"compact","session_id":"s"}`,
		"bad session":   `{"hook_event_name":"PreCompact","transcript_path":"/t","cwd":"/w","session_id":"a\u0001b"}`,
		"no cwd":        `{"hook_event_name":"PreCompact","transcript_path":"/t","session_id":"s"}`,
		"relative cwd":  `{"hook_event_name":"SessionStart","source":"compact","transcript_path":"/t","session_id":"s","cwd":"rel"}`,
		"too large":     `{"hook_event_name":"PreCompact","x":"` + strings.Repeat("x", 1<<20) + `"}`,
	} {
		if _, err := companion.ReadInput(claudecode.Agent{}, strings.NewReader(bad)); !errors.Is(err, companion.ErrBadInput) {
			t.Errorf("%s: err %v, want ErrBadInput", name, err)
		}
	}
}

// TestAppendLog: one line a call, line breaks made spaces; past
// MaxLogBytes the log is moved aside and begun again.
func TestAppendLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), companion.LogName)
	at := time.Date(2026, 2, 1, 10, 0, 0, 0, time.FixedZone("x", 3600))
	if err := companion.AppendLog(path, at, "PreCompact FAILED\nreading"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "2026-02-01T09:00:00Z PreCompact FAILED reading\n" {
		t.Fatalf("log %q", b)
	}
	big := strings.Repeat("x", companion.MaxLogBytes)
	for range 2 {
		if err := companion.AppendLog(path, at, big); err != nil {
			t.Fatal(err)
		}
	}
	old, err := os.ReadFile(path + ".1")
	if err != nil || !strings.HasPrefix(string(old), "2026-02-01T09:00:00Z PreCompact FAILED reading\n") {
		t.Fatalf("the moved log: %.80q, %v", old, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() > companion.MaxLogBytes+100 {
		t.Fatalf("the log after moving: %v, %v", fi, err)
	}
}

func TestDefaultStore(t *testing.T) {
	if got := companion.DefaultStore(claudecode.Agent{}, "/p", "/c"); got != "/p/.claude/strata.db" {
		t.Errorf("with CLAUDE_PROJECT_DIR: %s", got)
	}
	if got := companion.DefaultStore(claudecode.Agent{}, "", "/c"); got != "/c/.claude/strata.db" {
		t.Errorf("without: %s", got)
	}
	for _, dirs := range [][2]string{{"", ""}, {"", "rel"}, {"p", "c"}} {
		if got := companion.DefaultStore(claudecode.Agent{}, dirs[0], dirs[1]); got != "" {
			t.Errorf("DefaultStore(%q, %q) = %q; want none", dirs[0], dirs[1], got)
		}
		if got := companion.DefaultLog(claudecode.Agent{}, "", dirs[0], dirs[1]); got != "" {
			t.Errorf("DefaultLog(\"\", %q, %q) = %q; want none", dirs[0], dirs[1], got)
		}
	}
	if got := companion.DefaultStore(claudecode.Agent{}, "p", "/c"); got != "/c/.claude/strata.db" {
		t.Errorf("a relative CLAUDE_PROJECT_DIR: %s", got)
	}
	if got := companion.DefaultLog(claudecode.Agent{}, "/d/x.db", "/p", "/c"); got != "/d/strata.log" {
		t.Errorf("a file's log: %s", got)
	}
	if got := companion.DefaultLog(claudecode.Agent{}, "postgres://h/db", "/p", "/c"); got != "/p/.claude/strata.log" {
		t.Errorf("a URL's log: %s", got)
	}
}

// TestHook_Run_CheckFollowsTheHeadsTime: the check of Claude Code's
// summary is stored after the session's head with the newest time the
// session holds — the records after the summary are later than it — so
// that the session's times never go back.
func TestHook_Run_CheckFollowsTheHeadsTime(t *testing.T) {
	_, _, _, db, _, _ := compacted(t)
	evs := storetest.Events(t, db, session)
	last := evs[len(evs)-1]
	if !strings.HasPrefix(last.Ref, "strata:summary-check:") {
		t.Fatalf("the head is %+v, want the check", last)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Time < evs[i-1].Time {
			t.Errorf("seq %d (%s) at %d, before seq %d at %d", evs[i].Seq, evs[i].Kind, evs[i].Time, evs[i-1].Seq, evs[i-1].Time)
		}
	}
	if prev := evs[len(evs)-2]; last.Time != prev.Time {
		t.Errorf("the check at %d, want the time of the event before it, %d", last.Time, prev.Time)
	}
}
